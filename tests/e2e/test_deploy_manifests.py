"""The Kubernetes manifests against a running API server and running services.

1. `kubectl apply --dry-run=server -k k8s/overlays/<overlay>` against the embedded apiserver:
   every object is accepted by the server's validation and admission.
2. Least-privilege RBAC, checked against what the services really do: the watcher, the
   coordinator and every controller run with the exact command lines of the dev overlay's
   Deployments, each behind its own recording proxy in front of the apiserver (so each proxy
   sees exactly what one ServiceAccount would send), while kubectl drives a Deployment through
   create, rollout (pruning old ReplicaSets), scale, pod deletion, adoption of a pod and of a
   ReplicaSet, orphaning and foreground deletion, then a finished Job deleted for its TTL, a
   pod of a missing node collected, and a pod evicted from a node tainted NoExecute. Every recorded request is then mapped to RBAC
   attributes the way the API server does and must be allowed by the Roles bound to that
   Deployment's ServiceAccount. NATS wants credentials as in k8s/: each service connects with
   the seed of the identity its Deployment mounts, under the permissions `kcm nats-auth` gives
   it, so the scenario also proves those permissions are enough.
3. Least privilege the other way round: every verb those Roles name (wildcard rules aside) was
   used in the run, or is in NOT_EXERCISED with the reason the scenario cannot provoke it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import json
import os
import subprocess
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from kcm_cli import manifests, natsauth, natsd, pki
from kcm_cli.controllers import BUILTIN
from kcm_simulator import defaults as simulator_defaults

from tests import csrs
from tests.conftest import KCM, ApiServer, NatsProc, start_nats, stop_process, wait_for
from tests.e2e import bus_stack
from tests.support.k8s import (
    NAMESPACE,
    REPO,
    allowed,
    container_env,
    expand,
    grants,
    kcm_workloads,
    pod_spec,
    render,
    request_attributes,
)

_HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


@pytest.mark.parametrize("overlay", ["dev", "production"])
def test_overlay_is_accepted_by_a_server_side_dry_run(apiserver: ApiServer, overlay: str) -> None:
    # Objects in a namespace need it to exist; a dry run creates nothing, so make it first.
    existing = apiserver.kubectl("get", "namespaces", "-o", "name")
    if f"namespace/{NAMESPACE}" not in existing.split():
        apiserver.kubectl("create", "namespace", NAMESPACE)
    out = apiserver.kubectl("apply", "--dry-run=server", "-k", str(REPO / "k8s" / "overlays" / overlay))
    for obj in render(f"overlays/{overlay}"):
        if obj["kind"] == "Namespace":
            continue
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        kind = obj["kind"].lower() + (f".{group}" if group else "")
        assert f"{kind}/{obj['metadata']['name']} created (server dry run)" in out, (kind, out)


class RecordingProxy:
    """Reverse proxies to the apiserver, one port per identity, recording (method, url) per identity.

    Runs its own event loop in a thread; watches are streamed through chunk by chunk.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.calls: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.loop = asyncio.new_event_loop()
        self.runners: list[web.AppRunner] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.session = self._run(self._session())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))

    async def _forward(self, identity: str, request: web.Request) -> web.StreamResponse:
        self.calls[identity].append((request.method, str(request.rel_url)))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with self.session.request(
            request.method, self.upstream + str(request.rel_url), data=await request.read(), headers=headers
        ) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP},
            )
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:
                pass  # the client went away (a watch it stopped, a process that exited)
            return response

    async def _listen(self, identity: str) -> str:
        async def forward(request: web.Request) -> web.StreamResponse:
            return await self._forward(identity, request)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.runners.append(runner)
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    def kubeconfig(self, identity: str, template: Path, out: Path) -> Path:
        """A copy of the apiserver's kubeconfig that goes through this identity's proxy."""
        url = self._run(self._listen(identity))
        config = yaml.safe_load(template.read_text())
        config["clusters"][0]["cluster"]["server"] = url
        out.write_text(yaml.safe_dump(config))
        return out

    async def _close(self) -> None:
        for runner in self.runners:
            await runner.cleanup()
        await self.session.close()

    def close(self) -> None:
        self._run(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# Every wait on the 32-process stack: generous, for the other pytest worker's stack beside it (it costs
# nothing while the step is healthy).
SETTLE = 60
CLUSTER_IDENTITY = "kcm-cluster-identity"  # the Secret with the cluster CA and service account key
# A clean-up period of a second, so the cleaner acts on the scenario's tokens (whose dates it
# reads in days) instead of a year later.
TEST_ARGS = {
    "kcm-legacy-service-account-token-cleaner": ["--legacy-service-account-token-clean-up-period=1s"],
    # A pass a second and a second of quarantine, so an orphan pod goes within the scenario.
    "kcm-podgc": ["--podgc-test-check-period=1s", "--podgc-test-quarantine-time=1s"],
    # Four node CIDRs, two of them the simulator's nodes': the scenario fills the rest.
    "kcm-nodeipam": ["--cluster-cidr=10.244.0.0/22"],
}


class Services:
    """The dev overlay's kcm Deployments as local processes (one replica each), plus a simulator."""

    def __init__(
        self, api: ApiServer, nats: NatsProc, auth_dir: Path, proxy: RecordingProxy, workdir: Path
    ) -> None:
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self.accounts: dict[str, str] = {}  # proxy identity -> ServiceAccount
        self.coordinator_port = 0
        for w in kcm_workloads(render("overlays/dev")):
            name = w["metadata"]["name"]
            spec = pod_spec(w)
            (container,) = spec["containers"]
            env = container_env(container, f"{name}-0")
            args = [expand(a, env) for a in container["args"]]
            # Only the coordinator's ops port is read (its /status); the others take any free
            # port when they bind, since a number picked here ahead of time can be taken by
            # another process's ephemeral port before the service binds it.
            port = natsd.free_port() if args[0] == "coordinator" else 0
            seed = bus_stack.seed(auth_dir, name.removeprefix("kcm-"))  # what its Secret holds
            args = [
                f"--nats-url={nats.url}"
                if a.startswith("--nats-url=")
                else f"--ops-port={port}"
                if a.startswith("--ops-port=")
                else f"--nats-nkey-seed={seed}"
                if a.startswith("--nats-nkey-seed=")
                else a
                for a in args
            ]
            for mount in container.get("volumeMounts", []):
                if mount["name"] == CLUSTER_IDENTITY:  # what the Secret holds: kubeadm's files
                    local = str(pki.ensure(workdir / "pki").ca_cert.parent)
                    args = [a.replace(mount["mountPath"], local) for a in args]
            args += TEST_ARGS.get(name, [])
            if args[0] == "controller":
                # Upstream's secure port, each on a port of its own here, reviewing through the
                # recording proxy as it would through the in-cluster configuration in its Pod.
                review = str(workdir / f"{name}.kubeconfig")
                args += [f"--secure-port={natsd.free_port()}", "--bind-address=127.0.0.1"]
                args += [f"--authentication-kubeconfig={review}", f"--authorization-kubeconfig={review}"]
            if args[0] == "coordinator":
                self.coordinator_port = port
            self.accounts[name] = spec["serviceAccountName"]
            kubeconfig = proxy.kubeconfig(name, api.kubeconfig, workdir / f"{name}.kubeconfig")
            argv = [KCM, *args, "--kubeconfig", str(kubeconfig), "--ops-bind", "127.0.0.1"]
            self._start(name, argv, {**os.environ, **env}, workdir)
        sim = [KCM, "sim", "--kubeconfig", str(api.kubeconfig), "--nodes", "2", "--pod-start-delay", "0.1"]
        self._start("sim", sim, dict(os.environ), workdir)

    def _start(self, name: str, argv: list[str], env: dict[str, str], workdir: Path) -> None:
        log = workdir / f"{name}.log"
        with open(log, "ab") as out:
            self.procs.append((name, subprocess.Popen(argv, stdout=out, stderr=out, env=env, cwd=REPO), log))

    def status(self) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.coordinator_port}/status", timeout=2) as r:
                doc: dict[str, Any] = json.load(r)
                return doc
        except (OSError, ValueError):
            return {}

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{log.read_text()[-2500:]}" for name, _, log in self.procs)

    def stop(self) -> None:
        for _, proc, _ in reversed(self.procs):
            stop_process(proc)


@pytest.fixture(scope="module")
def secured_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NatsProc, Path]]:
    """A nats-server with the users and permissions `kcm nats-auth` makes for k8s/."""
    workdir = tmp_path_factory.mktemp("nats")
    server = start_nats(workdir)
    users = natsauth.deployment_identities(BUILTIN)
    bus_stack.secure(server, workdir / "auth", users)
    yield server, workdir / "auth"
    server.stop()


@pytest.fixture(scope="module")
def recorded(
    apiserver: ApiServer, secured_nats: tuple[NatsProc, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RecordingProxy, Services]]:
    existing = apiserver.kubectl("get", "namespaces", "-o", "name")
    if f"namespace/{NAMESPACE}" not in existing.split():
        apiserver.kubectl("create", "namespace", NAMESPACE)  # where the Leases live
    # Legacy token use tracked for years, so the cleaner's first passes find tokens to act on.
    apiserver.kubectl(
        "-n",
        "kube-system",
        "patch",
        "configmap",
        "kube-apiserver-legacy-service-account-token-tracking",
        "--type=merge",
        "-p",
        json.dumps({"data": {"since": "2020-01-01"}}),
    )
    # What `kcm dev` gives a cluster: the simulated CSI driver and the default class, so the
    # StatefulSet's claims are provisioned, bound and attached by the storage controllers.
    for doc in (simulator_defaults.CSI_DRIVER, simulator_defaults.STORAGE_CLASS):
        apiserver.kubectl("apply", "-f", "-", input=json.dumps(doc))
    proxy = RecordingProxy(apiserver.url)
    services = Services(apiserver, *secured_nats, proxy, tmp_path_factory.mktemp("services"))
    try:
        controllers = {
            args[1]
            for w in kcm_workloads(render("overlays/dev"))
            if (args := pod_spec(w)["containers"][0]["args"])[0] == "controller"
        }

        def ready() -> bool:
            ctl = services.status().get("controllers", {})
            return len(ctl) == len(controllers) and all(
                c.get("healthy") and c.get("partitions") and all(c["partitions"].values())
                for c in ctl.values()
            )

        try:
            # 32 processes start at once (one per Deployment, and a simulator) beside the other
            # pytest worker: on a loaded two-core machine imports alone can take a minute, and CI
            # once took longer than 120 s.
            wait_for(ready, 240, interval=0.3, what="every controller healthy with its partitions")
            drive_workloads(apiserver)
            drive_replicationcontroller(apiserver)
            drive_daemonset(apiserver)
            drive_cleanup_controllers(apiserver)
            drive_volume_controllers(apiserver)
            drive_job(apiserver)
            drive_cronjobs(apiserver)
            drive_disruption(apiserver)
            drive_autoscaler(apiserver)
            drive_statefulset(apiserver)
            drive_endpoints(apiserver)
            drive_endpointslice(apiserver)
            drive_endpointslicemirroring(apiserver)
            drive_node_taints(apiserver)
            drive_certificates(apiserver)
            drive_node_ipam(apiserver)
            drive_admission_policy_status(apiserver)
            # Last: it deletes the rbac-e2e namespace the others work in.
            drive_namespace_services(apiserver)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nstatus: {services.status()}\n{services.logs()}") from exc
        yield proxy, services
    finally:
        services.stop()
        proxy.close()


def _json(api: ApiServer, *args: str) -> Any:
    return json.loads(api.kubectl("get", *args, "-o", "json", "-n", "rbac-e2e"))


def _pods(api: ApiServer) -> list[dict[str, Any]]:
    return [p for p in _json(api, "pods")["items"] if not p["metadata"].get("deletionTimestamp")]


def drive_workloads(api: ApiServer) -> None:
    """Exercise the controllers' API calls: create, roll out (pruning old ReplicaSets), scale,
    replace a pod, adopt a pod and a ReplicaSet, orphan, delete in the foreground."""
    api.kubectl("create", "namespace", "rbac-e2e")
    # No grace period: deleted pods go at once, so foreground deletion need not wait 30 s for them.
    template_spec = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "nginx", "image": "nginx:1"}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "rbac-e2e"},
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 0,  # old ReplicaSets are deleted once scaled down
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template_spec},
        },
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(deployment))

    def settled(replicas: int) -> bool:
        d = _json(api, "deployment", "web")
        s = d.get("status", {})
        return bool(
            s.get("observedGeneration", 0) >= d["metadata"]["generation"]
            and s.get("updatedReplicas") == replicas
            and s.get("availableReplicas") == replicas
            and s.get("replicas") == replicas
        )

    wait_for(lambda: settled(2), SETTLE, interval=0.2, what="deployment available")
    api.kubectl("-n", "rbac-e2e", "set", "image", "deployment/web", "nginx=nginx:2")
    wait_for(lambda: settled(2), SETTLE, interval=0.2, what="rollout complete")
    api.kubectl("-n", "rbac-e2e", "scale", "deployment/web", "--replicas=3")
    wait_for(lambda: settled(3), SETTLE, interval=0.2, what="scaled to 3")
    victim = _pods(api)[0]["metadata"]["name"]
    api.kubectl("-n", "rbac-e2e", "delete", "pod", victim, "--wait=false")
    wait_for(
        lambda: len(_pods(api)) == 3 and victim not in {p["metadata"]["name"] for p in _pods(api)},
        30,
        interval=0.2,
        what="pod replaced",
    )
    # A bare pod the ReplicaSet's selector matches is adopted (and then one pod is too many).
    rs = next(r for r in _json(api, "replicasets")["items"] if r["spec"]["replicas"] == 3)
    labels = rs["spec"]["selector"]["matchLabels"]
    stray = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stray", "namespace": "rbac-e2e", "labels": labels},
        "spec": {**template_spec, "containers": [{"name": "nginx", "image": "nginx:2"}]},
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(stray))
    wait_for(
        lambda: len(_pods(api)) == 3 and all(p["metadata"].get("ownerReferences") for p in _pods(api)),
        30,
        interval=0.2,
        what="stray pod adopted and the surplus removed",
    )
    # Orphaning: the Deployment goes, its ReplicaSets stay without an owner.
    api.kubectl("-n", "rbac-e2e", "delete", "deployment", "web", "--cascade=orphan", "--wait=false")
    wait_for(
        lambda: (
            not _json(api, "deployments")["items"]
            and all(not r["metadata"].get("ownerReferences") for r in _json(api, "replicasets")["items"])
        ),
        30,
        interval=0.2,
        what="replicasets orphaned",
    )
    # The same Deployment again adopts the orphan, then goes in the foreground: the collector
    # deletes the pods, then the ReplicaSet, then the Deployment.
    template_spec["containers"] = [{"name": "nginx", "image": "nginx:2"}]
    deployment["spec"]["replicas"] = 3  # type: ignore[index]
    api.kubectl("apply", "-f", "-", input=json.dumps(deployment))
    wait_for(
        lambda: (
            [
                o["kind"]
                for r in _json(api, "replicasets")["items"]
                for o in r["metadata"].get("ownerReferences", [])
            ]
            == ["Deployment"]
        ),
        30,
        interval=0.2,
        what="orphaned replicaset adopted",
    )
    api.kubectl("-n", "rbac-e2e", "delete", "deployment", "web", "--cascade=foreground", "--wait=false")
    wait_for(
        lambda: not any(_json(api, kind)["items"] for kind in ("deployments", "replicasets", "pods")),
        30,
        interval=0.2,
        what="deployment, replicaset and pods deleted in the foreground",
    )


def drive_replicationcontroller(api: ApiServer) -> None:
    """Exercise the RC controller's API calls: create pods, write status, adopt a matching bare
    pod and delete the surplus; then the collector deletes its pods with it."""
    template = {
        "metadata": {"labels": {"app": "legacy"}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "nginx", "image": "nginx:1"}]},
    }
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "legacy", "namespace": "rbac-e2e"},
        "spec": {"replicas": 2, "template": template},
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(rc))

    def legacy_pods() -> list[dict[str, Any]]:
        return [p for p in _pods(api) if p["metadata"].get("labels") == {"app": "legacy"}]

    def settled() -> bool:
        s = _json(api, "rc", "legacy").get("status", {})
        return s.get("readyReplicas") == 2 and len(legacy_pods()) == 2

    wait_for(settled, SETTLE, interval=0.2, what="replication controller ready")
    stray = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy-stray", **template["metadata"]}}
    stray["spec"] = template["spec"]
    api.kubectl("apply", "-n", "rbac-e2e", "-f", "-", input=json.dumps(stray))
    wait_for(
        lambda: len(p := legacy_pods()) == 2 and all(x["metadata"].get("ownerReferences") for x in p),
        30,
        interval=0.2,
        what="stray pod adopted by the RC and the surplus removed",
    )
    api.kubectl("-n", "rbac-e2e", "delete", "rc", "legacy", "--wait=false")
    wait_for(lambda: not legacy_pods(), SETTLE, interval=0.2, what="the RC's pods deleted with it")


def drive_daemonset(api: ApiServer) -> None:
    """Exercise the daemonset controller's API calls: a pod created on each node and the status
    written, a matching bare pod adopted and deleted as a second pod on its node, two template
    updates rolled out (revisions created, the oldest pruned past revisionHistoryLimit 1), and
    the older template back again (its revision renumbered)."""
    ns = "rbac-e2e-ds"
    api.kubectl("create", "namespace", ns)
    labels = {"app": "ds-e2e"}

    def apply(image: str) -> None:
        template = {
            "metadata": {"labels": labels, "annotations": {"sim.kcm.dev/terminate-seconds": "0"}},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": image}]},
        }
        ds = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": ns},
            "spec": {"selector": {"matchLabels": labels}, "revisionHistoryLimit": 1, "template": template},
        }
        api.kubectl("apply", "-f", "-", input=json.dumps(ds))

    def live_pods() -> list[dict[str, Any]]:
        items = api.kubectl_json("-n", ns, "get", "pods")["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def rolled_out(image: str) -> bool:
        ds = api.kubectl_json("-n", ns, "get", "ds", "agent")
        s = ds.get("status") or {}
        pods = live_pods()
        return (
            s.get("observedGeneration") == ds["metadata"]["generation"]
            and s.get("desiredNumberScheduled")
            == s.get("updatedNumberScheduled")
            == s.get("numberAvailable")
            == 2
            and len(pods) == 2
            and all(p["spec"]["containers"][0]["image"] == image for p in pods)
        )

    apply("agent:1")
    wait_for(lambda: rolled_out("agent:1"), SETTLE, interval=0.2, what="daemon set rolled out")
    node = live_pods()[0]["spec"]["nodeName"]
    stray = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ds-stray", "namespace": ns, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "agent:1"}]},
    }
    api.kubectl("create", "-f", "-", input=json.dumps(stray))
    wait_for(
        lambda: "ds-stray" not in {p["metadata"]["name"] for p in live_pods()},
        30,
        interval=0.2,
        what="bare pod adopted and deleted as its node's second daemon pod",
    )
    for image in ("agent:2", "agent:3", "agent:2"):
        apply(image)
        wait_for(lambda image=image: rolled_out(image), SETTLE, interval=0.2, what=f"rolled out to {image}")
    revisions = api.kubectl_json("-n", ns, "get", "controllerrevisions")["items"]
    assert sorted(r["revision"] for r in revisions) == [3, 4], revisions
    api.kubectl("-n", ns, "delete", "ds", "agent", "--wait=false")


def drive_cleanup_controllers(api: ApiServer) -> None:
    """Exercise the clean-up controllers' API calls: a finished Job with ttlSecondsAfterFinished
    0 re-read and deleted by the ttl-after-finished controller; a pod bound to a node that does
    not exist marked Failed and force-deleted by the pod garbage collector."""
    ns = "rbac-e2e"

    def gone(*what: str) -> bool:
        return not api.kubectl("-n", ns, "get", *what, "--ignore-not-found", "-o", "name").strip()

    # Managed by someone else (no job controller acts on it): the scenario finishes it itself.
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "done", "namespace": ns},
        "spec": {
            "managedBy": "example.com/rbac-e2e",
            "ttlSecondsAfterFinished": 0,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}
            },
        },
    }
    api.kubectl("create", "-f", "-", input=json.dumps(job))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    finished = [
        {"type": kind, "status": "True", "reason": "CompletionsReached", "lastTransitionTime": now}
        for kind in ("SuccessCriteriaMet", "Complete")
    ]
    status = {"startTime": now, "completionTime": now, "succeeded": 1, "conditions": finished}
    api.kubectl(
        "-n",
        ns,
        "patch",
        "job",
        "done",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )
    wait_for(lambda: gone("job", "done"), SETTLE, interval=0.2, what="finished Job deleted after its TTL")
    orphan = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "orphan", "namespace": ns},
        "spec": {"nodeName": "rbac-e2e-gone", "containers": [{"name": "c", "image": "busybox:1"}]},
    }
    api.kubectl("create", "-f", "-", input=json.dumps(orphan))
    wait_for(lambda: gone("pod", "orphan"), SETTLE, interval=0.2, what="pod of a missing node collected")


def drive_job(api: ApiServer) -> None:
    """Exercise the job controller's API calls: adopt an orphan pod (re-reading the Job first),
    create pods and take the tracking finalizer off the finished ones while counting them, and
    delete the running pod of a suspended Job."""
    ns = "rbac-e2e"
    labels = {"app": "batch"}
    stray = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "batch-stray", "namespace": ns, "labels": labels},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "busybox"}]},
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(stray))
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch", "namespace": ns},
        "spec": {
            "parallelism": 2,
            "completions": 3,
            "manualSelector": True,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {"sim.kcm.dev/exit-code": "0"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "busybox"}],
                },
            },
        },
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(job))
    wait_for(
        lambda: (
            (api.kubectl_json("-n", ns, "get", "job", "batch").get("status") or {}).get("succeeded", 0) >= 2
        ),
        30,
        interval=0.2,
        what="job pods created, finished and counted",
    )
    api.kubectl("-n", ns, "patch", "job", "batch", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    wait_for(
        lambda: any(
            c["type"] == "Suspended" and c["status"] == "True"
            for c in (api.kubectl_json("-n", ns, "get", "job", "batch").get("status") or {}).get(
                "conditions", []
            )
        ),
        30,
        interval=0.2,
        what="the adopted pod deleted by the suspended job",
    )


def drive_cronjobs(api: ApiServer) -> None:
    """Exercise the cronjob controller's API calls: a Job it did not create (re-read of the
    CronJob), a start that is due at once (status.lastScheduleTime set an hour back) replacing
    the running Job (get, delete, create), and its status write."""
    ns = "rbac-e2e"
    due = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)).replace(second=0, microsecond=0)
    api.kubectl(
        "-n",
        ns,
        "create",
        "cronjob",
        "nightly",
        "--image=busybox",
        f"--schedule={due.minute} {due.hour} * * *",
    )

    def patch(body: dict[str, Any], *where: str) -> None:
        api.kubectl("-n", ns, "patch", "cronjob", "nightly", *where, "--type=merge", "-p", json.dumps(body))

    patch({"spec": {"concurrencyPolicy": "Replace"}})
    api.kubectl("-n", ns, "create", "job", "manual", "--from=cronjob/nightly")
    # Not in status.active: the controller re-reads the CronJob before calling it unexpected.
    wait_for(
        lambda: any(e["reason"] == "UnexpectedJob" for e in _json(api, "events")["items"]),
        30,
        interval=0.2,
        what="UnexpectedJob",
    )
    manual = api.kubectl_json("-n", ns, "get", "job", "manual")["metadata"]
    ref = {"kind": "Job", "apiVersion": "batch/v1", "namespace": ns, "name": "manual", "uid": manual["uid"]}
    last = (due - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch({"status": {"active": [ref], "lastScheduleTime": last}}, "--subresource=status")
    scheduled = f"nightly-{int(due.timestamp()) // 60}"
    wait_for(
        lambda: (
            scheduled in (names := {j["metadata"]["name"] for j in _json(api, "jobs")["items"]})
            and "manual" not in names
        ),
        30,
        interval=0.2,
        what="the running job replaced by the scheduled one",
    )
    wait_for(
        lambda: (
            [a["name"] for a in _json(api, "cronjob", "nightly")["status"].get("active", [])] == [scheduled]
        ),
        30,
        interval=0.2,
        what="cronjob status written",
    )


def drive_disruption(api: ApiServer) -> None:
    """Exercise the disruption controller's API calls: a budget's status written (with the
    UnmanagedPods Event: its pod has no controller), and a pod's stale DisruptionTarget
    condition (no transition time: long past) set back to False."""
    ns = "rbac-e2e"
    target = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pdb-target", "namespace": ns, "labels": {"app": "pdb-e2e"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
    }
    api.kubectl("create", "-f", "-", input=json.dumps(target))
    # Once the simulator has started it: its status writes keep only the conditions it owns.
    api.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/pdb-target", "--timeout=30s")
    stale = {
        "status": {
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}]
        }
    }
    api.kubectl("-n", ns, "patch", "pod", "pdb-target", "--subresource=status", "-p", json.dumps(stale))
    api.kubectl("-n", ns, "create", "pdb", "pdb-e2e", "--selector=app=pdb-e2e", "--max-unavailable=1")
    wait_for(
        lambda: (
            (api.kubectl_json("-n", ns, "get", "pdb", "pdb-e2e").get("status") or {}).get(
                "observedGeneration"
            )
            == 1
        ),
        30,
        interval=0.2,
        what="PDB status written",
    )

    def target_condition() -> str:
        conds = api.kubectl_json("-n", ns, "get", "pod", "pdb-target")["status"].get("conditions") or []
        return next((c["status"] for c in conds if c["type"] == "DisruptionTarget"), "")

    wait_for(
        lambda: target_condition() == "False",
        30,
        interval=0.2,
        what="stale DisruptionTarget reset",
    )


def drive_autoscaler(api: ApiServer) -> None:
    """Exercise the HPA controller's API calls: read the HPA, the target's scale and the pods'
    metrics, write the scale and the status, record SuccessfulRescale. A memory AverageValue
    target: no CPU initialization period to wait out at the default flags."""
    ns = "rbac-e2e"
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "scaled", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "scaled"}},
            "template": {
                "metadata": {
                    "labels": {"app": "scaled"},
                    "annotations": {"sim.kcm.dev/memory-usage": "200Mi"},
                },
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(rs))
    wait_for(
        lambda: _json(api, "replicaset", "scaled").get("status", {}).get("readyReplicas") == 1,
        30,
        interval=0.2,
        what="replicaset ready",
    )
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "scaled", "namespace": ns},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "scaled"},
            "minReplicas": 1,
            "maxReplicas": 2,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "100Mi"},
                    },
                }
            ],
        },
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(hpa))
    wait_for(
        lambda: _json(api, "hpa", "scaled").get("status", {}).get("desiredReplicas") == 2,
        40,
        interval=0.2,
        what="autoscaled to 2",
    )
    api.kubectl("-n", ns, "delete", "hpa", "scaled")


def drive_admission_policy_status(api: ApiServer) -> None:
    """The validatingadmissionpolicy-status controller's one write: a policy's status."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "rbac-e2e-replicas"},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["deployments"],
                    }
                ]
            },
            "validations": [{"expression": "object.spec.replicas <= 5"}],
        },
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(policy))
    wait_for(
        lambda: (
            (
                api.kubectl_json("get", "validatingadmissionpolicy", "rbac-e2e-replicas").get("status") or {}
            ).get("observedGeneration")
            == 1
        ),
        SETTLE,
        interval=0.3,
        what="policy status written",
    )


def drive_statefulset(api: ApiServer) -> None:
    """Exercise the StatefulSet controller's API calls: pods and claims created, status written,
    a lost identity label patched back, an orphaned revision adopted, a rollout (a new revision,
    pods deleted, the old revision truncated with revisionHistoryLimit 0), and a scale-down
    whose claim gets the pod as owner (whenScaled=Delete)."""
    ns = "rbac-e2e"
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "sts-e2e", "namespace": ns},
        "spec": {
            "replicas": 2,
            "podManagementPolicy": "Parallel",
            "revisionHistoryLimit": 0,
            "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"},
            "selector": {"matchLabels": {"app": "sts-e2e"}},
            "template": {
                "metadata": {"labels": {"app": "sts-e2e"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "nginx:1"}],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ],
        },
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(sts))

    def st() -> dict[str, Any]:
        out: dict[str, Any] = api.kubectl_json("-n", ns, "get", "sts", "sts-e2e").get("status") or {}
        return out

    wait_for(lambda: st().get("readyReplicas") == 2, SETTLE, interval=0.2, what="statefulset ready")
    # The expander's one write for a CSI claim: its ExternalExpanding Event.
    grow = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    api.kubectl("-n", ns, "patch", "pvc", "data-sts-e2e-0", "-p", json.dumps(grow))
    wait_for(
        lambda: any(
            e.get("reason") == "ExternalExpanding"
            for e in api.kubectl_json(
                "-n", ns, "get", "events", "--field-selector", "involvedObject.name=data-sts-e2e-0"
            )["items"]
        ),
        SETTLE,
        interval=0.3,
        what="ExternalExpanding recorded",
    )
    label = "statefulset.kubernetes.io/pod-name"
    api.kubectl("-n", ns, "label", "pod", "sts-e2e-0", f"{label}-")
    wait_for(
        lambda: api.kubectl_json("-n", ns, "get", "pod", "sts-e2e-0")["metadata"]["labels"].get(label),
        30,
        interval=0.2,
        what="identity label patched back",
    )
    orphan = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "sts-e2e-orphan", "namespace": ns, "labels": {"app": "sts-e2e"}},
        "data": {"spec": {"template": {"$patch": "replace"}}},
        "revision": 0,
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(orphan))
    api.kubectl("-n", ns, "set", "image", "sts/sts-e2e", "c=nginx:2")

    def rolled() -> bool:
        s = st()
        revisions = api.kubectl_json("-n", ns, "get", "controllerrevisions")["items"]
        return (
            s.get("currentRevision") == s.get("updateRevision")
            and s.get("updatedReplicas") == 2
            and s.get("readyReplicas") == 2
            and [r["metadata"]["name"] for r in revisions] == [s.get("updateRevision")]
        )

    wait_for(rolled, 60, interval=0.2, what="rolled out, orphan adopted and old revisions truncated")
    api.kubectl("-n", ns, "scale", "sts/sts-e2e", "--replicas=1")
    wait_for(
        lambda: not any(p["metadata"]["name"] == "sts-e2e-1" for p in _pods(api)),
        30,
        interval=0.2,
        what="scaled down to one pod",
    )
    api.kubectl("-n", ns, "delete", "sts", "sts-e2e", "--wait=false")
    wait_for(
        lambda: not any(p["metadata"]["name"].startswith("sts-e2e-") for p in _pods(api)),
        30,
        interval=0.2,
        what="the statefulset's pods deleted with it",
    )


def drive_endpoints(api: ApiServer) -> None:
    """Exercise the endpoints controller's API calls: a Service's Endpoints created, updated when
    its pod turns not ready, and deleted with the Service."""
    ns = "rbac-e2e"
    target = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ep-target", "namespace": ns, "labels": {"app": "ep-e2e"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
    }
    api.kubectl("create", "-f", "-", input=json.dumps(target))
    api.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/ep-target", "--timeout=30s")
    # kubectl gives the Service the selector app=ep-e2e.
    api.kubectl("-n", ns, "create", "service", "clusterip", "ep-e2e", "--tcp=80:8080")

    def listed(field: str) -> bool:
        ep = api.kubectl("-n", ns, "get", "endpoints", "ep-e2e", "--ignore-not-found", "-o", "json").strip()
        subsets = json.loads(ep).get("subsets") or [] if ep else []
        return any(s.get(field) for s in subsets)

    wait_for(lambda: listed("addresses"), SETTLE, interval=0.2, what="Endpoints created")
    api.kubectl("-n", ns, "annotate", "--overwrite", "pod", "ep-target", "sim.kcm.dev/ready=false")
    wait_for(lambda: listed("notReadyAddresses"), SETTLE, interval=0.2, what="Endpoints updated")
    api.kubectl("-n", ns, "delete", "service", "ep-e2e")
    wait_for(
        lambda: (
            not api.kubectl(
                "-n", ns, "get", "endpoints", "ep-e2e", "--ignore-not-found", "-o", "name"
            ).strip()
        ),
        30,
        interval=0.2,
        what="Endpoints deleted",
    )


def drive_endpointslice(api: ApiServer) -> None:
    """Exercise the endpointslice controller's API calls: a Service's placeholder slice created,
    then updated into the slice of one pod's port; a second pod whose named port resolves to
    another number gets a slice of its own (create), deleted when that pod goes."""
    ns = "rbac-e2e"

    def pod(name: str, port: int) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "sliced"}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {"name": "c", "image": "nginx", "ports": [{"name": "http", "containerPort": port}]}
                ],
            },
        }

    def slice_ports() -> list[int]:
        items = json.loads(
            api.kubectl(
                "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=sliced", "-o", "json"
            )
        )["items"]
        return sorted(p["port"] for s in items for p in s.get("ports") or () if s.get("endpoints"))

    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "sliced", "namespace": ns},
        "spec": {"selector": {"app": "sliced"}, "ports": [{"port": 80, "targetPort": "http"}]},
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(svc))
    api.kubectl("apply", "-f", "-", input=json.dumps(pod("sliced-a", 8080)))
    wait_for(lambda: slice_ports() == [8080], SETTLE, interval=0.2, what="the first pod's slice")
    api.kubectl("apply", "-f", "-", input=json.dumps(pod("sliced-b", 8081)))
    wait_for(lambda: slice_ports() == [8080, 8081], SETTLE, interval=0.2, what="a slice per resolved port")
    api.kubectl("-n", ns, "delete", "pod", "sliced-b")
    wait_for(lambda: slice_ports() == [8080], SETTLE, interval=0.2, what="the second slice deleted")
    api.kubectl("-n", ns, "delete", "service", "sliced")
    api.kubectl("-n", ns, "delete", "pod", "sliced-a")


def drive_endpointslicemirroring(api: ApiServer) -> None:
    """The mirroring controller creates a slice for hand-written Endpoints, updates it when they
    change and deletes it when they go."""
    ns = "rbac-e2e"
    label = "kubernetes.io/service-name=mirrored"

    def mirrored_ips() -> list[str]:
        items = api.kubectl_json("-n", ns, "get", "endpointslices", "-l", label)["items"]
        return [a for item in items for ep in item.get("endpoints") or () for a in ep["addresses"]]

    def endpoints(ip: str) -> str:
        subset = {"addresses": [{"ip": ip}], "ports": [{"port": 8080}]}
        body = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "mirrored", "namespace": ns}}
        return json.dumps({**body, "subsets": [subset]})

    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "mirrored", "namespace": ns}}
    api.kubectl("apply", "-f", "-", input=json.dumps({**svc, "spec": {"ports": [{"port": 80}]}}))
    api.kubectl("apply", "-f", "-", input=endpoints("10.9.0.1"))
    wait_for(lambda: mirrored_ips() == ["10.9.0.1"], SETTLE, interval=0.2, what="Endpoints mirrored")
    api.kubectl("apply", "-f", "-", input=endpoints("10.9.0.2"))
    wait_for(lambda: mirrored_ips() == ["10.9.0.2"], SETTLE, interval=0.2, what="mirrored slice updated")
    api.kubectl("-n", ns, "delete", "endpoints", "mirrored")
    wait_for(lambda: mirrored_ips() == [], SETTLE, interval=0.2, what="mirrored slice deleted")


def drive_namespace_services(api: ApiServer) -> None:
    """Exercise the per-namespace controllers' API calls: a quota's usage, the default
    ServiceAccount and the root CA ConfigMap made and repaired, legacy token Secrets filled, invalidated, deleted with
    their ServiceAccount, and the namespace emptied and finalized."""
    ns = "rbac-e2e"

    def exists(*what: str) -> bool:
        return api.kubectl("-n", ns, "get", *what, "--ignore-not-found", "-o", "name").strip() != ""

    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "objects", "namespace": ns},
        "spec": {"hard": {"configmaps": "10", "secrets": "10"}},
    }
    api.kubectl("apply", "-f", "-", input=json.dumps(quota))
    wait_for(
        lambda: (
            "configmaps"
            in (api.kubectl_json("-n", ns, "get", "resourcequota", "objects").get("status") or {}).get(
                "used", {}
            )
        ),
        30,
        interval=0.2,
        what="quota usage written",
    )
    wait_for(lambda: exists("serviceaccount", "default"), SETTLE, interval=0.2, what="default ServiceAccount")
    wait_for(lambda: exists("configmap", "kube-root-ca.crt"), SETTLE, interval=0.2, what="kube-root-ca.crt")
    api.kubectl(
        "-n", ns, "patch", "configmap", "kube-root-ca.crt", "--type=merge", "-p", '{"data":{"ca.crt":"x"}}'
    )
    wait_for(
        lambda: api.kubectl_json("-n", ns, "get", "configmap", "kube-root-ca.crt")["data"]["ca.crt"] != "x",
        30,
        interval=0.2,
        what="kube-root-ca.crt repaired",
    )
    # Two auto-generated legacy tokens of one account: one to be invalidated, one invalid for
    # years already, which the cleaner deletes; the rest go with their ServiceAccount.
    tokens = ("robot-token-a", "robot-token-b")
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": ns}}
    account["secrets"] = [{"name": t} for t in tokens]
    api.kubectl("apply", "-f", "-", input=json.dumps(account))
    for name in tokens:
        labels = {"kubernetes.io/legacy-token-invalid-since": "2020-01-01"} if name.endswith("b") else {}
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "annotations": {"kubernetes.io/service-account.name": "robot"},
            },
        }
        api.kubectl("apply", "-f", "-", input=json.dumps(secret))
    wait_for(
        lambda: not exists("secret", tokens[1]), SETTLE, interval=0.2, what="invalid legacy token deleted"
    )
    wait_for(
        lambda: (
            "kubernetes.io/legacy-token-invalid-since"
            in (api.kubectl_json("-n", ns, "get", "secret", tokens[0])["metadata"].get("labels") or {})
        ),
        30,
        interval=0.2,
        what="unused legacy token invalidated",
    )
    api.kubectl("-n", ns, "delete", "serviceaccount", "robot")
    wait_for(
        lambda: not exists("secret", tokens[0]), SETTLE, interval=0.2, what="token deleted with its account"
    )
    api.kubectl("delete", "namespace", ns, "--wait=false")
    wait_for(
        lambda: not api.kubectl("get", "namespace", ns, "--ignore-not-found", "-o", "name").strip(),
        60,
        interval=0.3,
        what="namespace emptied and finalized",
    )


def drive_node_ipam(api: ApiServer) -> None:
    """Nodes without a podCIDR get the two free CIDRs (patch), the third a CIDRNotAvailable Event."""
    names = ["ipam-a", "ipam-b", "ipam-c"]
    for name in names:
        api.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        )

    def cidrs() -> set[str]:
        return {api.kubectl_json("get", "node", n)["spec"].get("podCIDR", "") for n in names} - {""}

    wait_for(lambda: len(cidrs()) == 2, SETTLE, interval=0.2, what="two nodes given CIDRs")
    wait_for(
        lambda: any(
            e["reason"] == "CIDRNotAvailable"
            for e in api.kubectl_json("get", "events", "-n", "default")["items"]
        ),
        30,
        interval=0.2,
        what="CIDRNotAvailable recorded",
    )
    api.kubectl("delete", "node", *names)


def drive_node_taints(api: ApiServer) -> None:
    """A pod on a node tainted NoExecute gets DisruptionTarget (pods/status patch) and is
    deleted by the taint-eviction-controller, with its Event; the ttl-controller has annotated
    every node (nodes patch) by then."""
    ns = "rbac-e2e"
    api.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "tainted"}}),
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "evicted", "namespace": ns},
        "spec": {"nodeName": "tainted", "containers": [{"name": "c", "image": "busybox:1"}]},
    }
    api.kubectl("create", "-f", "-", input=json.dumps(pod))
    api.kubectl("taint", "nodes", "tainted", "example.com/evict=x:NoExecute")
    wait_for(
        lambda: api.kubectl_json("get", "pod", "evicted", "-n", ns)["metadata"].get("deletionTimestamp"),
        30,
        interval=0.2,
        what="pod on the NoExecute-tainted node deleted",
    )
    wait_for(
        lambda: all(
            "node.alpha.kubernetes.io/ttl" in (n["metadata"].get("annotations") or {})
            for n in api.kubectl_json("get", "nodes")["items"]
        ),
        30,
        interval=0.2,
        what="every node annotated with its TTL",
    )
    api.kubectl("delete", "pod", "evicted", "-n", ns, "--grace-period=0", "--force")
    api.kubectl("delete", "node", "tainted")


def drive_certificates(api: ApiServer) -> None:
    """A client CSR approved and signed; an approved one whose certificate expired deleted; a
    signing bootstrap token's signature in cluster-info; an expired token Secret deleted."""
    request = base64.b64encode(csrs.request_pem("rbac-user")).decode()

    def csr(name: str, signer: str) -> str:
        doc = {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": request, "signerName": signer, "usages": ["client auth"]},
        }
        return json.dumps(doc)

    api.kubectl("apply", "-f", "-", input=csr("rbac-signed", "kubernetes.io/kube-apiserver-client"))
    api.kubectl("apply", "-f", "-", input=csr("rbac-expired", "example.com/signer"))
    api.kubectl("certificate", "approve", "rbac-signed", "rbac-expired")
    expired = csrs.cert_pem(
        csrs.ca(), "x", datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)
    )
    status = json.dumps({"status": {"certificate": base64.b64encode(expired).decode()}})
    api.kubectl("patch", "csr", "rbac-expired", "--subresource=status", "--type=merge", "-p", status)
    wait_for(
        lambda: api.kubectl_json("get", "csr", "rbac-signed").get("status", {}).get("certificate"),
        30,
        interval=0.2,
        what="client certificate signed",
    )
    wait_for(
        lambda: not api.kubectl("get", "csr", "rbac-expired", "--ignore-not-found", "-o", "name").strip(),
        30,
        interval=0.2,
        what="CSR with an expired certificate deleted",
    )
    api.kubectl("delete", "csr", "rbac-signed")
    cluster_info = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-info"}}
    cluster_info["data"] = {"kubeconfig": "apiVersion: v1\nkind: Config\n"}
    api.kubectl("-n", "kube-public", "apply", "-f", "-", input=json.dumps(cluster_info))
    for token_id, extra in (
        ("rbacsg", {"usage-bootstrap-signing": "true"}),
        ("rbacex", {"expiration": "2020-01-01T00:00:00Z"}),
    ):
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "bootstrap.kubernetes.io/token",
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "stringData": {"token-id": token_id, "token-secret": "0123456789abcdef", **extra},
        }
        api.kubectl("apply", "-f", "-", input=json.dumps(secret))
    wait_for(
        lambda: (
            "jws-kubeconfig-rbacsg"
            in api.kubectl_json("-n", "kube-public", "get", "configmap", "cluster-info")["data"]
        ),
        30,
        interval=0.2,
        what="cluster-info signed",
    )
    wait_for(
        lambda: (
            not api.kubectl(
                "-n",
                "kube-system",
                "get",
                "secret",
                "bootstrap-token-rbacex",
                "--ignore-not-found",
                "-o",
                "name",
            ).strip()
        ),
        30,
        interval=0.2,
        what="expired bootstrap token deleted",
    )
    api.kubectl("-n", "kube-system", "delete", "secret", "bootstrap-token-rbacsg")
    api.kubectl("-n", "kube-public", "delete", "configmap", "cluster-info")


def drive_volume_controllers(api: ApiServer) -> None:
    """Exercise the storage controllers' API calls: a claim and a PV deleted lose their
    protection finalizers (the claim after a live list of the namespace's pods); an unscheduled
    pod's ephemeral volume gets its claim, and a pod whose claim name is taken gets a
    FailedBinding Event."""
    ns = "rbac-e2e"

    def gone(*what: str) -> bool:
        return not api.kubectl("-n", ns, "get", *what, "--ignore-not-found", "-o", "name").strip()

    spec = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "",
        "resources": {"requests": {"storage": "1Gi"}},
    }
    guarded = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "guarded", "namespace": ns},
        "spec": spec,
    }
    taken = {**guarded, "metadata": {"name": "clash-scratch", "namespace": ns}}
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "rbac-e2e-pv"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/x"},
        },
    }
    for doc in (guarded, taken, volume):
        api.kubectl("create", "-f", "-", input=json.dumps(doc))
    api.kubectl("-n", ns, "delete", "pvc", "guarded", "--wait=false")
    api.kubectl("delete", "pv", "rbac-e2e-pv", "--wait=false")
    wait_for(lambda: gone("pvc", "guarded"), SETTLE, interval=0.2, what="claim lost its finalizer")
    wait_for(
        lambda: not api.kubectl("get", "pv", "--ignore-not-found", "-o", "name").strip(),
        30,
        interval=0.2,
        what="PV lost its finalizer",
    )
    for name in ("scratch", "clash"):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "schedulerName": "nobody",
                "containers": [{"name": "c", "image": "busybox:1"}],
                "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}],
            },
        }
        api.kubectl("create", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: not gone("pvc", "scratch-scratch"), SETTLE, interval=0.2, what="ephemeral claim made")
    wait_for(
        lambda: (
            "FailedBinding"
            in api.kubectl("-n", ns, "get", "events", "--field-selector=involvedObject.name=clash")
        ),
        30,
        interval=0.2,
        what="FailedBinding on the clash",
    )
    api.kubectl("-n", ns, "delete", "pod", "scratch", "clash", "--wait=false")


def test_every_api_call_of_every_service_is_allowed_by_its_roles(
    recorded: tuple[RecordingProxy, Services],
) -> None:
    proxy, services = recorded
    objs = render("overlays/dev")
    denied: dict[str, set[str]] = defaultdict(set)
    for identity, account in services.accounts.items():
        calls = proxy.calls[identity]
        assert calls, f"{identity} made no API call through its proxy"
        for method, url in calls:
            attributes = request_attributes(method, url)
            if not allowed(objs, account, attributes):
                denied[f"{identity} (ServiceAccount {account})"].add(str(attributes))
    if os.environ.get("KCM_PRINT_API_CALLS"):  # what each ServiceAccount used, to write its Roles
        for identity in services.accounts:
            used = {dataclasses.replace(request_attributes(m, u), name="") for m, u in proxy.calls[identity]}
            print(identity, *sorted(map(str, used)), sep="\n  ")
    assert not denied, "requests the manifests' RBAC would forbid:\n" + "\n".join(
        f"{who}:\n  " + "\n  ".join(sorted(what)) for who, what in denied.items()
    )


def test_the_scenario_exercised_every_controllers_writes(recorded: tuple[RecordingProxy, Services]) -> None:
    """The RBAC check above is only as good as the calls it saw: each controller must have written."""
    proxy, services = recorded
    for identity in services.accounts:
        if (
            identity in ("kcm-watcher", "kcm-coordinator")
            or services.accounts[identity] in WRITES_NOTHING_HERE
        ):
            continue
        writes = [request_attributes(m, u) for m, u in proxy.calls[identity] if m != "GET"]
        assert any(a.resource != "events" for a in writes), f"{identity} wrote nothing but events"


# ServiceAccounts whose controller cannot write on the embedded API server, and why.
_NO_SAR = (
    "the embedded API server serves no SubjectAccessReview yet, which the approver asks before approving"
)
WRITES_NOTHING_HERE = {
    "certificate-approver": _NO_SAR,
    # As upstream's for CSI claims: it leaves the resize to the external resizer.
    "expand-controller": "its only write for a CSI claim is the ExternalExpanding Event",
}
_NO_AUTHORIZER = "asked by kube-apiserver's authorization of a CSR write for that signer (no authorizer here)"

# Verbs the Roles grant that the scenario above cannot provoke, and why they are needed.
# OwnerReferencesPermissionEnforcement (an admission plugin the embedded apiserver lacks).
_BLOCK_OWNER = "asked by the admission plugin when a dependent's ownerReference sets blockOwnerDeletion"
_REPEATED = "an Event that repeats is patched (count, lastTimestamp)"
_TOO_LARGE = "a cached object too large for a NATS message is fetched from the API (docs/bus.md)"
_SILENT_NODE = (
    "written when a node's kubelet goes silent past the grace period (its conditions Unknown, its "
    "pods NotReady): tests/e2e/test_nodelifecycle.py, too slow for this scenario"
)
_SCRAPED = "the secure port reviews a scraper's token and permission; tests/e2e/test_secure_port.py scrapes"
NOT_EXERCISED = {
    # system:auth-delegator: no scenario request reaches a controller's secure port.
    **{
        (manifests.load(spec).service_account, group, resource, "create"): _SCRAPED
        for spec in BUILTIN
        for group, resource in (
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        )
    },
    # `get` on every resource a controller caches: no scenario object is big enough.
    **{
        (manifests.load(spec).service_account, res.group, res.resource, "get"): _TOO_LARGE
        for spec in BUILTIN
        for res in spec.views
    },
    ("replicaset-controller", "apps", "replicasets/finalizers", "update"): _BLOCK_OWNER,
    ("daemon-set-controller", "apps", "daemonsets/finalizers", "update"): _BLOCK_OWNER,
    ("daemon-set-controller", "", "events", "patch"): _REPEATED,
    ("replication-controller", "", "replicationcontrollers/finalizers", "update"): _BLOCK_OWNER,
    ("statefulset-controller", "apps", "statefulsets/finalizers", "update"): _BLOCK_OWNER,
    ("statefulset-controller", "", "events", "patch"): _REPEATED,
    ("replication-controller", "", "events", "patch"): _REPEATED,
    ("deployment-controller", "apps", "deployments/finalizers", "update"): _BLOCK_OWNER,
    ("job-controller", "batch", "jobs/finalizers", "update"): _BLOCK_OWNER,
    ("job-controller", "", "events", "patch"): _REPEATED,
    ("cronjob-controller", "batch", "cronjobs/finalizers", "update"): _BLOCK_OWNER,
    ("cronjob-controller", "", "events", "patch"): _REPEATED,
    ("deployment-controller", "apps", "replicasets", "get"): "re-reads a ReplicaSet whose name is taken",
    ("generic-garbage-collector", "", "events", "create"): "its one Event, OwnerRefInvalidNamespace",
    ("replicaset-controller", "", "events", "patch"): _REPEATED,
    ("disruption-controller", "", "events", "patch"): _REPEATED,
    ("horizontal-pod-autoscaler", "", "events", "patch"): _REPEATED,
    ("endpoint-controller", "", "events", "create"): "only when a write of Endpoints fails",
    ("endpoint-controller", "", "events", "patch"): _REPEATED,
    ("endpoint-controller", "", "endpoints/restricted", "create"): (
        "asked only by admission that restricts which addresses Endpoints may hold (none here)"
    ),
    ("deployment-controller", "", "events", "patch"): _REPEATED,
    ("generic-garbage-collector", "", "events", "patch"): _REPEATED,
    ("node-controller", "", "events", "patch"): _REPEATED,
    ("taint-eviction-controller", "", "events", "patch"): _REPEATED,
    ("node-lifecycle-controller", "", "nodes/status", "patch"): _SILENT_NODE,
    ("node-lifecycle-controller", "", "pods/status", "patch"): _SILENT_NODE,
    ("node-lifecycle-controller", "", "events", "patch"): _REPEATED,
    ("endpointslice-controller", "", "services/finalizers", "update"): _BLOCK_OWNER,
    (
        "endpointslice-controller",
        "",
        "events",
        "create",
    ): "FailedToUpdateEndpointSlices: only when a write fails",
    ("endpointslice-controller", "", "events", "patch"): _REPEATED,
    ("endpointslicemirroring-controller", "", "endpoints/finalizers", "update"): _BLOCK_OWNER,
    ("endpointslicemirroring-controller", "", "events", "create"): (
        "TooManyAddressesToMirror needs a subset over --mirroring-max-endpoints-per-subset (1000), "
        "and InvalidIPAddress an IP that Endpoints validation refuses"
    ),
    ("endpointslicemirroring-controller", "", "events", "patch"): _REPEATED,
    ("certificate-controller", "certificates.k8s.io", "signers", "sign"): _NO_AUTHORIZER,
    ("certificate-approver", "certificates.k8s.io", "signers", "approve"): _NO_AUTHORIZER,
    ("certificate-approver", "authorization.k8s.io", "subjectaccessreviews", "create"): _NO_SAR,
    ("certificate-approver", "certificates.k8s.io", "certificatesigningrequests/approval", "patch"): _NO_SAR,
    ("ephemeral-volume-controller", "", "pods/finalizers", "update"): _BLOCK_OWNER,
    ("ephemeral-volume-controller", "", "events", "patch"): _REPEATED,
    ("expand-controller", "", "events", "patch"): _REPEATED,
    ("attachdetach-controller", "", "events", "patch"): _REPEATED,
    ("clusterrole-aggregation-controller", "rbac.authorization.k8s.io", "clusterroles", "escalate"): (
        "asked by the RBAC authorizer when it writes rules its own role lacks (no authorizer here)"
    ),
}


def test_no_service_account_is_granted_a_verb_its_service_never_used(
    recorded: tuple[RecordingProxy, Services],
) -> None:
    """Least privilege: every verb a Role names (wildcard rules aside) was used, or is listed above."""
    proxy, services = recorded
    objs = render("overlays/dev")
    unused = []
    for identity, account in services.accounts.items():
        used = {
            (a.group, a.resource + (f"/{a.subresource}" if a.subresource else ""), a.verb)
            for a in (request_attributes(m, u) for m, u in proxy.calls[identity])
            if a.resource_request
        }
        for rule, _ in grants(objs, account):
            if "nonResourceURLs" in rule or "*" in rule["apiGroups"] or "*" in rule["resources"]:
                continue
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        if (group, resource, verb) not in used and (
                            account,
                            group,
                            resource,
                            verb,
                        ) not in NOT_EXERCISED:
                            unused.append(f"{account}: {verb} {group or 'core'}/{resource}")
    assert not unused, "granted but never used:\n" + "\n".join(unused)
