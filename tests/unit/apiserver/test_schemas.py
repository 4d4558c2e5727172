"""OpenAPI v3 documents, type information and unknown-field detection (kcm_apiserver.schemas)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kcm_apiserver.registry import Registry
from kcm_apiserver.schemas import openapi_v3, patchtypes, unknownfields

from tests.support.crontab import CRONTAB_SCHEMA, crontab_crd, registry_with_crontab

CORE = "io.k8s.api.core.v1."
APPS = "io.k8s.api.apps.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."


def component(group: str, version: str, definition: str) -> dict[str, Any]:
    doc = openapi_v3.group_version_document(Registry(), group, version, [])
    result: dict[str, Any] = doc["components"]["schemas"][definition]
    return result


@pytest.mark.parametrize(
    ("group", "version", "definition", "field", "expected"),
    [
        ("", "v1", CORE + "PodSpec", "containers", {"patch-merge-key": "name", "patch-strategy": "merge"}),
        (
            "",
            "v1",
            CORE + "PodSpec",
            "volumes",
            {"patch-merge-key": "name", "patch-strategy": "merge,retainKeys"},
        ),
        ("", "v1", CORE + "Container", "env", {"patch-merge-key": "name", "patch-strategy": "merge"}),
        (
            "",
            "v1",
            CORE + "Container",
            "ports",
            {"patch-merge-key": "containerPort", "patch-strategy": "merge"},
        ),
        (
            "",
            "v1",
            CORE + "ServiceSpec",
            "ports",
            {"patch-merge-key": "port", "list-map-keys": ["port", "protocol"]},
        ),
        ("", "v1", CORE + "PodStatus", "conditions", {"patch-merge-key": "type", "list-type": "map"}),
        ("", "v1", CORE + "NodeStatus", "addresses", {"patch-merge-key": "type"}),
        (
            "",
            "v1",
            META + "ObjectMeta",
            "ownerReferences",
            {"patch-merge-key": "uid", "patch-strategy": "merge"},
        ),
        ("", "v1", META + "ObjectMeta", "finalizers", {"patch-strategy": "merge", "list-type": "set"}),
        (
            "apps",
            "v1",
            APPS + "DeploymentStatus",
            "conditions",
            {"patch-merge-key": "type", "patch-strategy": "merge"},
        ),
        ("apps", "v1", APPS + "DeploymentSpec", "strategy", {"patch-strategy": "retainKeys"}),
    ],
)
def test_properties_carry_upstream_patch_extensions(
    group: str, version: str, definition: str, field: str, expected: dict[str, Any]
) -> None:
    prop = component(group, version, definition)["properties"][field]
    assert {k: prop.get(f"x-kubernetes-{k}") for k in expected} == expected


def test_pod_schema_describes_its_fields_and_kind() -> None:
    pod = component("", "v1", CORE + "Pod")
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    assert pod["properties"]["spec"]["allOf"] == [{"$ref": "#/components/schemas/" + CORE + "PodSpec"}]
    assert "container" in pod["description"].lower()
    container = component("", "v1", CORE + "Container")
    assert container["required"] == ["name"]
    assert container["properties"]["image"]["type"] == "string"


@pytest.mark.parametrize(
    ("definition", "field", "expected"),
    [
        (CORE + "ServicePort", "targetPort", "io.k8s.apimachinery.pkg.util.intstr.IntOrString"),
        (META + "ObjectMeta", "creationTimestamp", META + "Time"),
        (APPS + "DeploymentSpec", "template", CORE + "PodTemplateSpec"),
        (APPS + "DeploymentSpec", "selector", META + "LabelSelector"),
    ],
)
def test_special_types_and_shared_types_keep_upstream_definition_names(
    definition: str, field: str, expected: str
) -> None:
    group = "apps" if definition.startswith(APPS) else ""
    prop = component(group, "v1", definition)["properties"][field]
    assert prop["allOf"] == [{"$ref": "#/components/schemas/" + expected}]


def _all_group_versions() -> list[tuple[str, str]]:
    return [(g, v) for g, versions in Registry().groups().items() for v in versions]


def _writable_group_versions() -> list[tuple[str, str]]:
    """Group versions with a patchable type: metrics.k8s.io serves get and list only."""
    return sorted({(rt.group, rt.version) for rt in Registry() if "patch" in rt.verbs})


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


@pytest.mark.parametrize(("group", "version"), _all_group_versions())
def test_every_document_is_json_with_all_references_resolvable(group: str, version: str) -> None:
    doc = json.loads(json.dumps(openapi_v3.group_version_document(Registry(), group, version, [])))
    assert doc["openapi"].startswith("3.0")
    names = {"#/components/schemas/" + name for name in doc["components"]["schemas"]}
    assert _refs(doc) - names == set()


@pytest.mark.parametrize(("group", "version"), _writable_group_versions())
def test_every_patch_operation_declares_field_validation_gvk_and_strategic_merge(
    group: str, version: str
) -> None:
    doc = openapi_v3.group_version_document(Registry(), group, version, [])
    patched = 0
    for item in doc["paths"].values():
        patch = item.get("patch")
        if patch is None:
            continue
        patched += 1
        assert set(patch["x-kubernetes-group-version-kind"]) == {"group", "version", "kind"}
        assert "fieldValidation" in {p["name"] for p in patch["parameters"] if p["in"] == "query"}
        assert "fieldValidation" in {p["name"] for p in item["parameters"] if p["in"] == "query"}
        assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    assert patched > 0


@pytest.mark.parametrize(
    ("group", "path", "method", "gvk"),
    [
        ("", "/api/v1/namespaces/{namespace}/pods/{name}", "patch", ("", "v1", "Pod")),
        ("", "/api/v1/namespaces/{namespace}/pods/{name}/status", "patch", ("", "v1", "Pod")),
        ("", "/api/v1/namespaces/{namespace}/pods", "post", ("", "v1", "Pod")),
        ("", "/api/v1/pods", "get", ("", "v1", "Pod")),
        ("", "/api/v1/nodes/{name}", "patch", ("", "v1", "Node")),
        ("", "/api/v1/namespaces/{namespace}/pods/{name}/binding", "post", ("", "v1", "Binding")),
        (
            "apps",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
            "patch",
            ("apps", "v1", "Deployment"),
        ),
        (
            "apps",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
            "patch",
            ("autoscaling", "v1", "Scale"),
        ),
    ],
)
def test_paths_are_laid_out_like_upstream(
    group: str, path: str, method: str, gvk: tuple[str, str, str]
) -> None:
    doc = openapi_v3.group_version_document(Registry(), group, "v1", [])
    op = doc["paths"][path][method]
    assert op["x-kubernetes-group-version-kind"] == {"group": gvk[0], "version": gvk[1], "kind": gvk[2]}


def test_root_lists_every_group_version_with_a_stable_hash() -> None:
    registry = registry_with_crontab()
    root = openapi_v3.openapi_v3_root(registry, [crontab_crd()])
    expected = {f"apis/{g}/{v}" if g else f"api/{v}" for g, vs in registry.groups().items() for v in vs}
    assert set(root["paths"]) == expected
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    assert openapi_v3.openapi_v3_root(registry, [crontab_crd()]) == root


def test_root_hash_changes_when_a_crd_schema_changes() -> None:
    registry = registry_with_crontab()
    before = openapi_v3.openapi_v3_root(registry, [crontab_crd()])["paths"]
    changed = {**CRONTAB_SCHEMA, "description": "Changed."}
    after = openapi_v3.openapi_v3_root(registry, [crontab_crd(changed)])["paths"]
    key = "apis/stable.example.com/v1"
    assert before[key] != after[key]
    assert before["api/v1"] == after["api/v1"]


def test_crd_document_is_built_from_its_schema() -> None:
    doc = openapi_v3.group_version_document(
        registry_with_crontab(), "stable.example.com", "v1", [crontab_crd()]
    )
    json.dumps(doc)
    crontab = doc["components"]["schemas"]["com.example.stable.v1.CronTab"]
    assert crontab["properties"]["spec"]["properties"]["cronSpec"]["type"] == "string"
    assert crontab["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/" + META + "ObjectMeta"}
    ]
    assert crontab["x-kubernetes-group-version-kind"] == [
        {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
    ]
    assert META + "ObjectMeta" in doc["components"]["schemas"]
    patch = doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    # Custom resources take no strategic merge patch: kubectl must fall back to a JSON merge patch.
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "application/merge-patch+json" in patch["requestBody"]["content"]
    names = {"#/components/schemas/" + name for name in doc["components"]["schemas"]}
    assert _refs(doc) - names == set()


@pytest.mark.parametrize(
    ("kind", "obj", "expected"),
    [
        ("Pod", {"spec": {"contaners": [], "containers": [{"name": "a"}]}}, [".spec.contaners"]),
        (
            "Pod",
            {"metadata": {"name": "p", "labels": {"any.key/x": "1"}, "annotations": {"whatever": "y"}}},
            [],
        ),
        (
            "Pod",
            {
                "spec": {
                    "containers": [{"name": "a", "imagee": "x", "ports": [{"containerPort": 1, "nmae": "p"}]}]
                }
            },
            [".spec.containers[0].imagee", ".spec.containers[0].ports[0].nmae"],
        ),
        (
            "Pod",
            {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "x": "2"}}}]}},
            [],
        ),
        ("Pod", {"metadata": {"nme": "p"}, "stauts": {}}, [".metadata.nme", ".stauts"]),
        ("ConfigMap", {"apiVersion": "v1", "kind": "ConfigMap", "data": {"any": "thing"}}, []),
        ("Service", {"spec": {"ports": [{"port": 80, "targetPort": "http"}]}}, []),
        ("ControllerRevision", {"data": {"free": {"form": 1}}, "revision": 1}, []),
    ],
)
def test_unknown_fields_of_builtin_kinds(kind: str, obj: dict[str, Any], expected: list[str]) -> None:
    group = "apps" if kind == "ControllerRevision" else ""
    assert unknownfields.unknown_fields(Registry(), group, "v1", kind, obj, []) == expected


def test_unknown_fields_in_nested_template() -> None:
    deployment = {"spec": {"template": {"spec": {"containers": [{"name": "a", "imag": "x"}]}}, "replica": 1}}
    found = unknownfields.unknown_fields(Registry(), "apps", "v1", "Deployment", deployment, [])
    assert found == [".spec.template.spec.containers[0].imag", ".spec.replica"]


def test_unknown_fields_of_a_patch_are_those_it_changed() -> None:
    """What a patch left as it was is not checked again; what it changed is, with its path in
    the patched object."""
    before = {
        "metadata": {"name": "p", "legacy": 1},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
    }
    after = {
        "metadata": {"name": "p", "legacy": 1},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "z", "imagee": "z"}]},
        "stauts": {},
    }
    found = unknownfields.unknown_fields(Registry(), "", "v1", "Pod", after, [], unchanged=before)
    assert found == [".spec.containers[1].imagee", ".stauts"]
    assert unknownfields.unknown_fields(Registry(), "", "v1", "Pod", after, []) == [
        ".metadata.legacy",
        ".spec.containers[1].imagee",
        ".stauts",
    ]
    assert unknownfields.unknown_fields(Registry(), "", "v1", "Pod", before, [], unchanged=before) == []
    dropped = unknownfields.unknown_fields(
        Registry(), "", "v1", "Pod", after, [], unchanged=before, drop=True
    )
    assert dropped == [".spec.containers[1].imagee", ".stauts"]
    assert after["spec"]["containers"][1] == {"name": "b", "image": "z"} and "stauts" not in after
    assert after["metadata"] == {"name": "p", "legacy": 1}  # not the patch's: left alone


def test_dropping_unknown_fields_of_custom_resources_keeps_preserved_ones() -> None:
    obj = {"spec": {"cronSpec": "x", "cronspec": "y", "extra": {"any": {"thing": 1}}}, "other": 1}
    dropped = unknownfields.unknown_fields(
        registry_with_crontab(), "stable.example.com", "v1", "CronTab", obj, [crontab_crd()], drop=True
    )
    assert dropped == [".spec.cronspec", ".other"]
    assert obj == {"spec": {"cronSpec": "x", "extra": {"any": {"thing": 1}}}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c"}}, []),
        ({"spec": {"cronSpec": "* * * * *", "cronspec": "x"}}, [".spec.cronspec"]),
        ({"spec": {"extra": {"anything": {"goes": 1}}, "labels": {"a": "b"}}}, []),
        ({"spec": {"ports": [{"name": "a", "port": 1}]}}, [".spec.ports[0].port"]),
        ({"metadata": {"nmae": "c"}, "other": 1}, [".metadata.nmae", ".other"]),
    ],
)
def test_unknown_fields_of_custom_resources(obj: dict[str, Any], expected: list[str]) -> None:
    found = unknownfields.unknown_fields(
        registry_with_crontab(), "stable.example.com", "v1", "CronTab", obj, [crontab_crd()]
    )
    assert found == expected


def test_preserve_unknown_fields_crd_accepts_anything() -> None:
    crd = crontab_crd({"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    obj = {"spec": {"a": 1}, "b": [1]}
    assert (
        unknownfields.unknown_fields(
            registry_with_crontab(), "stable.example.com", "v1", "CronTab", obj, [crd]
        )
        == []
    )


@pytest.mark.parametrize(
    ("path", "kind", "strategy", "merge_key", "list_type", "keys"),
    [
        (("spec", "template", "spec", "containers"), "array", {"merge"}, "name", "map", ("name",)),
        (("spec", "template", "spec", "volumes"), "array", {"merge", "retainKeys"}, "name", "map", ("name",)),
        (("spec", "strategy"), "object", {"retainKeys"}, None, None, ()),
        (("metadata", "finalizers"), "array", {"merge"}, None, "set", ()),
        (("metadata", "labels"), "map", set(), None, None, ()),
        (("spec", "replicas"), "scalar", set(), None, None, ()),
        (("status", "conditions"), "array", {"merge"}, "type", "map", ("type",)),
    ],
)
def test_type_info_navigates_deployment(
    path: tuple[str, ...],
    kind: str,
    strategy: set[str],
    merge_key: str | None,
    list_type: str | None,
    keys: tuple[str, ...],
) -> None:
    node = patchtypes.type_info(Registry(), "apps", "v1", "Deployment", [])
    for name in path:
        assert node is not None
        node = node.field(name)
    assert node is not None
    assert (
        node.kind,
        set(node.patch_strategy),
        node.patch_merge_key,
        node.list_type,
        node.list_map_keys,
    ) == (
        kind,
        strategy,
        merge_key,
        list_type,
        keys,
    )


def test_type_info_elements_of_lists_and_maps() -> None:
    spec = patchtypes.type_info(Registry(), "", "v1", "Pod", [])
    assert spec is not None
    containers = spec.field("spec")
    assert containers is not None
    containers = containers.field("containers")
    assert containers is not None
    container = containers.elem()
    assert container is not None and container.kind == "object"
    ports = container.field("ports")
    assert ports is not None
    assert (ports.patch_merge_key, ports.list_map_keys) == ("containerPort", ("containerPort", "protocol"))
    assert container.field("nope") is None
    labels = spec.field("metadata")
    assert labels is not None
    labels = labels.field("labels")
    assert labels is not None
    value = labels.elem()
    assert value is not None and value.kind == "scalar"


@pytest.mark.parametrize(
    ("group", "version", "kind"),
    [("", "v1", "Nope"), ("stable.example.com", "v1", "CronTab"), ("apps", "v9", "Deployment")],
)
def test_type_info_unknown_kind_is_none(group: str, version: str, kind: str) -> None:
    assert patchtypes.type_info(Registry(), group, version, kind, []) is None


def test_type_info_of_custom_resource_reads_list_extensions() -> None:
    root = patchtypes.type_info(
        registry_with_crontab(), "stable.example.com", "v1", "CronTab", [crontab_crd()]
    )
    assert root is not None and root.kind == "object"
    spec = root.field("spec")
    assert spec is not None
    ports = spec.field("ports")
    assert ports is not None
    assert (ports.kind, ports.list_type, ports.list_map_keys, ports.patch_strategy) == (
        "array",
        "map",
        ("name",),
        frozenset(),
    )
    labels = spec.field("labels")
    assert labels is not None and labels.kind == "map"
    metadata = root.field("metadata")
    assert metadata is not None
    owners = metadata.field("ownerReferences")
    assert owners is not None and owners.patch_merge_key == "uid"
    assert spec.field("extra") is None


def test_scale_kind_has_type_info_for_the_scale_subresource() -> None:
    scale = patchtypes.type_info(Registry(), "autoscaling", "v1", "Scale", [])
    assert scale is not None
    spec = scale.field("spec")
    assert spec is not None
    assert spec.field("replicas") is not None
