"""What RBAC costs the embedded API server per request; run by `make bench`.

Under `--authorization-mode=RBAC` every request is read (`authz.attributes_of`) and decided
(`authz.Authorizer.authorize`) before it is served. This builds, in process, a cluster of
`--roles` Roles with a RoleBinding each (spread over 50 namespaces, each naming a user, a group
and a service account), as many ClusterRoles with a ClusterRoleBinding each, and times,
for allowed decisions (found through a namespace binding) and denied ones (every binding of the
user visited), each user's first decision and repeated ones, and the first decision after a
binding write (the subject index rebuilt). Each user here is in a group bound 25 times.

Run: `.venv/bin/python bench/rbac.py [--roles 500] [--decisions 20000]`.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from kcm_apiserver import authz, rbac
from kcm_apiserver.authn import User
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

G = "rbac.authorization.k8s.io"
NAMESPACES = 50


def build(roles: int) -> Api:
    api = Api(Store(), Registry())

    def rt(resource: str) -> Ctx:
        found = api.registry.lookup(G if resource != "namespaces" else "", "v1", resource)
        assert found is not None
        return Ctx(found)

    for n in range(NAMESPACES):
        api.create(
            rt("namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{n}"}}
        )
    for i in range(roles):
        ns = f"ns-{i % NAMESPACES}"
        rules = [
            {
                "apiGroups": ["", "apps"],
                "resources": [f"things{i}", "pods", "deployments/scale"],
                "verbs": ["get", "list"],
            },
            {
                "apiGroups": ["batch"],
                "resources": ["jobs"],
                "resourceNames": [f"job-{i}"],
                "verbs": ["update"],
            },
        ]
        role_ctx, binding_ctx = rt("roles"), rt("rolebindings")
        role_ctx.namespace = binding_ctx.namespace = ns
        api.create(
            role_ctx, {"apiVersion": f"{G}/v1", "kind": "Role", "metadata": {"name": f"r{i}"}, "rules": rules}
        )
        subjects = [
            {"apiGroup": G, "kind": "User", "name": f"user-{i}"},
            {"apiGroup": G, "kind": "Group", "name": f"team-{i % 20}"},
            {"kind": "ServiceAccount", "name": f"sa-{i}"},
        ]
        ref = {"apiGroup": G, "kind": "Role", "name": f"r{i}"}
        api.create(
            binding_ctx,
            {
                "apiVersion": f"{G}/v1",
                "kind": "RoleBinding",
                "metadata": {"name": f"b{i}"},
                "roleRef": ref,
                "subjects": subjects,
            },
        )
        cluster_rules = [
            {"apiGroups": [""], "resources": [f"nodes{i}"], "verbs": ["get"]},
            {"nonResourceURLs": [f"/custom/{i}/*"], "verbs": ["get"]},
        ]
        api.create(
            rt("clusterroles"),
            {
                "apiVersion": f"{G}/v1",
                "kind": "ClusterRole",
                "metadata": {"name": f"c{i}"},
                "rules": cluster_rules,
            },
        )
        cref = {"apiGroup": G, "kind": "ClusterRole", "name": f"c{i}"}
        api.create(
            rt("clusterrolebindings"),
            {
                "apiVersion": f"{G}/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"cb{i}"},
                "roleRef": cref,
                "subjects": subjects[:2],
            },
        )
    return api


def rate(label: str, count: int, seconds: float) -> None:
    print(f"{label:<58} {count / seconds:>10,.0f} decisions/s  ({seconds / count * 1e6:.1f} us each)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--roles", type=int, default=500)
    parser.add_argument("--decisions", type=int, default=20_000)
    args = parser.parse_args()
    started = time.perf_counter()
    api = build(args.roles)
    built = time.perf_counter() - started
    print(
        f"cluster: {args.roles} Roles+RoleBindings and ClusterRoles+ClusterRoleBindings, built in {built:.1f} s"
    )
    authorizer = authz.Authorizer(("RBAC",), rbac.Evaluator(api.store))
    rng = random.Random(1)
    picks = [rng.randrange(args.roles) for _ in range(args.decisions)]

    def user(i: int) -> User:
        return User(f"user-{i}", groups=(f"team-{i % 20}", "system:authenticated"))

    authorizer.authorize(
        authz.attributes_of(user(0), "GET", "/api/v1/namespaces/ns-0/pods", {})
    )  # builds the index

    def scenario(label: str, request: Callable[[int], tuple[User, str, str]], allowed: bool) -> None:
        """Each user's first decision (every binding visited anew), then `--decisions`
        repeated ones (remembered until the next RBAC write)."""
        for title, users in (("first", range(args.roles)), ("repeated", picks)):
            t0 = time.perf_counter()
            for i in users:
                who, method, path = request(i)
                assert authorizer.authorize(authz.attributes_of(who, method, path, {}))[0] is allowed
            rate(f"{label}, {title}", len(users), time.perf_counter() - t0)

    scenario(
        "allowed: list pods via the user's RoleBinding",
        lambda i: (user(i), "GET", f"/api/v1/namespaces/ns-{i % NAMESPACES}/pods"),
        True,
    )
    scenario(
        "denied: delete a secret",
        lambda i: (user(i), "DELETE", f"/api/v1/namespaces/ns-{i % NAMESPACES}/secrets/s"),
        False,
    )
    scenario(
        "allowed: a service account updates its Job",
        lambda i: (
            User(f"system:serviceaccount:ns-{i % NAMESPACES}:sa-{i}", groups=("system:serviceaccounts",)),
            "PUT",
            f"/apis/batch/v1/namespaces/ns-{i % NAMESPACES}/jobs/job-{i}",
        ),
        True,
    )
    binding_rt = api.registry.lookup(G, "v1", "clusterrolebindings")
    assert binding_rt is not None
    binding = Ctx(binding_rt)
    rebuilds = 20
    t0 = time.perf_counter()
    for n in range(rebuilds):
        body = {
            "apiVersion": f"{G}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"late-{n}"},
            "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "c0"},
            "subjects": [{"apiGroup": G, "kind": "User", "name": "late"}],
        }
        api.create(binding, body)
        assert authorizer.authorize(authz.attributes_of(User("late"), "GET", "/api/v1/nodes0/x", {}))[0]
    seconds = (time.perf_counter() - t0) / rebuilds
    print(f"{'after a binding write: write + index rebuild + decision':<58} {seconds * 1e3:>10.1f} ms")


if __name__ == "__main__":
    main()
