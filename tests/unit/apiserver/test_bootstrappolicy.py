"""The embedded API server's bootstrap ClusterRoles: seeded as upstream labels them, never
overwritten once stored (a restart over the same data keeps a user's edit), and a deleted one
made again at the next start."""

from __future__ import annotations

from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

NAMES = {
    "cluster-admin",
    "admin",
    "edit",
    "view",
    "system:aggregate-to-admin",
    "system:aggregate-to-edit",
    "system:aggregate-to-view",
}


def roles(api: Api) -> Ctx:
    rt = api.registry.lookup("rbac.authorization.k8s.io", "v1", "clusterroles")
    assert rt is not None
    return Ctx(rt)


def test_bootstrap_roles_are_seeded_with_upstreams_labels() -> None:
    api = Api(Store(), Registry())
    ctx = roles(api)
    for name in NAMES:
        meta = api.get(ctx, name)["metadata"]
        assert meta["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
        assert meta["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
    view = api.get(ctx, "view")
    assert view["aggregationRule"] == {
        "clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]
    }
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert api.get(ctx, "cluster-admin")["rules"] == [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ]


def test_a_stored_role_is_kept_across_a_restart() -> None:
    store = Store()
    api = Api(store, Registry())
    ctx = roles(api)
    edited = api.get(ctx, "system:aggregate-to-view")
    edited["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    api.update(ctx, "system:aggregate-to-view", edited)
    api.delete(ctx, "edit", {})
    again = Api(store, Registry())
    assert again.get(roles(again), "system:aggregate-to-view")["rules"] == edited["rules"]
    assert (
        again.get(roles(again), "edit")["metadata"]["labels"]["kubernetes.io/bootstrapping"]
        == "rbac-defaults"
    )
