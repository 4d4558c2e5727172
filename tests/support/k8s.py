"""The Kubernetes manifests under k8s/ as a cluster would read them: rendered overlays, the
kubelet's view of a container (env, `$(VAR)` args, the `kcm` command line) and upstream's RBAC
request attributes and rule matching. For tests/unit/deploy/test_k8s.py, and for
tests/e2e/test_deploy_manifests.py, which checks recorded API calls with `request_attributes`
and `allowed`."""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml
from kcm_cli import main

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
OVERLAYS = ("dev", "production")
NAMESPACE = "kcm-system"
# Kinds whose schema is not Kubernetes' own (CRDs of other projects): rendered, not schema-checked.
CRD_KINDS = {"ServiceMonitor"}
KUBERNETES_VERSION = "1.32.0"

Obj = dict[str, Any]


@functools.cache
def render(path: str) -> tuple[Obj, ...]:
    """`kubectl kustomize` of a directory under k8s/ (an overlay or a component)."""
    out = subprocess.run(
        ["kubectl", "kustomize", str(K8S / path)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def of_kind(objs: tuple[Obj, ...], *kinds: str) -> list[Obj]:
    return [o for o in objs if o["kind"] in kinds]


def workloads(objs: tuple[Obj, ...]) -> list[Obj]:
    return of_kind(objs, "Deployment", "StatefulSet")


def pod_spec(workload: Obj) -> Obj:
    spec: Obj = workload["spec"]["template"]["spec"]
    return spec


def kcm_workloads(objs: tuple[Obj, ...]) -> list[Obj]:
    """Workloads running the `kcm` image (NATS runs the `kcm-nats` image)."""
    return [w for w in workloads(objs) if image_repo(pod_spec(w)["containers"][0]["image"]).endswith("/kcm")]


def image_repo(image: str) -> str:
    """`ghcr.io/x/kcm:1` -> `ghcr.io/x/kcm`; a bare `kcm:dev` -> `/kcm` so suffix checks work."""
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return repo if "/" in repo else "/" + repo


def expand(arg: str, env: dict[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion of container args."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), arg)


def container_env(container: Obj, pod_name: str) -> dict[str, str]:
    """Env of a container as the kubelet would set it, field references resolved for one pod."""
    fields = {"metadata.name": pod_name, "metadata.namespace": NAMESPACE}
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        elif ref := item.get("valueFrom", {}).get("fieldRef"):
            env[item["name"]] = fields[ref["fieldPath"]]
    return env


def parsed_args(container: Obj) -> Any:
    """The container's command line as `kcm` reads it (SystemExit or pflag.FlagError if it would not start)."""
    args = [expand(a, container_env(container, "pod-0")) for a in container["args"]]
    return main.parse(args)[0]


def ops_port(container: Obj) -> int:
    """The port of /healthz and /metrics: a controller's secure port, else the ops port."""
    args = parsed_args(container)
    port: int = args.ops_port if args.ops_port is not None else args.secure_port
    return port


# --- RBAC: upstream's request attributes and rule matching ----------------------------------


@dataclass(frozen=True)
class Attributes:
    """What RBAC authorizes a request on (upstream's RequestInfo)."""

    verb: str
    path: str
    resource_request: bool
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        if not self.resource_request:
            return f"{self.verb} {self.path}"
        res = self.resource + (f"/{self.subresource}" if self.subresource else "")
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.group or 'core'}/{res} {self.name}{where}".replace("  ", " ")


def request_attributes(method: str, url: str) -> Attributes:
    """Upstream RequestInfoFactory: path and method to verb, group, resource, namespace, name."""
    split = urlsplit(url)
    query = parse_qs(split.query)
    parts = [p for p in split.path.split("/") if p]
    method = method.upper()
    if not parts or parts[0] not in ("api", "apis") or len(parts) < (3 if parts[0] == "api" else 4):
        return Attributes(method.lower(), split.path, False)
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
    if method == "GET":
        watch = query.get("watch", [""])[0] in ("true", "1")
        verb = "get" if name else ("watch" if watch else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
        if method == "DELETE":
            verb = "delete" if name else "deletecollection"
    return Attributes(verb, split.path, True, group, resource, sub, namespace, name)


def rule_allows(rule: Obj, a: Attributes) -> bool:
    verbs = rule.get("verbs", [])
    if a.verb not in verbs and "*" not in verbs:
        return False
    if not a.resource_request:
        return any(
            u == a.path or (u.endswith("*") and a.path.startswith(u[:-1]))
            for u in rule.get("nonResourceURLs", [])
        )
    if "nonResourceURLs" in rule:
        return False
    groups = rule.get("apiGroups", [])
    if a.group not in groups and "*" not in groups:
        return False
    combined = a.resource + (f"/{a.subresource}" if a.subresource else "")
    resources = rule.get("resources", [])
    if not (
        "*" in resources or combined in resources or (a.subresource and f"*/{a.subresource}" in resources)
    ):
        return False
    names = rule.get("resourceNames", [])
    return not names or a.name in names


# The bootstrap ClusterRoles of kube-apiserver (plugin/pkg/auth/authorizer/rbac/bootstrappolicy)
# k8s/ binds without defining them.
BOOTSTRAP_ROLES: dict[tuple[str, str, str | None], Obj] = {
    ("ClusterRole", "system:auth-delegator", None): {
        "rules": [
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["subjectaccessreviews"],
                "verbs": ["create"],
            },
        ]
    }
}


def grants(objs: tuple[Obj, ...], service_account: str) -> Iterator[tuple[Obj, str | None]]:
    """(rule, namespace it applies in or None for everywhere) for every binding of the account."""
    roles = {
        **BOOTSTRAP_ROLES,
        **{
            (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")): o
            for o in of_kind(objs, "Role", "ClusterRole")
        },
    }
    for binding in of_kind(objs, "RoleBinding", "ClusterRoleBinding"):
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == service_account and s["namespace"] == NAMESPACE
            for s in binding["subjects"]
        ):
            continue
        scope = binding["metadata"].get("namespace")  # a RoleBinding grants in its namespace only
        ref = binding["roleRef"]
        role = roles[(ref["kind"], ref["name"], scope if ref["kind"] == "Role" else None)]
        for rule in role["rules"]:
            yield rule, scope


def allowed(objs: tuple[Obj, ...], service_account: str, a: Attributes) -> bool:
    return any(
        rule_allows(rule, a) and (scope is None or scope == a.namespace)
        for rule, scope in grants(objs, service_account)
    )
