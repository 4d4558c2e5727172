"""Benchmark of deleting a namespace that holds a 500-pod Deployment and 2,000 ConfigMaps
(issue 14); run by `make bench`.

Runs the stack as a user does, `kcm dev` (embedded API server and simulator, nats-server,
watcher, coordinator, and the deployment and replicaset controllers), with enough simulated
nodes for the pods. In that one stack, twice:

1. Baseline, while no namespace controller runs: a client in this process deletes the
   namespace (so it turns Terminating and takes no new content, as for the controller), sends
   one `deletecollection` (propagationPolicy Background) for each namespaced resource
   discovery lists with that verb (the list is read before the clock starts), lists them
   until all are empty, and finalizes the namespace (`PUT namespaces/<name>/finalize`).
2. The namespace controller, started beside the stack (`kcm controller namespace` with its
   own NATS identity, as docs/runtime.md describes), does the same for another namespace
   filled the same way, after `kubectl delete ns` would have sent the DELETE.

Each figure runs from the namespace's DELETE until a GET of it answers 404 (polled every
POLL seconds). The pods are Running on simulated nodes with the default 30 s grace period,
so both wait for their kubelets; the controller adds upstream's 5 s grace before it starts,
and between its rounds waits estimate/2+1 s (16 s while pods may still be in their grace
period). The ratio controller / baseline is the issue's figure (goal: 1.25 or less).

Timings are printed, never enforced: the exit status is non-zero only when the stack does
not start, a request fails, or a namespace is not gone in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import benchlib
import msgspec
from kcm_coordinator import status

PODS = 500
CONFIGMAPS = 2000
PODS_PER_NODE = 100  # below the simulated nodes' 110-pod capacity
CONCURRENCY = 32
POLL = 0.1  # seconds between GETs of the namespace being deleted
GONE_LIMIT = 300.0
READY_LIMIT = 300.0
DELETE_BACKGROUND = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}


class _Meta(msgspec.Struct):
    name: str = ""


class _Item(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _List(msgspec.Struct):
    items: list[_Item] = msgspec.field(default_factory=list)


class _DeploymentStatus(msgspec.Struct, rename="camel"):
    available_replicas: int = 0


class _Deployment(msgspec.Struct):
    status: _DeploymentStatus = msgspec.field(default_factory=_DeploymentStatus)


def ns_url(url: str, namespace: str, *rest: str) -> str:
    return "/".join([f"{url}/api/v1/namespaces/{namespace}", *rest])


async def fill(session: aiohttp.ClientSession, url: str, namespace: str) -> None:
    """The namespace with a Deployment of PODS Running pods and CONFIGMAPS ConfigMaps."""
    await benchlib.call(session, "POST", f"{url}/api/v1/namespaces", {"metadata": {"name": namespace}})
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": PODS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }
    deployments = f"{url}/apis/apps/v1/namespaces/{namespace}/deployments"
    await benchlib.call(session, "POST", deployments, deployment)
    room = asyncio.Semaphore(CONCURRENCY)

    async def configmap(i: int) -> None:
        async with room:
            body = {"metadata": {"name": f"cm-{i}"}, "data": {"key": f"value-{i}"}}
            await benchlib.call(session, "POST", ns_url(url, namespace, "configmaps"), body)

    await asyncio.gather(*(configmap(i) for i in range(CONFIGMAPS)))
    deadline = time.monotonic() + READY_LIMIT
    while True:
        raw = await benchlib.call(session, "GET", f"{deployments}/web")
        if msgspec.json.decode(raw, type=_Deployment).status.available_replicas >= PODS:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{namespace}: the Deployment's {PODS} pods were not all available in time")
        await asyncio.sleep(0.5)


async def collections(session: aiohttp.ClientSession, url: str) -> list[str]:
    """The collection path (with a `{ns}` placeholder) of every namespaced resource at its
    group's preferred version that takes deletecollection and list."""
    groups = [("", "v1")]
    apis = msgspec.json.decode(await benchlib.call(session, "GET", f"{url}/apis"))
    groups += [(g["name"], g["preferredVersion"]["version"]) for g in apis["groups"]]
    out = []
    for group, version in groups:
        base = f"{url}/apis/{group}/{version}" if group else f"{url}/api/{version}"
        doc = msgspec.json.decode(await benchlib.call(session, "GET", base))
        for r in doc["resources"]:
            if r["namespaced"] and "/" not in r["name"] and {"deletecollection", "list"} <= set(r["verbs"]):
                out.append(f"{base}/namespaces/{{ns}}/{r['name']}")
    return out


async def wait_gone(session: aiohttp.ClientSession, url: str, namespace: str) -> None:
    deadline = time.monotonic() + GONE_LIMIT
    while not await _absent(session, url, namespace):
        if time.monotonic() > deadline:
            raise RuntimeError(f"namespace {namespace} still there after {GONE_LIMIT:.0f} s")
        await asyncio.sleep(POLL)


async def _absent(session: aiohttp.ClientSession, url: str, namespace: str) -> bool:
    async with session.get(ns_url(url, namespace)) as resp:
        await resp.read()
        return resp.status == 404


async def delete_by_hand(session: aiohttp.ClientSession, url: str, namespace: str, paths: list[str]) -> float:
    """The baseline: seconds from the DELETE until the namespace is gone."""
    started = time.perf_counter()
    await benchlib.call(session, "DELETE", ns_url(url, namespace))
    targets = [p.format(ns=namespace) for p in paths]
    await asyncio.gather(
        *(benchlib.call(session, "DELETE", path, DELETE_BACKGROUND, allowed=(404, 405)) for path in targets)
    )
    while targets:
        lists = await asyncio.gather(*(benchlib.call(session, "GET", path) for path in targets))
        targets = [
            path
            for path, raw in zip(targets, lists, strict=True)
            if msgspec.json.decode(raw, type=_List).items
        ]
        if targets:
            await asyncio.sleep(POLL)
    ns = msgspec.json.decode(await benchlib.call(session, "GET", ns_url(url, namespace)))
    ns["spec"]["finalizers"] = []
    await benchlib.call(session, "PUT", ns_url(url, namespace, "finalize"), ns)
    await wait_gone(session, url, namespace)
    return time.perf_counter() - started


async def delete_through_controller(session: aiohttp.ClientSession, url: str, namespace: str) -> float:
    started = time.perf_counter()
    await benchlib.call(session, "DELETE", ns_url(url, namespace))
    await wait_gone(session, url, namespace)
    return time.perf_counter() - started


@contextlib.asynccontextmanager
async def namespace_controller(command: list[str], dev: benchlib.Dev, workdir: Path) -> AsyncIterator[None]:
    """`kcm controller namespace` beside the stack, until it owns all its partitions."""
    argv = [
        "controller",
        "namespace",
        "--kubeconfig",
        str(dev.state / "kubeconfig"),
        "--nats-url",
        dev.nats_url,
    ]
    argv += ["--nats-nkey-seed", str(dev.state / "nats-auth" / "namespace.nk"), "--ops-port", "0"]
    argv += ["--instance", "bench-namespace", "--log-level", "warning", "--secure-port=0"]
    async with benchlib.kcm_process(command, argv, workdir / "namespace-controller.log") as proc:
        coordinator = (dev.state / "coordinator.url").read_text().strip()
        deadline = time.monotonic() + 60
        while "namespace-controller" not in await asyncio.to_thread(_ready, coordinator):
            if proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the namespace controller did not become ready:\n{benchlib.tail(workdir / 'namespace-controller.log')}"
                )
            await asyncio.sleep(0.2)
        yield


def _ready(coordinator: str) -> set[str]:
    try:
        return status.ready_controllers(status.fetch(coordinator, 2))
    except (OSError, ValueError):
        return set()


async def bench(args: argparse.Namespace) -> int:
    command = benchlib.kcm_command(args)
    nodes = -(-PODS // PODS_PER_NODE) + 1
    with tempfile.TemporaryDirectory(prefix="kcm-bench-ns-") as tmp:
        workdir = Path(tmp)
        stack_args = [
            "--nodes",
            str(nodes),
            "--controllers",
            "deployment,replicaset",
            "--log-level",
            "warning",
        ]
        async with (
            benchlib.kcm_dev(command, workdir, stack_args) as dev,
            benchlib.client_session(64) as session,
        ):
            print(f"stack: kcm dev, {nodes} simulated nodes, deployment and replicaset controllers")
            paths = await collections(session, dev.url)

            filled = time.perf_counter()
            await fill(session, dev.url, "bench-baseline")
            print(f"filled bench-baseline in {time.perf_counter() - filled:.1f} s")
            baseline = await delete_by_hand(session, dev.url, "bench-baseline", paths)
            print(
                f"baseline client ({len(paths)} deletecollections, lists until empty, finalize): {baseline:.1f} s"
            )

            filled = time.perf_counter()
            await fill(session, dev.url, "bench-controller")
            print(f"filled bench-controller in {time.perf_counter() - filled:.1f} s")
            async with namespace_controller(command, dev, workdir):
                measured = await delete_through_controller(session, dev.url, "bench-controller")
            print(f"namespace-controller: {measured:.1f} s")
    print(
        f"namespace with a {PODS}-pod Deployment and {CONFIGMAPS:,} ConfigMaps, seconds until gone: "
        f"namespace-controller {measured:.1f}, baseline {baseline:.1f}, "
        f"ratio {benchlib.ratio(measured, baseline)} (goal: 1.25 or less)"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    benchlib.add_kcm_argument(parser)
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
