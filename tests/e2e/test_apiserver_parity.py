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
import base64
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

from tests import csrs
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
        "lastPhaseTransitionTime",
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
    embedded: ApiServer

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
        asyncio.run(asyncio.wait_for(plane.wait_ready(), 120))
        # Only then: on a busy machine both starting at once outlast start_apiserver's wait.
        # Both enforce RBAC (kube-apiserver's argv has Node,RBAC): the admin of each is in
        # system:masters, and the access-review and forbidden cases below compare decisions.
        embedded = start_apiserver(tmp_path_factory.mktemp("embedded"), "--authorization-mode=RBAC")
        admin = plane.admin_certificate()
        up = requests.Session()
        up.trust_env = False  # REQUESTS_CA_BUNDLE would override the cluster CA given here
        up.cert = (str(admin.cert), str(admin.key))
        up.verify = str(identity.ca_cert)
        sessions = [up, requests.Session()]
        for s in sessions:
            s.headers["User-Agent"] = AGENT
        yield Pair(
            Server("kube-apiserver", plane.url, up), Server("embedded", embedded.url, sessions[1]), embedded
        )
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
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    uid = uid or (meta.get("uid", "") if isinstance(meta, dict) else "")
    if isinstance(obj, dict):
        return {k: (MASK if k in MASKED_KEYS else masked(v, uid)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [masked(v, uid) for v in obj]
    return MASK if uid and obj == uid else obj


# Differences kept on purpose (docs/apiserver.md "Known differences"): a path pattern of the
# compared object, and why.
KEPT: dict[str, str] = {
    r"((\.spec(\.jobTemplate\.spec)?)?\.template)?\.spec\.containers\[0\]\.resources"
    r"|(\.spec|\.spec\.jobTemplate\.spec)?\.template\.metadata(\.creationTimestamp)?"
    r"|\.spec\.jobTemplate\.metadata|\.status\.loadBalancer|\.endpoints\[0\]\.conditions"
    r"|\.status: kube-apiserver=\{'daemonEndpoints'.*": (
        "an empty struct Go always writes ({}, a template's `creationTimestamp: null`): the same to "
        "every client, and a template's hash in the controllers would change"
    ),
    r"\.status\.currentMetrics|\.(eventTime|firstTimestamp|lastTimestamp)|\.source": (
        "null (a nil list, a zero time) or {} where Go writes a field without omitempty; absent here"
    ),
    r"\.conditions\[\d+\]\.lastProbeTime: kube-apiserver='<masked>' embedded=<absent>": (
        "a pod condition's zero lastProbeTime, which Go writes as null; absent here (Go's zero values)"
    ),
    r"\.spec\.extra": (
        "a CSR records its requester's extra: kube-apiserver's client-certificate admin has a "
        "credential id (authentication.kubernetes.io/credential-id), the embedded server's admin none"
    ),
    r"\.metadata\.managedFields: kube-apiserver=<absent>.*": (
        "what admission adds (a new Node's not-ready taint) is owned by the writer here; upstream "
        "tracks the request before admission"
    ),
}


def unexplained(diffs: list[str]) -> list[str]:
    """The differences no `KEPT` pattern matches (a pattern matches the path, or the whole line)."""
    return [
        d for d in diffs if not any(re.fullmatch(p, d.split(":", 1)[0]) or re.fullmatch(p, d) for p in KEPT)
    ]


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


def _certificate_request() -> str:
    """A PEM certificate request, base64-encoded as a CSR's spec.request holds it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "parity")])
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


CSR = _certificate_request()
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
    "Lease": (
        "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        {"metadata": {"name": "l"}, "spec": {"holderIdentity": "h"}},
    ),
    "Node": ("/api/v1/nodes", {"metadata": {"name": "parity-node"}}),
    "PersistentVolume": (
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": "parity-pv"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/x"},
            },
        },
    ),
    "ServiceAccount": ("/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "sa"}}),
    "Event": (
        "/api/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": "ev"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "{ns}"},
            "reason": "R",
            "message": "m",
        },
    ),
    "LimitRange": (
        "/api/v1/namespaces/{ns}/limitranges",
        {"metadata": {"name": "lr"}, "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}},
    ),
    "PodTemplate": (
        "/api/v1/namespaces/{ns}/podtemplates",
        {"metadata": {"name": "pt"}, "template": TEMPLATE},
    ),
    "ClusterRole": (
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "metadata": {"name": "parity-role"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
    ),
    "CertificateSigningRequest": (
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        {
            "metadata": {"name": "parity-csr"},
            "spec": {"request": CSR, "signerName": "example.com/signer", "usages": ["digital signature"]},
        },
    ),
    "Role": (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        {"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    ),
}


@pytest.mark.parametrize("kind", sorted(OBJECTS))
def test_a_minimal_object_is_created_and_read_alike(pair: Pair, ns: str, kind: str) -> None:
    path, body = OBJECTS[kind]
    group_version = "v1" if path.startswith("/api/") else "/".join(path.split("/")[2:4])
    body = {"apiVersion": group_version, "kind": kind, **body}
    path = path.format(ns=ns)
    body = json.loads(json.dumps(body).replace("{ns}", ns))
    created = pair.both("POST", path, body)
    assert [r.status_code for r in created] == [201, 201], [r.text for r in created]
    diffs = differences(masked(created[0].json()), masked(created[1].json()))
    read = pair.both("GET", f"{path}/{body['metadata']['name']}")
    diffs += differences(masked(read[0].json()), masked(read[1].json()))
    assert not unexplained(diffs), "\n".join(unexplained(diffs))


# -- storage admission ------------------------------------------------------------------------


def _storage_class(name: str, *, default: bool = False, expand: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta,
        "provisioner": "example.com/none",
        "allowVolumeExpansion": expand,
    }


def test_storage_admission_answers_alike(pair: Pair, ns: str) -> None:
    """StorageObjectInUseProtection and DefaultStorageClass on creates, PersistentVolumeClaimResize
    on a bound claim's growth (refused: the same Status bytes; allowed), and a PV's phase
    transition time through its status subresource."""
    classes = "/apis/storage.k8s.io/v1/storageclasses"
    default, fixed, growable = f"{ns}-default", f"{ns}-fixed", f"{ns}-growable"
    try:
        for body in (
            _storage_class(default, default=True),
            _storage_class(fixed),
            _storage_class(growable, expand=True),
        ):
            assert [r.status_code for r in pair.both("POST", classes, body)] == [201, 201]
        claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
        spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        created = pair.both(
            "POST",
            claims,
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "d"}, "spec": spec},
        )
        assert created[0].json()["spec"]["storageClassName"] == default
        assert created[0].json()["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
        assert not differences(masked(created[0].json()), masked(created[1].json()))
        for name, cls in (("fixed", fixed), ("grows", growable)):
            body = {
                "metadata": {"name": name},
                "spec": {**spec, "storageClassName": cls, "volumeName": f"pv-{name}"},
            }
            assert [r.status_code for r in pair.both("POST", claims, body)] == [201, 201]
            bound = {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}}
            merge = {"Content-Type": "application/merge-patch+json"}
            assert [
                r.status_code for r in pair.both("PATCH", f"{claims}/{name}/status", bound, headers=merge)
            ] == [200, 200]
        grow = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
        up, kcm = pair.both("PATCH", f"{claims}/fixed", grow, headers=merge)
        assert (kcm.status_code, kcm.content) == (up.status_code, up.content) and up.status_code == 403
        up, kcm = pair.both("PATCH", f"{claims}/grows", grow, headers=merge)
        assert [up.status_code, kcm.status_code] == [200, 200]
        assert not differences(masked(up.json()), masked(kcm.json()))
        pv = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{ns}-pv"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/x"},
            },
        }
        made = pair.both("POST", "/api/v1/persistentvolumes", pv)
        assert all(r.json()["status"].get("lastPhaseTransitionTime") for r in made)
        assert all(r.json()["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"] for r in made)
        phased = pair.both(
            "PATCH",
            f"/api/v1/persistentvolumes/{ns}-pv/status",
            {"status": {"phase": "Available"}},
            headers=merge,
        )
        assert all(r.json()["status"].get("lastPhaseTransitionTime") for r in phased)
        assert not differences(masked(phased[0].json()), masked(phased[1].json()))
    finally:
        for name in (default, fixed, growable):
            pair.both("DELETE", f"{classes}/{name}")


def _limit_range(name: str, *limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name},
        "spec": {"limits": list(limits)},
    }


def _pod(name: str, *containers: dict[str, Any], generate: bool = False) -> dict[str, Any]:
    meta = {"generateName": name} if generate else {"name": name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": list(containers)}}


def _container(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": "nginx:1.27", "resources": resources}


def _claim(name: str, size: str) -> dict[str, Any]:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def _answered_alike(pair: Pair, cases: list[tuple[str, Any]]) -> list[str]:
    """Each (path, body) created on both servers: the same status, and the same bytes for an
    error or the same object (masked) for a success; the differences, one line per case."""
    out = []
    for path, body in cases:
        up, kcm = pair.both("POST", path, body)
        what = f"{body['kind']} {body['metadata']}"
        # A made-up name differs: compared without its random suffix.
        texts = [re.sub(r"generated-[a-z0-9]{5}\b", "generated-<suffix>", r.text) for r in (up, kcm)]
        if up.status_code != kcm.status_code or (up.status_code >= 400 and texts[0] != texts[1]):
            out.append(
                f"{what}: kube-apiserver {up.status_code} {up.text.strip()} / embedded {kcm.status_code} {kcm.text.strip()}"
            )
        elif up.status_code < 400:
            out += [f"{what}: {d}" for d in differences(masked(up.json()), masked(kcm.json()))]
    return out


def test_limit_ranger_answers_alike(pair: Pair, ns: str) -> None:
    """LimitRanger admission (kube-apiserver's default): a LimitRange's own validation, its
    defaults on a pod's containers, and its min, max and ratio on pods and claims, refused
    with the same Status bytes. One resource per case: where several fail at once kube-apiserver
    lists them in Go's random map order."""
    ranges = f"/api/v1/namespaces/{ns}/limitranges"
    pods = f"/api/v1/namespaces/{ns}/pods"
    claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    container = {
        "type": "Container",
        "max": {"cpu": "1", "memory": "1Gi"},
        "min": {"cpu": "100m", "memory": "64Mi"},
        "default": {"cpu": "500m", "memory": "256Mi"},
        "defaultRequest": {"cpu": "200m", "memory": "128Mi"},
        "maxLimitRequestRatio": {"cpu": "4"},
    }
    invalid = [
        _limit_range("min-over-max", {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}),
        _limit_range(
            "request-over-limit",
            {"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "2"}},
        ),
        _limit_range("pod-default", {"type": "Pod", "default": {"cpu": "1"}, "max": {"cpu": "2"}}),
        _limit_range("claim-unbounded", {"type": "PersistentVolumeClaim", "default": {"storage": "1Gi"}}),
        _limit_range("low-ratio", {"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}),
        _limit_range(
            "ratio-over-spread",
            {
                "type": "Container",
                "min": {"cpu": "1"},
                "max": {"cpu": "2"},
                "maxLimitRequestRatio": {"cpu": "3"},
            },
        ),
        _limit_range("twice", {"type": "Pod", "max": {"cpu": "1"}}, {"type": "Pod", "max": {"cpu": "2"}}),
        _limit_range("no-such-type", {"type": "Nope", "max": {"cpu": "1"}}),
    ]
    cases: list[tuple[str, Any]] = [(ranges, body) for body in invalid]
    cases += [
        (ranges, _limit_range("container", container)),
        (ranges, _limit_range("pod", {"type": "Pod", "max": {"memory": "2Gi"}})),
        (
            ranges,
            _limit_range(
                "claims",
                {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "5Gi"}},
            ),
        ),
        # Defaults on every container without its own, and the annotation that says so.
        (pods, _pod("defaulted", _container("a"), _container("b", limits={"cpu": "800m"}))),
        (pods, _pod("over-max", _container("c", limits={"cpu": "2"}))),
        (pods, _pod("under-min", _container("c", requests={"cpu": "50m"}))),
        (pods, _pod("ratio", _container("c", requests={"cpu": "100m"}, limits={"cpu": "1"}))),
        (pods, _pod("generated-", _container("c", limits={"cpu": "2"}), generate=True)),
        (
            pods,
            _pod(
                "pod-max",
                # Each container within the Container max, so only the Pod range refuses: which of
                # two failing ranges kube-apiserver names depends on its informer's map order.
                *(_container(name, limits={"memory": "1Gi"}) for name in "abc"),
            ),
        ),
        (claims, _claim("small", "500Mi")),
        (claims, _claim("large", "10Gi")),
        (claims, _claim("fits", "2Gi")),
    ]
    found = _answered_alike(pair, cases)
    assert found == [], "\n".join(found)


# -- errors -----------------------------------------------------------------------------------


def test_error_bodies_are_the_same_bytes(pair: Pair, ns: str) -> None:
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    pair.both("POST", cms, cm)
    bad_deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}}, "template": TEMPLATE},
    }
    bad_apiservice = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"v2.{ns}.example.com"},
        "spec": {
            "group": f"{ns}.example.com",
            "version": "v1",
            "groupPriorityMinimum": 1,
            "versionPriority": 0,
        },
    }
    cases: list[tuple[str, str, Any]] = [
        ("GET", f"{cms}/nope", None),  # NotFound
        ("POST", cms, cm),  # AlreadyExists
        ("PUT", f"{cms}/c", {**cm, "metadata": {"name": "c", "resourceVersion": "1"}}),  # Conflict
        ("POST", cms, {**cm, "metadata": {"name": "Bad_"}}),  # Invalid
        ("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", bad_deployment),  # Invalid, two causes
        ("POST", "/apis/apiregistration.k8s.io/v1/apiservices", bad_apiservice),  # Invalid, by the spec
        ("PUT", "/api/v1/namespaces", {}),  # MethodNotAllowed
        ("GET", "/api/v1/nopes", None),  # no such resource
        ("GET", "/apis/apps/v9/deployments", None),  # no such version of a group
        ("GET", "/apis/nope.io/v1/things", None),  # no such group: Go's text 404
    ]
    for method, path, body in cases:
        up, kcm = pair.both(method, path, body)
        assert (kcm.status_code, kcm.headers["Content-Type"]) == (up.status_code, up.headers["Content-Type"])
        assert kcm.content == up.content, f"{method} {path}"


@pytest.mark.parametrize(
    "body",
    [
        b"{bad",
        b'{"metadata": {"name": "c"},}',
        b'{"metadata": {"name": "c"} "data": {}}',
        b'{"data": {"k": tru}}',
        b'{"data": {"k": "a\nb"}}',
        b'{"data": {"k": 1.}}',
        b"[1 2]",
        b'{"metadata": {"name": "a-long-name-to-pass-thirty-bytes"}',
    ],
)
def test_malformed_json_is_the_same_bad_request(pair: Pair, ns: str, body: bytes) -> None:
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    for method, path in (("POST", cms), ("PUT", f"{cms}/c")):
        up, kcm = pair.both(method, path, body)
        assert (up.status_code, kcm.content) == (400, up.content), method


# -- watch ------------------------------------------------------------------------------------


def watch_lines(server: Server, path: str, count: int) -> list[dict[str, Any]]:
    """The first `count` events of a watch (the server ends it after 30 s at most)."""
    sep = "&" if "?" in path else "?"
    resp = server.request("GET", f"{path}{sep}watch=true&timeoutSeconds=30", stream=True)
    assert resp.status_code == 200, resp.text
    events: list[dict[str, Any]] = []
    with resp:
        raw = resp.raw
        while len(events) < count:
            line = raw.readline()
            assert line.endswith(b"\n"), f"{server.name}: the stream ended after {events}"
            events.append(json.loads(line))
    return events


def test_watch_events_are_framed_alike(pair: Pair, ns: str) -> None:
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    for r in pair.both("POST", cms, {"metadata": {"name": "w"}}):
        assert r.status_code == 201
    got = [watch_lines(s, f"{cms}?resourceVersion=0", 1) for s in (pair.up, pair.kcm)]
    assert differences(masked(got[0]), masked(got[1])) == []
    assert got[0][0]["type"] == "ADDED"


def test_a_bookmark_ends_the_initial_events_alike(pair: Pair, ns: str) -> None:
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    pair.both("POST", cms, {"metadata": {"name": "b"}})
    query = "?sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    got = [watch_lines(s, cms + query, 2) for s in (pair.up, pair.kcm)]
    assert [e["type"] for e in got[0]] == ["ADDED", "BOOKMARK"]
    assert differences(masked(got[0]), masked(got[1])) == []


# -- discovery and OpenAPI --------------------------------------------------------------------


def resource_lists(server: Server) -> dict[str, dict[str, dict[str, Any]]]:
    """group/version -> resource name -> its discovery entry, for every served group-version."""
    versions = ["v1"] + [
        v["groupVersion"] for g in server.request("GET", "/apis").json()["groups"] for v in g["versions"]
    ]
    out = {}
    for gv in versions:
        doc = server.request("GET", f"/api/{gv}" if gv == "v1" else f"/apis/{gv}").json()
        out[gv] = {r["name"]: r for r in doc["resources"]}
    return out


# What discovery compares of a resource both servers serve.
DISCOVERED = ("kind", "namespaced", "verbs", "shortNames", "categories", "singularName", "group", "version")


def test_discovery_of_the_resources_both_serve(pair: Pair) -> None:
    up, kcm = resource_lists(pair.up), resource_lists(pair.kcm)
    shared = 0
    diffs: list[str] = []
    for gv in sorted(set(up) & set(kcm)):
        for name in sorted(set(up[gv]) & set(kcm[gv])):
            shared += 1
            a, b = (
                {k: sorted(r[k]) if k == "verbs" else r.get(k) for k in DISCOVERED}
                for r in (up[gv][name], kcm[gv][name])
            )
            diffs += differences(a, b, f"{gv}/{name}")
    assert shared > 60
    assert not diffs, "\n".join(diffs)


def kinds_of(definitions: dict[str, Any]) -> set[str]:
    """The built-in kinds among OpenAPI definitions. Kept: the other definitions here follow the
    pinned Python client, whose API is newer than v1.32 (it has types kube-apiserver lacks)."""
    return {
        n
        for n, d in definitions.items()
        if n.startswith("io.k8s.api.") and d.get("x-kubernetes-group-version-kind")
    }


def test_openapi_describes_the_shared_kinds(pair: Pair) -> None:
    v2 = [s.request("GET", "/openapi/v2").json()["definitions"] for s in (pair.up, pair.kcm)]
    kinds = kinds_of(v2[1])
    assert len(kinds) > 40
    assert kinds <= set(v2[0]), sorted(kinds - set(v2[0]))
    v3 = [set(s.request("GET", "/openapi/v3").json()["paths"]) for s in (pair.up, pair.kcm)]
    # Kept: metrics.k8s.io is served in-process here, by an aggregated metrics-server there.
    assert v3[1] - v3[0] == {"apis/metrics.k8s.io/v1beta1"}
    for name in (
        "api/v1",
        "apis/apps/v1",
        "apis/batch/v1",
        "apis/authentication.k8s.io/v1",
        "apis/authorization.k8s.io/v1",
    ):
        docs = [s.request("GET", f"/openapi/v3/{name}").json() for s in (pair.up, pair.kcm)]
        # Kept: pods/resize is served here (v1.33's in-place resize); v1.32 has no such path.
        extra = (
            set(docs[1]["paths"])
            - set(docs[0]["paths"])
            - {f"/{name}/namespaces/{{namespace}}/pods/{{name}}/resize"}
        )
        assert not extra, sorted(extra)
        schemas = [kinds_of(d["components"]["schemas"]) for d in docs]
        assert schemas[1] <= schemas[0], sorted(schemas[1] - schemas[0])


def test_the_python_client_reads_a_new_daemonset(pair: Pair, ns: str) -> None:
    from kubernetes import client, config

    path, body = OBJECTS["DaemonSet"]
    created = pair.kcm.request(
        "POST", path.format(ns=ns), {"apiVersion": "apps/v1", "kind": "DaemonSet", **body}
    )
    assert created.status_code == 201, created.text
    api = client.AppsV1Api(config.new_client_from_config(config_file=str(pair.embedded.kubeconfig)))
    ds = api.read_namespaced_daemon_set("ds", ns)
    assert (ds.status.current_number_scheduled, ds.status.number_ready) == (0, 0)


def test_the_local_apiservices_are_served_as_kube_apiserver_has_them(pair: Pair) -> None:
    path = "/apis/apiregistration.k8s.io/v1/apiservices"
    up, kcm = (
        {a["metadata"]["name"]: a for a in s.request("GET", path).json()["items"]}
        for s in (pair.up, pair.kcm)
    )
    served = {
        f"{gv.split('/')[-1]}.{gv.split('/')[0] if '/' in gv else ''}" for gv in resource_lists(pair.kcm)
    } - {"v1.apiregistration.k8s.io"}  # kube-apiserver lists none for its aggregator's own group
    # Kept: metrics.k8s.io is served in-process here; there only an aggregated metrics-server has it.
    assert set(kcm) == served
    assert set(kcm) - set(up) == {"v1beta1.metrics.k8s.io"}
    diffs = [
        d
        for name in sorted(set(kcm) & set(up))
        for d in differences(masked(up[name]), masked(kcm[name]), name)
    ]
    assert not diffs, "\n".join(diffs)


def test_a_list_page_is_the_same(pair: Pair, ns: str) -> None:
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    for name in ("a", "b"):
        pair.both("POST", cms, {"metadata": {"name": name}, "data": {"k": "v"}})
    up, kcm = (r.json() for r in pair.both("GET", f"{cms}?limit=1"))
    assert (
        sorted(up["metadata"])
        == sorted(kcm["metadata"])
        == ["continue", "remainingItemCount", "resourceVersion"]
    )
    for listed in (up, kcm):
        listed["metadata"] = MASK
    assert differences(masked(up), masked(kcm)) == []


def test_kubectl_get_apiservices_prints_the_same_table(pair: Pair) -> None:
    table = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    path = "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps"
    up, kcm = (s.request("GET", path, headers=table).json() for s in (pair.up, pair.kcm))
    assert kcm["columnDefinitions"] == up["columnDefinitions"]
    assert (
        [r["cells"][:3] for r in kcm["rows"]]
        == [r["cells"][:3] for r in up["rows"]]
        == [["v1.apps", "Local", "True"]]
    )


# -- authentication and authorization ---------------------------------------------------------


def _grant_pod_reading(pair: Pair, ns: str, who: str) -> None:
    role = {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    }
    binding = {
        "metadata": {"name": "reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": who}],
    }
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    for path, body in ((f"{rbac}/roles", role), (f"{rbac}/rolebindings", binding)):
        for r in pair.both("POST", path, body):
            assert r.status_code == 201, r.text


def test_access_reviews_answer_alike(pair: Pair, ns: str) -> None:
    who = f"{ns}-reader"
    _grant_pod_reading(pair, ns, who)
    authz = "/apis/authorization.k8s.io/v1"
    pods = {"namespace": ns, "verb": "list", "resource": "pods"}
    secrets = {"namespace": ns, "verb": "get", "resource": "secrets", "name": "s"}
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}
    cases: list[tuple[str, Any, dict[str, str]]] = [
        (f"{authz}/subjectaccessreviews", {**sar, "spec": {"user": who, "resourceAttributes": pods}}, {}),
        (f"{authz}/subjectaccessreviews", {**sar, "spec": {"user": who, "resourceAttributes": secrets}}, {}),
        (
            f"{authz}/subjectaccessreviews",
            {
                **sar,
                "spec": {
                    "user": who,
                    "groups": ["system:authenticated"],
                    "nonResourceAttributes": {"path": "/apis/apps", "verb": "get"},
                },
            },
            {},
        ),
        (
            f"{authz}/namespaces/{ns}/localsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "LocalSubjectAccessReview",
                "metadata": {"namespace": ns},
                "spec": {"user": who, "resourceAttributes": pods},
            },
            {},
        ),
        (
            f"{authz}/selfsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": pods},
            },
            {"Impersonate-User": who},
        ),
    ]
    for path, body, headers in cases:
        up, kcm = pair.both("POST", path, body, headers=headers)
        assert (up.status_code, kcm.status_code) == (201, 201), (up.text, kcm.text)
        # Kept: kube-apiserver's create handler gives even an answered review managedFields.
        assert masked(kcm.json()) == masked(up.json()), path
    invalid = {
        **sar,
        "spec": {"resourceAttributes": pods, "nonResourceAttributes": {"path": "/x", "verb": "get"}},
    }
    for body in (invalid, {**sar, "spec": {"user": who}}):
        up, kcm = pair.both("POST", f"{authz}/subjectaccessreviews", body)
        assert (kcm.status_code, kcm.content) == (422, up.content)


def test_self_subject_rules_review_lists_the_same_rules(pair: Pair, ns: str) -> None:
    who = f"{ns}-reader"
    _grant_pod_reading(pair, ns, who)
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": ns},
    }
    answers = pair.both(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        body,
        headers={"Impersonate-User": who},
    )
    assert [r.status_code for r in answers] == [201, 201], [r.text for r in answers]
    up, kcm = (r.json() for r in answers)
    # Bindings are visited in each server's own order: compare the rules as sets.
    for key in ("resourceRules", "nonResourceRules"):
        assert sorted(map(json.dumps, kcm["status"][key])) == sorted(map(json.dumps, up["status"][key])), key
    assert kcm["status"]["incomplete"] == up["status"]["incomplete"]
    assert {k: v for k, v in kcm.items() if k != "status"} == ({k: v for k, v in up.items() if k != "status"})


def test_a_token_review_of_a_token_nobody_issued_is_the_same(pair: Pair) -> None:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "not-a-token"}}
    up, kcm = pair.both("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body)
    assert (up.status_code, kcm.status_code) == (201, 201), (up.text, kcm.text)
    assert masked(kcm.json()) == masked(up.json())
    empty = pair.both("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {**body, "spec": {}})
    assert (empty[1].status_code, empty[1].content) == (400, empty[0].content)


def test_forbidden_bodies_under_rbac_are_the_same_bytes(pair: Pair, ns: str) -> None:
    who = {"Impersonate-User": f"{ns}-nobody"}
    for path in (
        f"/api/v1/namespaces/{ns}/pods/p",
        f"/api/v1/namespaces/{ns}/pods",
        "/api/v1/nodes",
        f"/apis/apps/v1/namespaces/{ns}/deployments/d/scale",
        "/metrics",
    ):
        up, kcm = pair.both("GET", path, headers=who)
        assert (kcm.status_code, kcm.content) == (403, up.content), path


def test_the_seeded_bootstrap_policy_is_kube_apiservers(pair: Pair) -> None:
    """Every ClusterRole and ClusterRoleBinding the embedded server seeds is kube-apiserver's,
    rules and subjects alike (the aggregated admin, edit and view are filled by a controller)."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    for kind in ("clusterroles", "clusterrolebindings"):
        selector = {"labelSelector": "kubernetes.io/bootstrapping=rbac-defaults"}
        ours = pair.kcm.request("GET", f"{rbac}/{kind}", params=selector).json()["items"]
        assert ours
        for obj in ours:
            if obj.get("aggregationRule"):
                continue
            name = obj["metadata"]["name"]
            theirs = pair.up.request("GET", f"{rbac}/{kind}/{name}")
            assert theirs.status_code == 200, name
            for key in ("rules", "roleRef", "subjects"):
                assert obj.get(key) == theirs.json().get(key), f"{kind}/{name} {key}"


# -- what the taint-eviction and ttl controllers need -------------------------------------------

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.mark.parametrize(
    "tolerations",
    [
        None,
        [],
        [{"operator": "Exists"}],  # tolerates every taint: nothing added
        [{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}],  # not NoExecute
        [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}],
        [{"key": NOT_READY, "operator": "Exists"}],  # any effect
        [{"operator": "Exists", "effect": "NoExecute"}],
        [{"key": "example.com/other", "operator": "Equal", "value": "x", "effect": "NoExecute"}],
    ],
    ids=[
        "none",
        "empty",
        "wildcard",
        "not-ready-noschedule",
        "unreachable-10s",
        "not-ready-any",
        "noexecute-any",
        "other",
    ],
)
def test_default_toleration_seconds_admission_alike(
    pair: Pair, ns: str, tolerations: list[Any] | None
) -> None:
    """DefaultTolerationSeconds: the not-ready, then the unreachable NoExecute toleration
    (Exists, 300 s) each added unless one the pod has covers that taint."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tol"}, "spec": spec}
    created = pair.both("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert [r.status_code for r in created] == [201, 201], [r.text for r in created]
    up, kcm = (r.json()["spec"].get("tolerations") for r in created)
    assert up == kcm


def test_a_pod_condition_status_patch_with_element_order_and_uid_alike(pair: Pair, ns: str) -> None:
    """The taint-eviction-controller's DisruptionTarget patch (upstream PatchPodStatus): a
    strategic merge patch of pods/status naming the pod's uid and the conditions' order; another
    uid is refused alike (422: metadata.uid is immutable)."""
    pods = f"/api/v1/namespaces/{ns}/pods"
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "evicted"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
    }
    created = pair.both("POST", pods, body)
    assert [r.status_code for r in created] == [201, 201], [r.text for r in created]
    ready = {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    for server in (pair.up, pair.kcm):
        first = {"status": {"conditions": [ready]}}
        res = server.request(
            "PATCH",
            f"{pods}/evicted/status",
            first,
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        assert res.status_code == 200, res.text
    results = []
    for server, r in zip((pair.up, pair.kcm), created, strict=True):
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
            "lastTransitionTime": "2026-01-01T00:00:01Z",
        }
        patch = {
            "metadata": {"uid": r.json()["metadata"]["uid"]},
            "status": {
                "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "DisruptionTarget"}],
                "conditions": [condition],
            },
        }
        headers = {"Content-Type": "application/strategic-merge-patch+json"}
        results.append(server.request("PATCH", f"{pods}/evicted/status", patch, headers=headers))
        stale = {
            "metadata": {"uid": "00000000-0000-0000-0000-000000000000"},
            "status": {"conditions": [condition]},
        }
        results.append(server.request("PATCH", f"{pods}/evicted/status", stale, headers=headers))
    assert [r.status_code for r in results] == [200, 422, 200, 422], [r.text for r in results]
    up, kcm = (r.json() for r in results[0::2])
    diffs = differences(masked(up["status"]), masked(kcm["status"]))
    assert not unexplained(diffs), "\n".join(unexplained(diffs))
    up_err, kcm_err = (r.json() for r in results[1::2])
    # (kube-apiserver lists the cause twice, from its generic and its pod metadata checks.)
    assert [up_err[k] for k in ("code", "reason", "message")] == [
        kcm_err[k] for k in ("code", "reason", "message")
    ]


def test_node_taints_and_the_ttl_annotation_patch_alike(pair: Pair) -> None:
    """What `kubectl taint` and the ttl-controller send a Node: a NoExecute taint with its
    timeAdded kept as given, its removal, and a strategic merge patch of one annotation."""
    name = f"parity-node-{next(_namespaces)}"
    created = pair.both(
        "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    )
    assert [r.status_code for r in created] == [201, 201], [r.text for r in created]
    headers = {"Content-Type": "application/strategic-merge-patch+json"}
    try:
        taint = {
            "key": "example.com/evict",
            "value": "x",
            "effect": "NoExecute",
            "timeAdded": "2026-01-01T00:00:00Z",
        }
        for patch in (
            {"spec": {"taints": [taint]}},
            {"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": "0"}}},
            {"spec": {"taints": None}},
        ):
            answers = pair.both("PATCH", f"/api/v1/nodes/{name}", patch, headers=headers)
            assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
            up, kcm = (r.json() for r in answers)
            diffs = differences(masked(up["spec"]), masked(kcm["spec"]))
            diffs += differences(up["metadata"].get("annotations"), kcm["metadata"].get("annotations"))
            assert not unexplained(diffs), (patch, "\n".join(unexplained(diffs)))
    finally:
        pair.both("DELETE", f"/api/v1/nodes/{name}")


# -- CertificateSigningRequest strategies and validation ------------------------------------------

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def csr_body(name: str, **spec: Any) -> dict[str, Any]:
    base = {"request": CSR, "signerName": "example.com/signer", "usages": ["client auth"]}
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {**base, **spec},
    }


def same_answer(pair: Pair, method: str, path: str, body: Any, **kw: Any) -> list[Any]:
    """Both answers alike: the same code and, masked, the same body; returns both bodies."""
    up, kcm = pair.both(method, path, body, **kw)
    assert kcm.status_code == up.status_code, f"{method} {path}: {up.text} / {kcm.text}"
    diffs = unexplained(differences(masked(up.json()), masked(kcm.json())))
    assert not diffs, f"{method} {path}\n" + "\n".join(diffs)
    return [up.json(), kcm.json()]


def _not_pem() -> str:
    return base64.b64encode(b"not a PEM block").decode()


@pytest.mark.parametrize(
    "spec",
    [
        {"expirationSeconds": 599},
        {"request": _not_pem()},
        {"usages": []},
        {"usages": ["client auth", "bogus"]},
        {"usages": ["client auth", "client auth"]},
        {"signerName": "kubernetes.io/legacy-unknown"},
        {"signerName": "nodomain"},
        {"signerName": ""},
    ],
)
def test_csr_create_is_validated_alike(pair: Pair, spec: dict[str, Any]) -> None:
    name = f"bad-{next(_namespaces)}"
    (up, _) = same_answer(pair, "POST", CSRS, csr_body(name, **spec))
    assert up["code"] == 422


def test_csr_requester_is_the_authenticated_user(pair: Pair) -> None:
    name = f"spoof-{next(_namespaces)}"
    spoofed = csr_body(name, username="mallory", groups=["system:nodes"], uid="x", extra={"a": ["b"]})
    (up, _) = same_answer(pair, "POST", CSRS, spoofed)
    assert up["spec"]["username"] != "mallory"


APPROVED = {"type": "Approved", "status": "True", "reason": "R", "message": "m"}
DENIED = {"type": "Denied", "status": "True", "reason": "R", "message": "m"}


def test_csr_approval_and_status_subresources_follow_kube_apiservers_strategies(pair: Pair) -> None:
    name = f"sub-{next(_namespaces)}"
    path = f"{CSRS}/{name}"
    same_answer(pair, "POST", CSRS, csr_body(name))
    merge = {"headers": {"Content-Type": "application/merge-patch+json"}}
    # The main resource changes neither spec nor status.
    same_answer(pair, "PATCH", path, {"spec": {"usages": ["server auth"]}}, **merge)
    same_answer(pair, "PATCH", path, {"status": {"conditions": [APPROVED]}}, **merge)
    # Approved and Denied are exclusive; approval stamps the condition's times.
    same_answer(pair, "PATCH", f"{path}/approval", {"status": {"conditions": [APPROVED, DENIED]}}, **merge)
    answers = same_answer(pair, "PATCH", f"{path}/approval", {"status": {"conditions": [APPROVED]}}, **merge)
    for answer in answers:
        assert {"lastUpdateTime", "lastTransitionTime"} <= set(answer["status"]["conditions"][0])
    # A condition cannot be removed; status may not add Approved/Denied, a Failed must be True,
    # a certificate must be PEM CERTIFICATE blocks and cannot change once set.
    same_answer(pair, "PATCH", f"{path}/approval", {"status": {"conditions": []}}, **merge)
    same_answer(pair, "PATCH", f"{path}/status", {"status": {"conditions": [APPROVED, DENIED]}}, **merge)
    failed_false = {"type": "Failed", "status": "False", "reason": "R", "message": "m"}
    same_answer(
        pair, "PATCH", f"{path}/status", {"status": {"conditions": [APPROVED, failed_false]}}, **merge
    )
    same_answer(pair, "PATCH", f"{path}/status", {"status": {"certificate": _not_pem()}}, **merge)
    first, second = (base64.b64encode(_cert_pem(cn)).decode() for cn in ("one", "two"))
    same_answer(pair, "PATCH", f"{path}/status", {"status": {"certificate": first}}, **merge)
    same_answer(pair, "PATCH", f"{path}/status", {"status": {"certificate": second}}, **merge)
    same_answer(pair, "GET", path, None)


def _cert_pem(common_name: str) -> bytes:

    return csrs.cert_pem(
        csrs.ca(), common_name, __import__("datetime").datetime.now(__import__("datetime").UTC)
    )


# -- VolumeAttachment and CSINode -------------------------------------------------------------

ATTACHMENTS = "/apis/storage.k8s.io/v1/volumeattachments"
CSINODES = "/apis/storage.k8s.io/v1/csinodes"
MERGE = {"headers": {"Content-Type": "application/merge-patch+json"}}


def _attachment(name: str, **spec: Any) -> dict[str, Any]:
    body = {"attacher": "csi.example.com", "nodeName": "node-a", "source": {"persistentVolumeName": "pv-a"}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {**body, **spec},
        "status": {"attached": True},
    }


def _same_causes(pair: Pair, method: str, path: str, body: Any, **kw: Any) -> list[tuple[str, str]]:
    """Both refuse alike, cause by cause (reason and field): where upstream prints a Go struct
    as the value (with pointer addresses), the messages cannot be the same bytes."""
    up, kcm = pair.both(method, path, body, **kw)
    assert (up.status_code, kcm.status_code) == (422, 422), f"{up.text} / {kcm.text}"

    def causes(r: requests.Response) -> list[tuple[str, str]]:
        return [(c["reason"], c["field"]) for c in r.json()["details"]["causes"]]

    assert causes(up) == causes(kcm)
    return causes(up)


@pytest.mark.parametrize(
    "spec",
    [
        {"attacher": "", "nodeName": "", "source": {}},
        {"attacher": "Not_A_Driver", "source": {"persistentVolumeName": "Bad_PV"}},
        {"attacher": "a" * 64},
        {
            "source": {
                "persistentVolumeName": "pv",
                "inlineVolumeSpec": {"csi": {"driver": "d", "volumeHandle": "h"}},
            }
        },
        {"source": {"persistentVolumeName": ""}},
    ],
)
def test_volume_attachment_create_is_validated_alike(pair: Pair, spec: dict[str, Any]) -> None:
    (up, _) = same_answer(pair, "POST", ATTACHMENTS, _attachment(f"va-bad-{next(_namespaces)}", **spec))
    assert up["code"] == 422


def test_volume_attachment_spec_is_fixed_and_status_goes_through_its_subresource(pair: Pair) -> None:
    name = f"va-{next(_namespaces)}"
    path = f"{ATTACHMENTS}/{name}"
    try:
        # A create's status is dropped; the main resource does not change it either.
        (created, _) = same_answer(pair, "POST", ATTACHMENTS, _attachment(name))
        assert created["status"] == {"attached": False}
        same_answer(pair, "PATCH", path, {"status": {"attached": True}}, **MERGE)
        assert _same_causes(pair, "PATCH", path, {"spec": {"nodeName": "node-b"}}, **MERGE) == [
            ("FieldValueInvalid", "spec")
        ]
        (attached, _) = same_answer(pair, "PATCH", f"{path}/status", {"status": {"attached": True}}, **MERGE)
        assert attached["status"]["attached"] is True
        # /status keeps the spec.
        same_answer(pair, "PATCH", f"{path}/status", {"spec": {"nodeName": "node-b"}}, **MERGE)
        too_long = {"status": {"attachError": {"message": "x" * 1025, "time": "2026-01-01T00:00:00Z"}}}
        same_answer(pair, "PATCH", f"{path}/status", too_long, **MERGE)
        same_answer(pair, "GET", path, None)
    finally:
        pair.both("DELETE", path)


def _csinode(name: str, *drivers: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": list(drivers)},
    }


def test_csinode_create_is_validated_alike(pair: Pair) -> None:
    bad = _csinode(
        f"csinode-bad-{next(_namespaces)}",
        {"name": "csi.example.com", "nodeID": "", "topologyKeys": ["zone", "zone", "", "bad key"]},
        {"name": "csi.example.com", "nodeID": "n" * 257, "allocatable": {"count": -1}},
        {"name": "Bad_Driver", "nodeID": "n"},
    )
    (up, _) = same_answer(pair, "POST", CSINODES, bad)
    assert up["code"] == 422


def test_csinode_driver_entries_are_fixed_once_listed(pair: Pair) -> None:
    name = f"csinode-{next(_namespaces)}"
    path = f"{CSINODES}/{name}"
    driver = {"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["topology.example.com/zone"]}
    try:
        same_answer(pair, "POST", CSINODES, _csinode(name, driver))
        strategic = {"headers": {"Content-Type": "application/strategic-merge-patch+json"}}
        changed = {"spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n2"}]}}
        assert _same_causes(pair, "PATCH", path, changed, **strategic) == [
            ("FieldValueInvalid", "CSINodeDriver")
        ]
        # Another driver may join, and one may leave.
        joined = {"spec": {"drivers": [{"name": "other.example.com", "nodeID": "n1"}]}}
        same_answer(pair, "PATCH", path, joined, **strategic)
        left = {"spec": {"drivers": [{"$patch": "delete", "name": "other.example.com"}]}}
        same_answer(pair, "PATCH", path, left, **strategic)
        same_answer(pair, "GET", path, None)
    finally:
        pair.both("DELETE", path)
