"""A Deployment-like schema and server-side apply on it, for the apiserver's managed-fields tests
(tests/unit/apiserver/test_apply.py, test_kubectl_upgrades.py): `DEPLOYMENT` is a hand-written
TypeInfo tree, `apply` runs kcm_apiserver.apply.server_side_apply on it, `managers` / `owned`
read the managedFields an object ends with."""

from __future__ import annotations

from typing import Any

from kcm_apiserver.apply import FieldSet, server_side_apply


class T:
    """A hand-written TypeInfo node."""

    def __init__(
        self,
        kind: str = "scalar",
        *,
        strategy: tuple[str, ...] = (),
        key: str | None = None,
        list_type: str | None = None,
        map_keys: tuple[str, ...] = (),
        fields: dict[str, T] | None = None,
        elem: T | None = None,
    ) -> None:
        self.kind = kind
        self.patch_strategy = frozenset(strategy)
        self.patch_merge_key = key
        self.list_type = list_type
        self.list_map_keys = map_keys
        self.fields = fields or {}
        self._elem = elem

    def field(self, name: str) -> T | None:
        return self.fields.get(name)

    def elem(self) -> T | None:
        return self._elem


S = T()
STRINGS = T("map", elem=S)
CONTAINER = T(
    "object",
    fields={
        "name": S,
        "image": S,
        "args": T("array", list_type="atomic", elem=S),
        "ports": T(
            "array",
            strategy=("merge",),
            key="containerPort",
            list_type="map",
            map_keys=("containerPort", "protocol"),
            elem=T("object", fields={"containerPort": S, "protocol": S, "name": S}),
        ),
        "env": T("array", strategy=("merge",), key="name", elem=T("object", fields={"name": S, "value": S})),
        "resources": T("object", fields={"limits": STRINGS, "requests": STRINGS}),
    },
)
POD_SPEC = T(
    "object",
    fields={
        "containers": T(
            "array", strategy=("merge",), key="name", list_type="map", map_keys=("name",), elem=CONTAINER
        ),
        "volumes": T(
            "array",
            strategy=("merge", "retainKeys"),
            key="name",
            elem=T("object", fields={"name": S, "emptyDir": T("object", fields={"medium": S})}),
        ),
        "tolerations": T("array", list_type="atomic", elem=T("object", fields={"key": S, "effect": S})),
        "nodeSelector": STRINGS,
    },
)
DEPLOYMENT = T(
    "object",
    fields={
        "apiVersion": S,
        "kind": S,
        "metadata": T(
            "object",
            fields={
                "name": S,
                "namespace": S,
                "uid": S,
                "resourceVersion": S,
                "generation": S,
                "creationTimestamp": S,
                "labels": STRINGS,
                "annotations": STRINGS,
                "finalizers": T("array", strategy=("merge",), list_type="set", elem=S),
                "ownerReferences": T(
                    "array",
                    strategy=("merge",),
                    key="uid",
                    elem=T("object", fields={"uid": S, "name": S, "kind": S}),
                ),
                "managedFields": T("array", list_type="atomic", elem=T("object")),
            },
        ),
        "spec": T(
            "object",
            fields={
                "replicas": S,
                "paused": S,
                "selector": T("object", fields={"matchLabels": STRINGS}),
                "strategy": T(
                    "object",
                    fields={
                        "type": S,
                        "rollingUpdate": T("object", fields={"maxSurge": S, "maxUnavailable": S}),
                    },
                ),
                "template": T(
                    "object", fields={"metadata": T("object", fields={"labels": STRINGS}), "spec": POD_SPEC}
                ),
            },
        ),
        "status": T(
            "object",
            fields={
                "replicas": S,
                "conditions": T(
                    "array",
                    strategy=("merge",),
                    key="type",
                    elem=T("object", fields={"type": S, "status": S, "reason": S}),
                ),
            },
        ),
    },
)
T0, T1, T2 = "2024-05-01T00:00:00Z", "2024-05-01T00:01:00Z", "2024-05-01T00:02:00Z"


def deployment(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 80}]}]
                },
            },
            **spec,
        },
    }


def apply(
    live: dict[str, Any] | None, applied: dict[str, Any], manager: str, force: bool = False, now: str = T0
) -> Any:
    return server_side_apply(live, applied, manager, force, DEPLOYMENT, "apps/v1", now)


def managers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{e['manager']}/{e['operation']}": e for e in obj["metadata"].get("managedFields", [])}


def owned(obj: dict[str, Any], manager: str) -> FieldSet:
    return FieldSet.from_fields_v1(managers(obj)[manager]["fieldsV1"])
