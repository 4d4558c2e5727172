"""The resource types the embedded API server serves, and how to find them by URL or kind.

Built-in types are a table here; CustomResourceDefinitions add and remove entries at run
time (`Registry.add`). Discovery, OpenAPI, routing and storage all read this one registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    resource: str  # plural, lower case: "pods"
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    # Python client model name (e.g. "V1Pod") used to build OpenAPI schemas; None for CRs.
    model: str | None = None
    # Several versions of one resource share storage: this names the stored version.
    storage_version: str = ""
    # Kinds whose spec changes bump metadata.generation (upstream: types with a spec/status split).
    has_status: bool = False
    # Read-only views computed from other stored objects at request time (metrics.k8s.io).
    derived: bool = False

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> str:
        """Objects of every served version of a resource live under this one key."""
        return f"{self.group}/{self.resource}"

    @property
    def stored_version(self) -> str:
        return self.storage_version or self.version

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()


def _r(
    group: str,
    version: str,
    resource: str,
    kind: str,
    namespaced: bool = True,
    *,
    short: tuple[str, ...] = (),
    cats: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    model: str | None = None,
    verbs: tuple[str, ...] = ALL_VERBS,
    storage: str = "",
) -> ResourceType:
    prefix = "V1" if version == "v1" else version.capitalize()
    return ResourceType(
        group=group,
        version=version,
        resource=resource,
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        categories=cats,
        verbs=verbs,
        subresources=sub,
        model=model or f"{prefix}{kind}",
        storage_version=storage,
        has_status="status" in sub,
    )


_ALL = ("all",)
_NO_COLLECTION = tuple(v for v in ALL_VERBS if v != "deletecollection")
_CREATE = ("create",)

BUILTIN: tuple[ResourceType, ...] = (
    # core/v1
    _r(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        short=("ns",),
        sub=("status", "finalize"),
        verbs=_NO_COLLECTION,
    ),
    _r(
        "",
        "v1",
        "pods",
        "Pod",
        short=("po",),
        cats=_ALL,
        sub=(
            "status",
            "binding",
            "eviction",
            "log",
            "exec",
            "attach",
            "portforward",
            "ephemeralcontainers",
            "resize",
        ),
    ),
    _r("", "v1", "services", "Service", short=("svc",), cats=_ALL, sub=("status", "proxy")),
    _r("", "v1", "endpoints", "Endpoints", short=("ep",)),
    _r("", "v1", "nodes", "Node", False, short=("no",), sub=("status", "proxy")),
    _r("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _r("", "v1", "secrets", "Secret"),
    _r("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",), sub=("token",)),
    _r("", "v1", "events", "Event", short=("ev",), model="CoreV1Event"),
    _r("", "v1", "persistentvolumes", "PersistentVolume", False, short=("pv",), sub=("status",)),
    _r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), sub=("status",)),
    _r("", "v1", "resourcequotas", "ResourceQuota", short=("quota",), sub=("status",)),
    _r("", "v1", "limitranges", "LimitRange", short=("limits",)),
    _r(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        short=("rc",),
        cats=_ALL,
        sub=("status", "scale"),
    ),
    _r("", "v1", "podtemplates", "PodTemplate"),
    # apps/v1
    _r("apps", "v1", "deployments", "Deployment", short=("deploy",), cats=_ALL, sub=("status", "scale")),
    _r("apps", "v1", "replicasets", "ReplicaSet", short=("rs",), cats=_ALL, sub=("status", "scale")),
    _r("apps", "v1", "statefulsets", "StatefulSet", short=("sts",), cats=_ALL, sub=("status", "scale")),
    _r("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), cats=_ALL, sub=("status",)),
    _r("apps", "v1", "controllerrevisions", "ControllerRevision"),
    # batch/v1
    _r("batch", "v1", "jobs", "Job", cats=_ALL, sub=("status",)),
    _r("batch", "v1", "cronjobs", "CronJob", short=("cj",), cats=_ALL, sub=("status",)),
    # coordination.k8s.io/v1
    _r("coordination.k8s.io", "v1", "leases", "Lease"),
    # authentication.k8s.io/v1 and authorization.k8s.io/v1: reviews, answered, never stored (reviews)
    _r("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False, verbs=_CREATE),
    _r("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=_CREATE),
    _r("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", verbs=_CREATE),
    _r(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=_CREATE,
    ),
    _r(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        False,
        verbs=_CREATE,
    ),
    _r("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=_CREATE),
    # discovery.k8s.io/v1
    _r("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    # networking.k8s.io/v1
    _r("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short=("netpol",)),
    # policy/v1
    _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",), sub=("status",)),
    # autoscaling: v2 is stored, v1 is converted on the way in and out
    _r(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short=("hpa",),
        cats=_ALL,
        sub=("status",),
    ),
    _r(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short=("hpa",),
        cats=_ALL,
        sub=("status",),
        storage="v2",
    ),
    # certificates.k8s.io/v1
    _r(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        False,
        short=("csr",),
        sub=("status", "approval"),
    ),
    # admissionregistration.k8s.io/v1: stored and served, not enforced
    _r(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
        cats=("api-extensions",),
        sub=("status",),
    ),
    _r(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        False,
        cats=("api-extensions",),
    ),
    # rbac.authorization.k8s.io/v1
    _r("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    # storage.k8s.io/v1
    _r("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short=("sc",)),
    _r("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, sub=("status",)),
    _r("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    _r("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    # events.k8s.io/v1 shares storage with core/v1 events
    _r("events.k8s.io", "v1", "events", "Event", short=("ev",), model="EventsV1Event"),
    # apiextensions.k8s.io/v1
    _r(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short=("crd", "crds"),
        cats=("api-extensions",),
        sub=("status",),
    ),
    # apiregistration.k8s.io/v1: the local APIServices of the group-versions served here
    # (localapiservices); nothing is aggregated, so an APIService is only ever a record
    _r(
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "APIService",
        False,
        cats=("api-extensions",),
        sub=("status",),
    ),
    # metrics.k8s.io/v1beta1: computed by metrics_api from pods and nodes, never stored
    ResourceType(
        "metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True, verbs=("get", "list"), derived=True
    ),
    ResourceType(
        "metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, verbs=("get", "list"), derived=True
    ),
)

# events.k8s.io/v1 Events are core/v1 Events seen through a field mapping (see conversion).
SHARED_STORAGE = {("events.k8s.io", "events"): "/events"}


def storage_key_of(rt: ResourceType) -> str:
    return SHARED_STORAGE.get((rt.group, rt.resource), rt.storage_key)


@dataclass
class Registry:
    """Every served resource type; CRDs add and remove entries while the server runs."""

    types: list[ResourceType] = field(default_factory=lambda: list(BUILTIN))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self.types)

    def lookup(self, group: str, version: str, resource: str) -> ResourceType | None:
        for rt in self.types:
            if rt.group == group and rt.version == version and rt.resource == resource:
                return rt
        return None

    def by_kind(self, group: str, version: str, kind: str) -> ResourceType | None:
        for rt in self.types:
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def versions_of(self, group: str, resource: str) -> list[ResourceType]:
        return [rt for rt in self.types if rt.group == group and rt.resource == resource]

    def groups(self) -> dict[str, list[str]]:
        """Group name -> served versions, preferred first, in registration order."""
        out: dict[str, list[str]] = {}
        for rt in self.types:
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        for group, versions in out.items():
            out[group] = sorted(versions, key=_version_priority)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.types if rt.group == group and rt.version == version]

    def add(self, types: Iterable[ResourceType]) -> None:
        for rt in types:
            self.remove(rt.group, rt.resource, rt.version)
            self.types.append(rt)

    def remove(self, group: str, resource: str, version: str | None = None) -> None:
        self.types = [
            rt
            for rt in self.types
            if not (rt.group == group and rt.resource == resource and version in (None, rt.version))
        ]


def _version_priority(version: str) -> tuple[int, int, int]:
    """Upstream's version ordering: GA before beta before alpha, higher numbers first."""
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor)
