"""Takeover without churn (issue 27, item 6): workloads running under upstream
kube-controller-manager on kube-apiserver are handed to kcm, and back, and nothing is rolled.

One state directory, three runs of `kcm dev --apiserver=upstream` on it (etcd keeps the cluster
between them; the simulator's pods go on running across its restarts):
1. `--reference`: upstream kube-controller-manager. A Deployment, a StatefulSet with claims and
   a DaemonSet, each after a second rollout (old ReplicaSets and ControllerRevisions beside the
   current ones), a finished Job, a running Indexed Job, a CronJob that ran once (then
   suspended) and one that never ran, two Services (EndpointSlices, Endpoints) and a
   ResourceQuota are made and settle.
2. kcm's controllers, until each has worked through at least as many keys as its start-up fill
   holds (the work queue's `workqueue_work_duration_seconds_count`).
3. `--reference` again, likewise (its own work queue metrics).

After each handover, from kube-apiserver's audit log of that run (writes, with who made them) and
snapshots of the namespace before and after: no object of the namespace created or deleted by
anyone, no write to one but to its `status`, and every object but its status as before (pods,
ReplicaSets, ControllerRevisions, Jobs, EndpointSlices, claims and the workloads themselves).
Status writes are allowed; each run's are printed (`pytest -s`), with those that changed
nothing, as are the Events the new controller manager recorded.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import wait_for
from tests.e2e import devstack

Stack = devstack.DevStack
pytestmark = pytest.mark.timeout(900)  # three stacks one after the other
Key = tuple[str, str]  # (resource, name)

NS = "takeover"
SETTLE = 180.0  # the first run: a CronJob's first minute, a rollout, a StatefulSet
SYNC = 120.0  # a controller manager's first pass over the cluster
# What the namespace holds and the snapshots compare (Events are recorded, not compared).
KINDS = (
    "pods",
    "replicasets.apps",
    "controllerrevisions.apps",
    "jobs.batch",
    "endpointslices.discovery.k8s.io",
    "persistentvolumeclaims",
    "deployments.apps",
    "statefulsets.apps",
    "daemonsets.apps",
    "cronjobs.batch",
    "services",
    "endpoints",
    "resourcequotas",
)
# Each controller's work queue and the resource whose objects its start-up fill enqueues at
# least one key for: kcm's queues are named as the controllers, upstream's as its source.
FILLS = {
    "apps/v1/deployments": ("deployment-controller", "deployment"),
    "apps/v1/replicasets": ("replicaset-controller", "replicaset"),
    "apps/v1/statefulsets": ("statefulset-controller", "statefulset"),
    "apps/v1/daemonsets": ("daemonset-controller", "daemonset"),
    "batch/v1/jobs": ("job-controller", "job"),
    "batch/v1/cronjobs": ("cronjob-controller", "cronjob"),
    "v1/services": ("endpoints-controller", "endpoint"),
    "v1/resourcequotas": ("resourcequota-controller", "resourcequota_primary"),
}
SERVICE_QUEUES = ("endpointslice-controller", "endpoint_slice")  # one key per Service too

# The simulator's containers otherwise wait out the whole grace period of a deleted pod (30 s):
# the second rollouts would take minutes.
QUICK_STOP = '"sim.kcm.dev/terminate-seconds": "0"'
WORKLOADS = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {{name: quota, namespace: {NS}}}
spec:
  hard: {{pods: "50", services: "10", persistentvolumeclaims: "10", requests.cpu: "10",
          count/deployments.apps: "5"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {NS}}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}, annotations: {{{QUICK_STOP}}}}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{{containerPort: 80, name: http}}, {{containerPort: 443, name: https}}]
        resources: {{requests: {{cpu: 100m}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {NS}}}
spec:
  selector: {{app: web}}
  ports: [{{name: https, port: 443, targetPort: https}}, {{name: http, port: 80, targetPort: http}}]
---
apiVersion: v1
kind: Service
metadata: {{name: db, namespace: {NS}}}
spec:
  clusterIP: None
  selector: {{app: db}}
  ports: [{{name: pg, port: 5432}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: {NS}}}
spec:
  serviceName: db
  replicas: 2
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}, annotations: {{{QUICK_STOP}}}}}
    spec:
      containers:
      - name: db
        image: postgres:16
        resources: {{requests: {{cpu: 100m}}}}
        volumeMounts: [{{name: data, mountPath: /var/lib/postgresql}}]
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: {NS}}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}, annotations: {{{QUICK_STOP}}}}}
    spec:
      containers:
      - name: agent
        image: busybox:1.36
        resources: {{requests: {{cpu: 10m}}}}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: once, namespace: {NS}}}
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - {{name: once, image: "busybox:1.36", command: [date], resources: {{requests: {{cpu: 10m}}}}}}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: worker, namespace: {NS}}}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - {{name: worker, image: "busybox:1.36", resources: {{requests: {{cpu: 10m}}}}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {{name: tick, namespace: {NS}}}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - {{name: tick, image: "busybox:1.36", command: [date], resources: {{requests: {{cpu: 10m}}}}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {{name: yearly, namespace: {NS}}}
spec:
  schedule: "0 0 1 1 *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - {{name: yearly, image: "busybox:1.36", command: [date]}}
"""


def get(stack: Stack, *args: str) -> Any:
    return json.loads(stack.kubectl("get", *args, "-o", "json").stdout)


def snapshot(stack: Stack) -> dict[Key, dict[str, Any]]:
    """Every object of the namespace, by (resource, name)."""
    out = {}
    for kind in (*KINDS, "events"):
        for item in get(stack, kind, "-n", NS)["items"]:
            out[(kind.split(".")[0], item["metadata"]["name"])] = item
    return out


def without_status(obj: dict[str, Any]) -> dict[str, Any]:
    """What the controllers must leave alone: all but the status and the server's bookkeeping."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def settle(stack: Stack) -> None:
    """Create the workloads under upstream kube-controller-manager and wait until it is done:
    a second rollout of the Deployment, the StatefulSet and the DaemonSet, every pod running,
    the Job and the CronJob's first Job complete, the Indexed Job's pods ready, the quota
    counting, both Services' endpoints published."""
    stack.kubectl("apply", "-f", "-", input=WORKLOADS)
    workloads = {
        "deployment/web": "web=nginx:1.28",
        "statefulset/db": "db=postgres:17",
        "daemonset/agent": "agent=busybox:1.37",
    }
    stack.kubectl("rollout", "status", "deployment/web", "-n", NS, "--timeout=120s", timeout=130)
    # A second revision of each: old ReplicaSets and ControllerRevisions to find the current one among.
    for workload, image in workloads.items():
        stack.kubectl("set", "image", workload, image, "-n", NS)
    for workload in workloads:
        stack.kubectl("rollout", "status", workload, "-n", NS, "--timeout=120s", timeout=130)
    stack.kubectl("wait", "--for=condition=Complete", "job/once", "-n", NS, "--timeout=60s", timeout=70)
    # A Job still running when the controller managers change over: its pods hold the tracking finalizer.
    wait_for(
        lambda: get(stack, "job", "worker", "-n", NS).get("status", {}).get("ready") == 2,
        60,
        interval=0.5,
        what="the running Job's two pods ready",
    )

    def ran_once() -> bool:
        status = get(stack, "cronjob", "tick", "-n", NS).get("status", {})
        return bool(status.get("lastSuccessfulTime")) and not status.get("active")

    wait_for(ran_once, SETTLE, interval=1, what="the CronJob's first Job complete")
    # Nothing more of it while the controller managers change over: its Jobs would be new ones.
    stack.kubectl("patch", "cronjob", "tick", "-n", NS, "-p", '{"spec":{"suspend":true}}')

    used: dict[str, str] = {}

    def counted() -> bool:
        used.update(get(stack, "resourcequota", "quota", "-n", NS).get("status", {}).get("used", {}))
        return (used.get("pods"), used.get("persistentvolumeclaims")) == ("10", "2")

    try:
        wait_for(counted, 60, interval=0.5, what="the quota counting 10 pods and 2 claims")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it counts {used}") from None

    def published() -> bool:
        slices = get(stack, "endpointslices", "-n", NS)["items"]
        ready = sum(
            1 for s in slices for e in s.get("endpoints") or [] if e.get("conditions", {}).get("ready")
        )
        subsets = [s for e in get(stack, "endpoints", "-n", NS)["items"] for s in e.get("subsets") or []]
        return ready == 5 and sum(len(s.get("addresses") or []) for s in subsets) == 5

    wait_for(published, 60, interval=0.5, what="both Services' endpoints published")


def fill_sizes(stack: Stack) -> dict[str, int]:
    """Per resource of FILLS, how many objects the cluster holds: the least number of keys a
    controller manager's first pass works through."""
    sizes = {}
    for resource in FILLS:
        group_version, plural = resource.rsplit("/", 1)
        group = group_version.split("/")[0] if "/" in group_version else ""
        name = f"{plural}.{group}" if group else plural
        sizes[resource] = len(get(stack, name, "-A")["items"])
    return sizes


def wait_worked_through(queues: dict[str, int], processed: Any, what: str) -> None:
    """Until each queue has finished at least its number of items (`processed(queue)`)."""

    def behind() -> dict[str, tuple[float, int]]:
        done = {queue: processed(queue) for queue in queues}
        return {q: (done[q], want) for q, want in queues.items() if done[q] < want}

    wait_for(lambda: not behind(), SYNC, interval=0.5, what=f"{what}: queues behind {behind()}")


def queue_targets(sizes: dict[str, int], which: int) -> dict[str, int]:
    """Work queue name (0: kcm's, 1: upstream's) -> the items it must have finished."""
    targets = {names[which]: sizes[resource] for resource, names in FILLS.items()}
    targets[SERVICE_QUEUES[which]] = sizes["v1/services"]
    if which == 0:
        targets["resourcequota-controller"] += 1  # its periodic resync key
    return targets


def kcm_synced(stack: Stack) -> None:
    # kcm's queues carry upstream's names on the metrics; the controller finds the replicas.
    upstream_name = dict([*FILLS.values(), SERVICE_QUEUES])

    def processed(controller: str) -> float:
        sample = "workqueue_work_duration_seconds_count"
        return stack.metric(controller, sample, name=upstream_name[controller])

    wait_worked_through(queue_targets(fill_sizes(stack), 0), processed, "kcm's first pass")


def upstream_synced(stack: Stack) -> None:
    """Through kube-controller-manager's /metrics (the admin's client certificate: it delegates
    authorization to kube-apiserver)."""
    line = next(line for line in stack.progress if "kube-controller-manager healthy at" in line)
    url = line.split("healthy at ", 1)[1].split()[0].replace("/healthz", "/metrics")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate
    pki = stack.state / "pki"
    context.load_cert_chain(pki / "admin.crt", pki / "admin.key")

    def processed(queue: str) -> float:
        with urllib.request.urlopen(url, timeout=10, context=context) as resp:
            text = resp.read().decode()
        return sum(
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "workqueue_work_duration_seconds_count" and s.labels.get("name") == queue
        )

    wait_worked_through(
        queue_targets(fill_sizes(stack), 1), processed, "kube-controller-manager's first pass"
    )


@dataclass
class Handover:
    """One run of a controller manager on what the one before left."""

    name: str
    audit: list[dict[str, Any]]
    before: dict[Key, dict[str, Any]]
    after: dict[Key, dict[str, Any]]

    def writes(self) -> list[dict[str, Any]]:
        """The namespace's write requests, Events aside, refused ones too: a create that met
        AlreadyExists was still an attempt to make something new."""
        return [
            e
            for e in self.audit
            if e.get("objectRef", {}).get("namespace") == NS and e["objectRef"].get("resource") != "events"
        ]

    def churn(self) -> list[str]:
        """Creates, deletes and writes other than to `status`, and objects changed besides
        their status, gone or new."""
        out = [
            f"{e['verb']} {_ref(e)} by {e['user']['username']}: {e.get('responseStatus', {}).get('code')}"
            for e in self.writes()
            if e["objectRef"].get("subresource") != "status"
        ]
        for key in sorted(self.before.keys() | self.after.keys()):
            if key[0] == "events":
                continue
            old, new = self.before.get(key), self.after.get(key)
            if old is None or new is None:
                out.append(f"{'new' if old is None else 'gone'}: {key[0]}/{key[1]}")
            elif without_status(old) != without_status(new):
                out.append(
                    f"changed: {key[0]}/{key[1]}: {_difference(without_status(old), without_status(new))}"
                )
        return out

    def elsewhere(self) -> list[str]:
        """The controller managers' writes outside the namespace, but for their own Leases,
        Events, tokens and ServiceAccounts (`--use-service-account-credentials`): each
        (writer, verb, object) once, with how often."""
        counts = Counter(
            f"{e['verb']} {_ref(e)} in {e['objectRef'].get('namespace') or '(cluster)'} by {e['user']['username']}"
            for e in self.audit
            if e.get("responseStatus", {}).get("code", 0) < 300
            and e["objectRef"].get("namespace") != NS
            and e["objectRef"].get("resource") not in ("leases", "events", "serviceaccounts")
            and _is_controller_manager(e["user"]["username"])
        )
        return [f"{n} x {write}" for write, n in sorted(counts.items())]

    def report(self) -> str:
        """Status writes by writer and resource, those that changed nothing, and new Events."""
        status = [e for e in self.writes() if e["objectRef"].get("subresource") == "status"]
        counts = Counter((e["user"]["username"], e["objectRef"]["resource"]) for e in status)
        unchanged = sorted(
            {
                _ref(e)
                for e in status
                if (key := (e["objectRef"]["resource"], e["objectRef"]["name"])) in self.before
                and key in self.after
                and self.before[key].get("status") == self.after[key].get("status")
            }
        )
        events = [
            f"{e.get('reason')} {e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')}: "
            f"{e.get('message')} ({(e.get('source') or {}).get('component') or e.get('reportingComponent')})"
            for key, e in sorted(self.after.items())
            if key[0] == "events" and key not in self.before
        ]
        churn = self.churn()
        lines = [f"== {self.name}: {len(churn)} churn", *(f"   {line}" for line in churn)]
        elsewhere = self.elsewhere()
        lines += [f"   {len(elsewhere)} kinds of write outside {NS}", *(f"   {line}" for line in elsewhere)]
        lines += [f"   {len(status)} status writes"]
        lines += [f"   {n} x {resource}/status by {user}" for (user, resource), n in sorted(counts.items())]
        lines += [f"   changed nothing: {', '.join(unchanged) or '-'}", f"   {len(events)} new Events"]
        lines += [f"   {line}" for line in events]
        return "\n".join(lines)


def _is_controller_manager(user: str) -> bool:
    """kcm's controllers (their ServiceAccounts in kcm-system) or upstream's (its own user and
    its controllers' ServiceAccounts in kube-system)."""
    return user == "system:kube-controller-manager" or user.startswith(
        ("system:serviceaccount:kcm-system:", "system:serviceaccount:kube-system:")
    )


def _ref(event: dict[str, Any]) -> str:
    ref = event["objectRef"]
    sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
    return f"{ref.get('resource')}/{ref.get('name')}{sub}"


def _difference(old: Any, new: Any, path: str = "") -> str:
    """The first path where two JSON values differ, with both sides."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(old.keys() | new.keys()):
            if old.get(k) != new.get(k):
                return _difference(old.get(k), new.get(k), f"{path}.{k}")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            if a != b:
                return _difference(a, b, f"{path}[{i}]")
    return f"{path}: {json.dumps(old)} -> {json.dumps(new)}"


def _audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def handovers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Handover]]:
    """Upstream -> kcm -> upstream on one state directory; each run's audit log is complete
    once its kube-apiserver has stopped."""
    tmp = tmp_path_factory.mktemp("takeover")
    audits = {name: tmp / f"audit-{name}.log" for name in ("upstream", "kcm", "upstream-again")}

    def run(name: str, *args: str) -> contextlib.AbstractContextManager[Stack]:
        return devstack.dev_stack(tmp, "--apiserver=upstream", "--audit-log-path", str(audits[name]), *args)

    with run("upstream", "--reference") as stack:
        settle(stack)
        first = snapshot(stack)
    with run("kcm") as stack:
        kcm_synced(stack)
        second = snapshot(stack)
    with run("upstream-again", "--reference") as stack:
        upstream_synced(stack)
        third = snapshot(stack)
    for name, objects in (("1-upstream", first), ("2-kcm", second), ("3-upstream-again", third)):
        # For a failure's post-mortem: the test's report names only the first difference.
        (tmp / f"snapshot-{name}.json").write_text(json.dumps({"/".join(k): v for k, v in objects.items()}))
    done = {
        "kcm": Handover("upstream -> kcm", _audit(audits["kcm"]), first, second),
        "upstream-again": Handover("kcm -> upstream", _audit(audits["upstream-again"]), second, third),
    }
    for handover in done.values():
        print(handover.report())
    print(f"takeover state, audit logs and snapshots in {tmp}")
    yield done


def test_kcm_takes_over_from_upstream_without_churn(handovers: dict[str, Handover]) -> None:
    handover = handovers["kcm"]
    # The namespace was there to take over: both CronJobs, a Job it made, two ReplicaSets.
    assert {"cronjobs", "replicasets", "controllerrevisions", "persistentvolumeclaims"} <= {
        k[0] for k in handover.before
    }
    churn = handover.churn()
    assert churn == [], "\n".join(churn)


def test_upstream_takes_back_from_kcm_without_churn(handovers: dict[str, Handover]) -> None:
    churn = handovers["upstream-again"].churn()
    assert churn == [], "\n".join(churn)
