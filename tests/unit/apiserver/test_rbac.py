"""The RBAC authorizer, request attributes, impersonation and escalation checks of the embedded
API server, against upstream's rules (plugin/pkg/auth/authorizer/rbac/rbac_test.go,
pkg/registry/rbac/validation/rule_test.go, endpoints/request/requestinfo_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kcm_apiserver import authz, errors, escalation, rbac
from kcm_apiserver.authn import User
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.rbac import Attributes
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store
from multidict import CIMultiDict, CIMultiDictProxy

G = "rbac.authorization.k8s.io"


class Cluster:
    def __init__(self) -> None:
        self.api = Api(Store(), Registry())
        self.authorizer = authz.Authorizer(("RBAC",), rbac.Evaluator(self.api.store))
        ns_rt = self.api.registry.lookup("", "v1", "namespaces")
        assert ns_rt is not None
        self.api.create(Ctx(ns_rt), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})

    def put(self, resource: str, obj: dict[str, Any], namespace: str = "") -> None:
        rt = self.api.registry.lookup(G, "v1", resource)
        assert rt is not None
        self.api.create(Ctx(rt, namespace), {"apiVersion": f"{G}/v1", "kind": rt.kind, **obj})

    def role(self, name: str, rules: list[dict[str, Any]], namespace: str = "") -> None:
        meta = {"name": name, "namespace": namespace} if namespace else {"name": name}
        self.put("roles" if namespace else "clusterroles", {"metadata": meta, "rules": rules}, namespace)

    def bind(
        self, name: str, role: str, subjects: list[dict[str, Any]], namespace: str = "", kind: str = ""
    ) -> None:
        ref = {"apiGroup": G, "kind": kind or ("Role" if namespace else "ClusterRole"), "name": role}
        meta = {"name": name, "namespace": namespace} if namespace else {"name": name}
        body = {"metadata": meta, "roleRef": ref, "subjects": subjects}
        self.put("rolebindings" if namespace else "clusterrolebindings", body, namespace)

    def allowed(self, user: str, verb: str, resource: str = "", **kw: Any) -> tuple[bool, str]:
        groups = kw.pop("groups", ("system:authenticated",))
        allowed, _, reason = self.authorizer.authorize(
            Attributes(user, groups, verb, True, resource=resource, **kw)
        )
        return allowed, reason


def user(name: str) -> dict[str, str]:
    return {"apiGroup": G, "kind": "User", "name": name}


@pytest.fixture()
def cluster() -> Cluster:
    return Cluster()


def test_resource_rules_match_as_upstreams(cluster: Cluster) -> None:
    cluster.role(
        "r",
        [
            {"apiGroups": ["apps"], "resources": ["deployments", "*/scale"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["update"]},
            {"nonResourceURLs": ["/logs/*", "/exact"], "verbs": ["get"]},
        ],
    )
    cluster.bind("b", "r", [user("u")])
    assert cluster.allowed("u", "get", "deployments", api_group="apps")[0]
    assert not cluster.allowed("u", "get", "deployments", api_group="")[0]
    assert not cluster.allowed("u", "list", "deployments", api_group="apps")[0]
    assert cluster.allowed("u", "get", "replicasets", api_group="apps", subresource="scale")[0]
    assert not cluster.allowed("u", "get", "replicasets", api_group="apps")[0]
    assert cluster.allowed("u", "create", "pods", subresource="log", namespace="x")[0]
    assert not cluster.allowed("u", "get", "pods", namespace="x")[0]
    assert cluster.allowed("u", "update", "configmaps", name="one")[0]
    assert not cluster.allowed("u", "update", "configmaps", name="two")[0]
    assert not cluster.allowed("u", "update", "configmaps")[0]

    def path(p: str) -> bool:
        return cluster.authorizer.authorize(Attributes("u", (), "get", False, path=p))[0]

    assert path("/logs/a/b") and path("/exact") and not path("/exact/more") and not path("/log")


def test_subjects_users_groups_and_service_accounts(cluster: Cluster) -> None:
    cluster.role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], "ns")
    cluster.bind("by-group", "r", [{"apiGroup": G, "kind": "Group", "name": "devs"}], "ns")
    cluster.bind("by-sa", "r", [{"kind": "ServiceAccount", "name": "bot"}], "ns")
    cluster.bind("by-other-sa", "r", [{"kind": "ServiceAccount", "name": "bot", "namespace": "other"}], "ns")
    cluster.bind(
        "all-sas", "r", [{"apiGroup": G, "kind": "Group", "name": "system:serviceaccounts:ops"}], "ns"
    )
    assert cluster.allowed("x", "get", "pods", namespace="ns", groups=("devs",)) == (
        True,
        'RBAC: allowed by RoleBinding "by-group/ns" of Role "r" to Group "devs"',
    )
    assert not cluster.allowed("x", "get", "pods", namespace="elsewhere", groups=("devs",))[0]
    assert cluster.allowed("system:serviceaccount:ns:bot", "get", "pods", namespace="ns") == (
        True,
        'RBAC: allowed by RoleBinding "by-sa/ns" of Role "r" to ServiceAccount "bot/ns"',
    )
    assert cluster.allowed("system:serviceaccount:other:bot", "get", "pods", namespace="ns")[1] == (
        'RBAC: allowed by RoleBinding "by-other-sa/ns" of Role "r" to ServiceAccount "bot/other"'
    )
    assert cluster.allowed("y", "get", "pods", namespace="ns", groups=("system:serviceaccounts:ops",))[0]
    assert not cluster.allowed("bot", "get", "pods", namespace="ns")[0]


def test_cluster_bindings_come_first_and_name_their_reason(cluster: Cluster) -> None:
    cluster.role("cr", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}])
    cluster.bind("crb", "cr", [user("z")])
    cluster.bind("rb", "cr", [user("z")], "ns", kind="ClusterRole")
    assert cluster.allowed("z", "list", "pods", namespace="ns") == (
        True,
        'RBAC: allowed by ClusterRoleBinding "crb" of ClusterRole "cr" to User "z"',
    )


def test_a_binding_to_a_missing_role_is_the_reason_of_a_denial(cluster: Cluster) -> None:
    cluster.bind("gone", "nope", [user("u")])
    cluster.bind("gone-too", "nope", [user("u")], "ns")
    assert cluster.allowed("u", "get", "pods", namespace="ns") == (
        False,
        'RBAC: [clusterroles.rbac.authorization.k8s.io "nope" not found, '
        'roles.rbac.authorization.k8s.io "nope" not found]',
    )
    assert cluster.allowed("v", "get", "pods", namespace="ns") == (False, "")


def test_the_binding_index_follows_writes(cluster: Cluster) -> None:
    cluster.role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
    assert not cluster.allowed("late", "get", "pods")[0]
    cluster.bind("b", "r", [user("late")])
    assert cluster.allowed("late", "get", "pods")[0]
    rt = cluster.api.registry.lookup(G, "v1", "clusterrolebindings")
    assert rt is not None
    cluster.api.delete(Ctx(rt), "b", {})
    assert not cluster.allowed("late", "get", "pods")[0]


def test_a_remembered_decision_follows_role_edits(cluster: Cluster) -> None:
    cluster.role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
    cluster.bind("b", "r", [user("u")])
    assert cluster.allowed("u", "get", "pods")[0]
    assert not cluster.allowed("u", "delete", "pods")[0]
    rt = cluster.api.registry.lookup(G, "v1", "clusterroles")
    assert rt is not None
    edited = copy.deepcopy(cluster.api.get(Ctx(rt), "r"))
    edited["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]
    cluster.api.update(Ctx(rt), "r", edited)
    assert cluster.allowed("u", "delete", "pods")[0]
    assert not cluster.allowed("u", "get", "pods")[0]


def test_masters_are_allowed_everything_and_bootstrap_lets_users_ask(cluster: Cluster) -> None:
    assert cluster.allowed("root", "delete", "nodes", groups=("system:masters",)) == (True, "")
    assert cluster.allowed("anyone", "create", "selfsubjectaccessreviews", api_group="authorization.k8s.io")[
        0
    ]
    rules = cluster.authorizer.rules_for(User("anyone", groups=("system:authenticated",)), "default")
    assert {
        "verbs": ["get"],
        "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
    } in (rules.non_resource)
    assert not rules.incomplete


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/ns/pods", {}, ("list", "ns", "", "pods", "", "")),
        ("GET", "/api/v1/pods", {"watch": "true"}, ("watch", "", "", "pods", "", "")),
        ("GET", "/api/v1/watch/namespaces/ns/pods/p", {}, ("watch", "ns", "", "pods", "", "p")),
        ("GET", "/api/v1/namespaces/ns", {}, ("get", "ns", "", "namespaces", "", "ns")),
        ("PUT", "/api/v1/namespaces/ns/finalize", {}, ("update", "ns", "", "namespaces", "finalize", "ns")),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/ns/deployments",
            {},
            ("deletecollection", "ns", "apps", "deployments", "", ""),
        ),
        ("POST", "/api/v1/namespaces/ns/pods/p/eviction", {}, ("create", "ns", "", "pods", "eviction", "p")),
        (
            "GET",
            "/api/v1/secrets",
            {"fieldSelector": "metadata.name=s"},
            ("list", "", "", "secrets", "", "s"),
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            {},
            ("patch", "ns", "apps", "deployments", "scale", "d"),
        ),
    ],
)
def test_request_attributes_as_upstreams_request_info(
    method: str, path: str, query: dict[str, str], expected: tuple[str, ...]
) -> None:
    a = authz.attributes_of(User("u"), method, path, query)
    assert a.resource_request
    assert (a.verb, a.namespace, a.api_group, a.resource, a.subresource, a.name) == expected


@pytest.mark.parametrize("path", ["/healthz", "/apis", "/apis/apps", "/api", "/api/v1", "/openapi/v2"])
def test_paths_outside_resources_are_non_resource_requests(path: str) -> None:
    a = authz.attributes_of(User("u"), "GET", path, {})
    assert (a.resource_request, a.verb, a.path) == (False, "get", path)


def test_forbidden_bodies_are_kube_apiservers() -> None:
    named = authz.forbidden(Attributes("bob", (), "get", True, "ns", "", "pods", "", "p"), "")
    assert named.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "p" is forbidden: User "bob" cannot get resource "pods" in API group "" in the namespace "ns"',
        "reason": "Forbidden",
        "details": {"name": "p", "kind": "pods"},
        "code": 403,
    }
    cluster_list = authz.forbidden(
        Attributes("bob", (), "list", True, "", "apps", "deployments", "scale"), ""
    )
    assert cluster_list.message == (
        'deployments.apps is forbidden: User "bob" cannot list resource "deployments/scale" '
        'in API group "apps" at the cluster scope'
    )
    path = authz.forbidden(Attributes("bob", (), "get", False, path="/metrics"), "RBAC: x")
    assert (path.message, path.details) == ('forbidden: User "bob" cannot get path "/metrics": RBAC: x', {})


def headers(**values: str | list[str]) -> CIMultiDictProxy[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for key, value in values.items():
        for v in [value] if isinstance(value, str) else value:
            out.add(key.replace("_", "-"), v)
    return CIMultiDictProxy(out)


def test_impersonation_needs_the_impersonate_verb(cluster: Cluster) -> None:
    alice = User("alice", groups=("system:authenticated",))
    with pytest.raises(errors.ApiError) as refused:
        authz.impersonate(alice, headers(Impersonate_User="bob"), cluster.authorizer)
    assert refused.value.code == 403
    assert refused.value.message == (
        'users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope'
    )
    cluster.role(
        "imp",
        [{"apiGroups": [""], "resources": ["users", "groups", "serviceaccounts"], "verbs": ["impersonate"]}],
    )
    cluster.bind("alice-imp", "imp", [user("alice")])
    assert authz.impersonate(alice, headers(Impersonate_User="bob"), cluster.authorizer) == User(
        "bob", groups=("system:authenticated",)
    )
    assert authz.impersonate(
        alice, headers(Impersonate_User="bob", Impersonate_Group=["g1", "g2"]), cluster.authorizer
    ) == User("bob", groups=("g1", "g2"))
    assert authz.impersonate(
        alice, headers(Impersonate_User="system:serviceaccount:ns:bot"), cluster.authorizer
    ).groups == ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated")
    with pytest.raises(errors.ApiError) as extra:
        authz.impersonate(
            alice, headers(Impersonate_User="bob", Impersonate_Extra_Scopes="x"), cluster.authorizer
        )
    assert (
        'cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io"'
        in extra.value.message
    )
    with pytest.raises(errors.ApiError) as no_user:
        authz.impersonate(alice, headers(Impersonate_Group="g"), cluster.authorizer)
    assert no_user.value.code == 500


def test_escalation_needs_the_rules_or_the_escalate_and_bind_verbs(cluster: Cluster) -> None:
    cluster.role("pods", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}], "ns")
    cluster.bind("b", "pods", [user("u")], "ns")
    u = User("u", groups=("system:authenticated",))
    wide = {
        "metadata": {"name": "wide", "namespace": "ns"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "delete"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
        ],
    }
    with pytest.raises(errors.ApiError) as refused:
        escalation.admit(u, cluster.authorizer, "Role", wide)
    assert refused.value.message == (
        'roles.rbac.authorization.k8s.io "wide" is forbidden: user "u" (groups=["system:authenticated"]) '
        "is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}'
    )
    narrow = {
        "metadata": {"name": "n", "namespace": "ns"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }
    escalation.admit(u, cluster.authorizer, "Role", narrow)
    binding = {
        "metadata": {"name": "x", "namespace": "ns"},
        "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
    }
    with pytest.raises(errors.ApiError):
        escalation.admit(u, cluster.authorizer, "RoleBinding", binding)
    cluster.role(
        "binder",
        [
            {
                "apiGroups": [G],
                "resources": ["clusterroles"],
                "verbs": ["bind"],
                "resourceNames": ["cluster-admin"],
            }
        ],
    )
    cluster.bind("u-binds", "binder", [user("u")], "ns", kind="ClusterRole")
    escalation.admit(u, cluster.authorizer, "RoleBinding", binding)
    cluster.role("escalator", [{"apiGroups": [G], "resources": ["roles"], "verbs": ["escalate"]}])
    cluster.bind("u-escalates", "escalator", [user("u")], "ns", kind="ClusterRole")
    escalation.admit(u, cluster.authorizer, "Role", wide)
    escalation.admit(User("root", groups=("system:masters",)), cluster.authorizer, "ClusterRole", wide)
    # The garbage collector's kind of update (owners, finalizers) grants nothing new.
    collector = User("system:serviceaccount:kube-system:generic-garbage-collector")
    owned = copy.deepcopy(wide)
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}
    ]
    escalation.admit(collector, cluster.authorizer, "Role", owned, wide)
    with pytest.raises(errors.ApiError):
        escalation.admit(collector, cluster.authorizer, "Role", owned, narrow)
