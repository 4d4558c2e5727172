"""`--kube-api-content-type`: what JSON and protobuf reads cost kube-apiserver and kcm (issue 29).

- One `kcm dev --apiserver=upstream` stack (etcd, kube-apiserver v1.32, the simulator with one
  node per 100 pods, only the serviceaccount controller); `--pods` (3,000) pods are created and
  run by the simulator, and the stack settles.
- Then, `--repeat` (3) times and alternating, for each media type, asked for as kcm's client
  asks (`contenttype.ContentType(...).accept`): a list of every pod, and a watch from
  resourceVersion 0 (kube-apiserver sends every pod as an ADDED event from its watch cache). Each
  answer is read whole first (kube-apiserver's CPU is counted over that read alone), then
  decoded as the watcher's path does (kcm's client's conversion to JSON, then the watcher's
  msgspec views) for this process's CPU: a slow decoder does not widen the server's window.
- Printed per media type: kube-apiserver's CPU seconds (/proc) and this process's (the client's)
  per 1,000 pods for the list and for the watch (medians over the repeats, with the range), and
  the ratios protobuf / JSON. kube-apiserver serves the rest of the stack meanwhile (node
  heartbeats, the kcm watcher): its CPU over `IDLE_S` of doing nothing, measured first, is taken
  as the background rate and subtracted for each read's wall time. A watch kube-apiserver ends
  before every pod has arrived (it closes watches that fall behind on a loaded machine) counts
  per event received. Protobuf pays for kcm when what it saves kube-apiserver exceeds what it
  costs the client; the last lines say which.
- Figures are printed, never enforced; the exit status is non-zero only when the stack does not
  start or a request fails.

    .venv/bin/python bench/content_type.py --pods 3000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import benchlib
from kcm_shared.apimachinery import protobuf
from kcm_shared.client import contenttype, kubeclient
from kcm_watcher import objects

MEDIA = (contenttype.JSON, contenttype.PROTOBUF)
NAMESPACE = "bench-content-type"
CREATE_CONCURRENCY = 32
IDLE_S = 10.0


def pod(i: int) -> dict[str, object]:
    """A pod shaped like a ReplicaSet's: labels, an owner, resources, a probe, env, a volume."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p-{i:05d}",
            "labels": {"app": "bench", "pod-template-hash": "5f7c9d8b6"},
            "annotations": {"example.com/revision": "1"},
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/app:1.2.3",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "env": [{"name": "MODE", "value": "bench"}],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
                    "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "terminationGracePeriodSeconds": 5,
        },
    }


async def create_pods(client: kubeclient.KubeClient, count: int) -> None:
    path = kubeclient.resource_path("", "v1", "pods", NAMESPACE)
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await client.create(path, pod(i))

    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))


async def fetch(session: aiohttp.ClientSession, url: str, accept: str, watch: int) -> tuple[str, bytes]:
    """The raw answer to a list (`watch` 0) or to a watch from resourceVersion 0, read until
    `watch` events arrived or the server ended it: what kube-apiserver spends, and no decoding."""
    params = {"resourceVersion": "0", "watch": "true", "timeoutSeconds": "120"} if watch else {}
    async with session.get(url, params=params, headers={"Accept": accept}) as resp:
        resp.raise_for_status()
        ctype = resp.headers.get("Content-Type", "")
        if not watch:
            return ctype, await resp.read()
        chunks: list[bytes] = []
        async for chunk in resp.content.iter_any():
            chunks.append(chunk)
            if events(ctype, b"".join(chunks)) >= watch:
                break
        return ctype, b"".join(chunks)


def events(ctype: str, stream: bytes) -> int:
    if contenttype.is_protobuf(ctype):
        return len(protobuf.split_frames(stream, contenttype.MAX_FRAME)[0])
    return stream.count(b"\n")


def decode(phase: str, ctype: str, body: bytes) -> int:
    """What kcm's client and watcher do with the answer: JSON from it, then the watcher's views."""
    if phase == "list":
        page = objects.decode_page(contenttype.json_body(ctype, body))
        for item in page.items:
            objects.decode_head(item)
        return len(page.items)
    if contenttype.is_protobuf(ctype):
        lines = contenttype.WatchFrames().feed(body)
    else:
        lines = [line for line in body.split(b"\n") if line]
    for line in lines:
        objects.decode_line(line)
    return len(lines)


async def bench(args: argparse.Namespace) -> int:
    problems: list[str] = []
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-content-type-") as tmp:
        dev_args = [
            "--apiserver=upstream",
            "--controllers",
            "serviceaccount",
            "--nodes",
            str(max(1, args.pods // 100)),
        ]
        async with benchlib.kcm_dev(benchlib.kcm_command(args), Path(tmp), dev_args) as dev:
            apiserver = next(
                pid
                for pid in benchlib.descendants(dev.proc.pid)
                if benchlib.service_name(pid) == "kube-apiserver"
            )
            conn = kubeclient.load_connection(str(dev.state / "kubeconfig"))
            admin = kubeclient.KubeClient(conn, qps=0, user_agent="bench-content-type")
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=conn.ssl_context), headers=conn.headers
            )
            try:
                await admin.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
                started = time.monotonic()
                await create_pods(admin, args.pods)
                print(f"{args.pods} pods created in {time.monotonic() - started:.1f}s", file=sys.stderr)
                await benchlib.settle(benchlib.descendants(dev.proc.pid), limit_s=120, idle_cpu_s=0.3)
                path = kubeclient.resource_path("", "v1", "pods", NAMESPACE)
                idle0 = benchlib.process_cpu_seconds(apiserver)
                await asyncio.sleep(IDLE_S)
                background = (benchlib.process_cpu_seconds(apiserver) - idle0) / IDLE_S
                print(f"kube-apiserver's background: {background:.3f} CPU s/s", file=sys.stderr)
                url = conn.server + path
                for _ in range(args.repeat):
                    for media in MEDIA:
                        accept = contenttype.ContentType(media).accept("GET", path)
                        for phase in ("list", "watch"):
                            server0, wall0 = benchlib.process_cpu_seconds(apiserver), time.monotonic()
                            ctype, body = await fetch(
                                session, url, accept, args.pods if phase == "watch" else 0
                            )
                            server = benchlib.process_cpu_seconds(apiserver) - server0
                            server -= background * (time.monotonic() - wall0)
                            client0 = time.process_time()
                            got = decode(phase, ctype, body)
                            client = time.process_time() - client0
                            if got == 0 or (phase == "list" and got != args.pods):
                                problems.append(f"{media} {phase}: {got} pods, not {args.pods}")
                                continue
                            if got != args.pods:
                                print(
                                    f"{media} {phase}: the server ended it after {got} pods", file=sys.stderr
                                )
                            figures.setdefault((media, phase), []).append(
                                (server * 1000 / got, client * 1000 / got)
                            )
            finally:
                await admin.close()
                await session.close()
    report(figures, args.pods)
    return benchlib.exit_status(problems)


def spread(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[0], ordered[-1]


def report(figures: dict[tuple[str, str], list[tuple[float, float]]], pods: int) -> None:
    print(
        f"CPU seconds per 1,000 pods (median [min-max] of {len(next(iter(figures.values())))} runs, {pods} pods)"
    )
    print(f"{'phase':6} {'media type':38} {'kube-apiserver':>24} {'kcm client':>24}")
    medians: dict[tuple[str, str], tuple[float, float]] = {}
    for (media, phase), runs in sorted(figures.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        server = spread([r[0] for r in runs])
        client = spread([r[1] for r in runs])
        medians[media, phase] = (server[0], client[0])
        print(
            f"{phase:6} {media:38} {server[0]:8.3f} [{server[1]:.3f}-{server[2]:.3f}]"
            f" {client[0]:8.3f} [{client[1]:.3f}-{client[2]:.3f}]"
        )
    for phase in ("list", "watch"):
        js, pb = medians[contenttype.JSON, phase], medians[contenttype.PROTOBUF, phase]
        saved, extra = js[0] - pb[0], pb[1] - js[1]
        print(
            f"{phase}: protobuf/JSON kube-apiserver {pb[0] / js[0]:.2f}, kcm client {pb[1] / js[1]:.2f}; "
            f"protobuf saves kube-apiserver {saved:.3f}s and costs kcm {extra:+.3f}s per 1,000 pods: "
            + ("protobuf is cheaper overall" if saved > extra else "JSON is cheaper overall")
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=3)
    benchlib.add_kcm_argument(p)
    return benchlib.run(bench(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
