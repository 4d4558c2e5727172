"""The /openapi/v2 document derived from the v3 schemas, its gnostic protobuf form and negotiation."""

from __future__ import annotations

import json
import struct
from typing import Any

import msgspec
import pytest
from kcm_apiserver import openapi_v2
from kcm_apiserver.registry import Registry
from kcm_shared.apimachinery import protobuf

from tests.support.crontab import CRONTAB_SCHEMA, crontab_crd, registry_with_crontab

META = "io.k8s.apimachinery.pkg.apis.meta.v1."


def v2(crds: list[dict[str, Any]] | None = None, registry: Registry | None = None) -> dict[str, Any]:
    return openapi_v2.document(registry or Registry(), crds or [], "v1.32.0")


@pytest.mark.parametrize(
    ("crd", "v3", "expected"),
    [
        # v3 wraps a $ref in allOf to give it siblings; v2 allows them beside $ref.
        (
            False,
            {"allOf": [{"$ref": "#/components/schemas/" + META + "ObjectMeta"}], "default": {}},
            {"$ref": "#/definitions/" + META + "ObjectMeta", "default": {}},
        ),
        (
            False,
            {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]},
            {"type": "string", "format": "int-or-string"},
        ),
        # Built-in free-form objects keep their type, as upstream's v2 has them.
        (False, {"type": "object", "x-kubernetes-preserve-unknown-fields": True}, {"type": "object"}),
        # ToStructuralOpenAPIV2: CRD nodes that keep unknown fields, embed objects or may be null lose
        # type, items and properties; v2 has no oneOf/anyOf/not/allOf and no nullable.
        (
            True,
            {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"a": {"type": "string"}},
            },
            {"x-kubernetes-preserve-unknown-fields": True},
        ),
        (
            True,
            {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {"a": {}}},
            {"x-kubernetes-embedded-resource": True},
        ),
        (True, {"type": "array", "nullable": True, "items": {"type": "string"}}, {}),
        (
            True,
            {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            {"x-kubernetes-int-or-string": True},
        ),
        (
            True,
            {
                "type": "object",
                "required": ["a", "b"],
                "properties": {"a": {"type": "string", "nullable": True}, "b": {"type": "string"}},
            },
            {"type": "object", "required": ["b"], "properties": {"a": {}, "b": {"type": "string"}}},
        ),
        (
            True,
            {"type": "object", "required": ["a"], "properties": {"a": {"type": "string", "nullable": True}}},
            {"type": "object", "properties": {"a": {}}},
        ),
    ],
)
def test_schema_conversion(crd: bool, v3: dict[str, Any], expected: dict[str, Any]) -> None:
    assert openapi_v2._schema(v3, crd=crd) == expected


def test_builtin_definitions_are_named_and_kinded_as_upstream() -> None:
    doc = v2()
    assert doc["swagger"] == "2.0" and doc["info"] == {"title": "Kubernetes", "version": "v1.32.0"}
    deployment = doc["definitions"]["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
    assert deployment["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    refs = {m for m in json.dumps(doc).split('"') if m.startswith("#/")}
    assert all(r.removeprefix("#/definitions/") in doc["definitions"] for r in refs), "dangling $ref"


def test_operations_have_v2_parameters_and_bodies() -> None:
    doc = v2()
    item = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "kind": "Deployment",
        "version": "v1",
    }
    assert patch["parameters"][0] == {
        "in": "body",
        "name": "body",
        "required": True,
        "schema": {"$ref": "#/definitions/" + META + "Patch"},
    }
    validation = next(p for p in patch["parameters"] if p["name"] == "fieldValidation")
    assert validation["in"] == "query" and validation["type"] == "string" and "schema" not in validation
    assert "application/strategic-merge-patch+json" in patch["consumes"]
    assert patch["responses"]["200"]["schema"] == {"$ref": "#/definitions/io.k8s.api.apps.v1.Deployment"}
    assert {p["name"] for p in item["parameters"]} >= {"name", "namespace"}


def test_custom_resources_are_included() -> None:
    doc = v2([crontab_crd()], registry_with_crontab())
    crontab = doc["definitions"]["com.example.stable.v1.CronTab"]
    assert crontab["x-kubernetes-group-version-kind"] == [
        {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
    ]
    spec = crontab["properties"]["spec"]["properties"]
    assert spec["extra"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert crontab["properties"]["metadata"]["$ref"] == "#/definitions/" + META + "ObjectMeta"
    assert "com.example.stable.v1.CronTabList" in doc["definitions"]
    assert "/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}" in doc["paths"]


def test_a_custom_resource_keeping_unknown_fields_is_any_object() -> None:
    schema = {**CRONTAB_SCHEMA, "x-kubernetes-preserve-unknown-fields": True}
    crontab = v2([crontab_crd(schema)], registry_with_crontab())["definitions"][
        "com.example.stable.v1.CronTab"
    ]
    assert crontab == {
        "type": "object",
        "x-kubernetes-group-version-kind": [
            {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
        ],
    }


# --- protobuf --------------------------------------------------------------------------------


def fields(buf: bytes) -> dict[int, list[Any]]:
    """A protobuf message's fields: number -> values (ints, or bytes for length-delimited)."""
    out: dict[int, list[Any]] = {}
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = protobuf._varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = protobuf._varint(buf, pos, end)
        elif wire == 1:
            value = struct.unpack("<d", buf[pos : pos + 8])[0]
            pos += 8
        else:
            start, pos = protobuf._length(buf, pos, end)
            value = buf[start:pos]
        out.setdefault(number, []).append(value)
    return out


def named(buf: bytes, number: int = 1) -> dict[str, bytes]:
    """gnostic's (name, value) pairs, kept in field `number` of their message."""
    out = {}
    for entry in fields(buf)[number]:
        f = fields(entry)
        out[f[1][0].decode()] = f[2][0]
    return out


def test_protobuf_document_carries_definitions_paths_and_extensions() -> None:
    doc = {
        "definitions": {
            "a.B": {
                "type": "object",
                "required": ["x"],
                "properties": {"x": {"type": "integer", "minimum": -1}, "y": {"$ref": "#/definitions/a.C"}},
                "additionalProperties": False,
                "x-kubernetes-group-version-kind": [{"group": "a", "kind": "B", "version": "v1"}],
            }
        },
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": {
            "/x/{name}": {
                "parameters": [{"in": "path", "name": "name", "required": True, "type": "string"}],
                "patch": {
                    "operationId": "patchB",
                    "parameters": [
                        {
                            "in": "body",
                            "name": "body",
                            "required": True,
                            "schema": {"$ref": "#/definitions/a.B"},
                        },
                        {"in": "query", "name": "fieldValidation", "type": "string", "uniqueItems": True},
                    ],
                    "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/a.B"}}},
                    "x-kubernetes-group-version-kind": {"group": "a", "kind": "B", "version": "v1"},
                },
            }
        },
        "swagger": "2.0",
    }
    document = fields(openapi_v2.to_protobuf(doc))
    assert document[1] == [b"2.0"]
    assert fields(document[2][0]) == {1: [b"Kubernetes"], 2: [b"v1.32.0"]}

    schema = fields(named(document[9][0])["a.B"])
    assert fields(schema[22][0]) == {1: [b"object"]}  # type
    assert schema[19] == [b"x"]  # required
    assert fields(schema[21][0]) == {2: [0]}  # additionalProperties: false
    properties = named(schema[25][0])
    x = fields(properties["x"])
    assert x[9] == [-1.0]  # minimum
    assert fields(properties["y"])[1] == [b"#/definitions/a.C"]
    extension = fields(schema[31][0])
    assert extension[1] == [b"x-kubernetes-group-version-kind"]
    assert json.loads(fields(extension[2][0])[2][0]) == [{"group": "a", "kind": "B", "version": "v1"}]

    path_item = fields(named(document[8][0], 2)["/x/{name}"])  # Paths keeps its pairs in field 2
    path_param = fields(fields(fields(path_item[9][0])[1][0])[2][0])[4][0]  # non-body, path
    assert fields(path_param) == {1: [1], 2: [b"path"], 4: [b"name"], 5: [b"string"]}
    patch = fields(path_item[8][0])
    assert patch[5] == [b"patchB"]
    body, query = (fields(fields(p)[1][0]) for p in patch[8])
    assert fields(body[1][0])[2] == [b"body"]
    query_schema = fields(fields(query[2][0])[3][0])
    assert query_schema == {2: [b"query"], 4: [b"fieldValidation"], 6: [b"string"], 20: [1]}
    gvk = fields(patch[13][0])
    assert gvk[1] == [b"x-kubernetes-group-version-kind"]
    assert json.loads(fields(gvk[2][0])[2][0]) == {"group": "a", "kind": "B", "version": "v1"}


# --- serving -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("", "application/json"),
        ("*/*", "application/json"),
        ("application/json", "application/json"),
        ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", openapi_v2.PROTOBUF_TYPE),
        ("application/com.github.proto-openapi.spec.v2.v1.0+protobuf", openapi_v2.PROTOBUF_TYPE),
        (
            "application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
            openapi_v2.PROTOBUF_TYPE,
        ),
        ("*/*, application/com.github.proto-openapi.spec.v2@v1.0+protobuf", openapi_v2.PROTOBUF_TYPE),
        ("application/json;q=0, */*;q=0.1", "application/json"),
        ("text/html", None),
        ("application/vnd.kubernetes.protobuf", None),
    ],
)
def test_negotiation(accept: str, expected: str | None) -> None:
    assert openapi_v2.negotiate(accept) == expected


def test_cache_rebuilds_only_when_the_key_moves() -> None:
    cache = openapi_v2.V2Cache("v1.32.0")
    registry = registry_with_crontab()
    first = cache.get(registry, [crontab_crd()], 1)
    assert cache.get(registry, [crontab_crd()], 1) is first
    assert first.etag.startswith('"') and len(first.etag) == 2 + 128
    changed = json.loads(json.dumps(CRONTAB_SCHEMA))
    changed["properties"]["spec"]["properties"]["cronSpec"]["description"] = "changed"
    second = cache.get(registry, [crontab_crd(changed)], 2)
    assert second.etag != first.etag and b"changed" in second.json
    assert cache.get(registry, [crontab_crd()], 3).etag == first.etag


def test_cache_after_a_crd_change_equals_a_fresh_build() -> None:
    cache = openapi_v2.V2Cache("v1.32.0")
    cache.get(Registry(), [], 1)  # built-in parts cached, then reused below
    registry, crds = registry_with_crontab(), [crontab_crd()]
    incremental = cache.get(registry, crds, 2)
    fresh = openapi_v2.document(registry, crds, "v1.32.0")
    assert incremental.json == msgspec.json.encode(fresh)
    assert incremental.protobuf == openapi_v2.to_protobuf(fresh)
