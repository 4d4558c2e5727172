"""The embedded API server answers as kube-apiserver v1.32 does (`make upstream`): the same
requests go to both over real HTTP and their answers are compared after masking what legitimately
differs (uids, timestamps, resourceVersions, managedFields, allocated addresses).

One bare etcd + kube-apiserver for the module (kcm_cli.upstream's argv and pki, no controller
manager) and one embedded server; each test works in a namespace of its own on both. Where they
differ kube-apiserver is right: a difference kept on purpose is in `KEPT` below, with its reason,
and in docs/apiserver.md "Known differences"; anything else fails the test.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from kcm_cli import pki, upstream

from tests.conftest import ApiServer, start_apiserver, stop_process

AGENT = "kcm-parity-test"  # not curl: kube-apiserver pretty-prints for curl and wget
JSON = {"Content-Type": "application/json", "Accept": "application/json"}
# Metadata and status fields whose values each server makes up on its own.
MASKED_KEYS = frozenset(
    {
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "lastTransitionTime",
        "lastUpdateTime",
        "lastProbeTime",
        "startTime",
        "clusterIP",
        "clusterIPs",
    }
)
MASK = "<masked>"


@dataclass
class Server:
    """One API server reached over HTTP(S) with admin credentials."""

    name: str
    url: str
    session: requests.Session

    def request(self, method: str, path: str, body: Any = None, **kw: Any) -> requests.Response:
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        headers = {**JSON, **kw.pop("headers", {})}
        return self.session.request(method, self.url + path, data=data, headers=headers, timeout=30, **kw)


@dataclass
class Pair:
    up: Server
    kcm: Server

    def both(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[requests.Response, ...]:
        return tuple(s.request(method, path, copy.deepcopy(body), **kw) for s in (self.up, self.kcm))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    state = tmp_path_factory.mktemp("upstream")
    identity = pki.ensure(state / "pki")
    plane = upstream.ControlPlane(state, identity, upstream.binaries())
    procs: list[subprocess.Popen[bytes]] = []
    embedded: ApiServer | None = None
    try:
        for name, argv in (("etcd", plane.etcd_argv()), ("kube-apiserver", plane.apiserver_argv())):
            with open(state / f"{name}.log", "wb") as log:
                procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        embedded = start_apiserver(tmp_path_factory.mktemp("embedded"))
        asyncio.run(asyncio.wait_for(plane.wait_ready(), 120))
        admin = pki.client(identity.ca_cert.parent, "admin", "kubernetes-admin", ("system:masters",))
        up = requests.Session()
        up.trust_env = False  # REQUESTS_CA_BUNDLE would override the cluster CA given here
        up.cert = (str(admin.cert), str(admin.key))
        up.verify = str(identity.ca_cert)
        sessions = [up, requests.Session()]
        for s in sessions:
            s.headers["User-Agent"] = AGENT
        yield Pair(Server("kube-apiserver", plane.url, up), Server("embedded", embedded.url, sessions[1]))
    finally:
        if embedded is not None:
            embedded.stop()
        for proc in reversed(procs):
            stop_process(proc)


_namespaces = itertools.count()


@pytest.fixture()
def ns(pair: Pair) -> str:
    """A namespace on both servers, with a `default` ServiceAccount that mounts no token (no
    controller manager runs to make one, and kube-apiserver's ServiceAccount admission needs it)."""
    name = f"parity-{next(_namespaces)}"
    for r in pair.both("POST", "/api/v1/namespaces", {"metadata": {"name": name}}):
        assert r.status_code == 201, r.text
    sa = {"metadata": {"name": "default"}, "automountServiceAccountToken": False}
    for r in pair.both("POST", f"/api/v1/namespaces/{name}/serviceaccounts", sa):
        assert r.status_code == 201, r.text
    return name


def masked(obj: Any, uid: str = "") -> Any:
    """`obj` with what each server makes up masked: `MASKED_KEYS`, and the object's own uid
    wherever it is copied (a Job's selector and labels)."""
    uid = uid or (obj.get("metadata", {}).get("uid", "") if isinstance(obj, dict) else "")
    if isinstance(obj, dict):
        return {k: (MASK if k in MASKED_KEYS else masked(v, uid)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [masked(v, uid) for v in obj]
    return MASK if uid and obj == uid else obj


# Differences kept on purpose (docs/apiserver.md "Known differences"): a path pattern of the
# compared object, and why.
KEPT: dict[str, str] = {
    r"\.metadata\.finalizers": "no StorageObjectInUseProtection admission (kubernetes.io/pvc-protection)",
    r"\.spec\.serviceAccount(Name)?": "no ServiceAccount admission",
    r"\.spec\.tolerations": "no DefaultTolerationSeconds admission: kcm's eviction tests expect prompt evictions",
    r"(\.spec(\.jobTemplate\.spec)?\.template)?\.spec\.containers\[0\]\.resources"
    r"|\.spec(\.jobTemplate(\.spec\.template)?|\.template)\.metadata(\.creationTimestamp)?"
    r"|\.status\.loadBalancer|\.endpoints\[0\]\.conditions": (
        "an empty struct Go always writes ({}, a template's `creationTimestamp: null`): the same to "
        "every client, and a template's hash in the controllers would change"
    ),
    r"\.status\.currentMetrics": "null where Go writes a nil list without omitempty; absent here",
    r"\.metadata\.managedFields": "kube-apiserver records none for a new Lease or Node",
}


def unexplained(diffs: list[str]) -> list[str]:
    return [d for d in diffs if not any(re.fullmatch(p, d.split(":", 1)[0]) for p in KEPT)]


def differences(up: Any, kcm: Any, path: str = "") -> list[str]:
    """Every path where the two documents differ, as `path: kube-apiserver=... embedded=...`."""
    if isinstance(up, dict) and isinstance(kcm, dict):
        out = []
        for key in sorted(set(up) | set(kcm)):
            here = f"{path}.{key}"
            if key not in kcm:
                out.append(f"{here}: kube-apiserver={up[key]!r} embedded=<absent>")
            elif key not in up:
                out.append(f"{here}: kube-apiserver=<absent> embedded={kcm[key]!r}")
            else:
                out += differences(up[key], kcm[key], here)
        return out
    if isinstance(up, list) and isinstance(kcm, list) and len(up) == len(kcm):
        return [
            d for i, (a, b) in enumerate(zip(up, kcm, strict=True)) for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if up == kcm else [f"{path}: kube-apiserver={up!r} embedded={kcm!r}"]


# -- objects ----------------------------------------------------------------------------------

POD_SPEC = {"containers": [{"name": "c", "image": "nginx:1.27"}]}
TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": POD_SPEC}
SELECTOR = {"matchLabels": {"app": "a"}}
# path under /api or /apis, object: a minimal valid object of every built-in kind the controllers use.
OBJECTS: dict[str, tuple[str, dict[str, Any]]] = {
    "Pod": ("/api/v1/namespaces/{ns}/pods", {"metadata": {"name": "p"}, "spec": POD_SPEC}),
    "Service": (
        "/api/v1/namespaces/{ns}/services",
        {"metadata": {"name": "s"}, "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}},
    ),
    "Endpoints": (
        "/api/v1/namespaces/{ns}/endpoints",
        {
            "metadata": {"name": "e"},
            "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}],
        },
    ),
    "ConfigMap": ("/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "c"}, "data": {"k": "v"}}),
    "Secret": ("/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
    "PersistentVolumeClaim": (
        "/api/v1/namespaces/{ns}/persistentvolumeclaims",
        {
            "metadata": {"name": "c"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    ),
    "ResourceQuota": (
        "/api/v1/namespaces/{ns}/resourcequotas",
        {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10"}}},
    ),
    "ReplicationController": (
        "/api/v1/namespaces/{ns}/replicationcontrollers",
        {"metadata": {"name": "rc"}, "spec": {"selector": {"app": "a"}, "template": TEMPLATE}},
    ),
    "Deployment": (
        "/apis/apps/v1/namespaces/{ns}/deployments",
        {"metadata": {"name": "d"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
    ),
    "ReplicaSet": (
        "/apis/apps/v1/namespaces/{ns}/replicasets",
        {"metadata": {"name": "rs"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
    ),
    "StatefulSet": (
        "/apis/apps/v1/namespaces/{ns}/statefulsets",
        {
            "metadata": {"name": "ss"},
            "spec": {"selector": SELECTOR, "template": TEMPLATE, "serviceName": "s"},
        },
    ),
    "DaemonSet": (
        "/apis/apps/v1/namespaces/{ns}/daemonsets",
        {"metadata": {"name": "ds"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
    ),
    "ControllerRevision": (
        "/apis/apps/v1/namespaces/{ns}/controllerrevisions",
        {"metadata": {"name": "cr"}, "revision": 1, "data": {"spec": {}}},
    ),
    "Job": (
        "/apis/batch/v1/namespaces/{ns}/jobs",
        {
            "metadata": {"name": "j"},
            "spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}},
        },
    ),
    "CronJob": (
        "/apis/batch/v1/namespaces/{ns}/cronjobs",
        {
            "metadata": {"name": "cj"},
            "spec": {
                "schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}}},
            },
        },
    ),
    "EndpointSlice": (
        "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
        {
            "metadata": {"name": "es"},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}],
            "ports": [{"port": 80}],
        },
    ),
    "PodDisruptionBudget": (
        "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {"metadata": {"name": "pdb"}, "spec": {"selector": SELECTOR, "minAvailable": 1}},
    ),
    "HorizontalPodAutoscaler": (
        "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
        {
            "metadata": {"name": "h"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "maxReplicas": 3,
            },
        },
    ),
    "Lease": ("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", {"metadata": {"name": "l"}, "spec": {}}),
    "Role": (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        {"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    ),
}


@pytest.mark.parametrize("kind", sorted(OBJECTS))
def test_a_minimal_object_is_created_and_read_alike(pair: Pair, ns: str, kind: str) -> None:
    path, body = OBJECTS[kind]
    group_version = path.split("/namespaces")[0].removeprefix("/apis/").removeprefix("/api/")
    body = {"apiVersion": group_version, "kind": kind, **body}
    path = path.format(ns=ns)
    created = pair.both("POST", path, body)
    assert [r.status_code for r in created] == [201, 201], [r.text for r in created]
    diffs = differences(masked(created[0].json()), masked(created[1].json()))
    read = pair.both("GET", f"{path}/{body['metadata']['name']}")
    diffs += differences(masked(read[0].json()), masked(read[1].json()))
    assert not unexplained(diffs), "\n".join(unexplained(diffs))
