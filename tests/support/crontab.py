"""A CustomResourceDefinition with a schema worth publishing (list-map keys, preserved unknown
fields, a status), for the OpenAPI tests: the apiserver's unit tests
(tests/unit/apiserver/test_schemas.py, test_openapi_v2.py) and tests/e2e/test_openapi.py."""

from __future__ import annotations

from typing import Any

from kcm_apiserver.registry import Registry, ResourceType

CRONTAB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A periodic job.",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "cronSpec": {"type": "string", "description": "The schedule."},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def crontab_crd(schema: dict[str, Any] = CRONTAB_SCHEMA) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {
                "plural": "crontabs",
                "singular": "crontab",
                "kind": "CronTab",
                "listKind": "CronTabList",
            },
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }


def registry_with_crontab() -> Registry:
    registry = Registry()
    registry.add(
        [
            ResourceType(
                group="stable.example.com",
                version="v1",
                resource="crontabs",
                kind="CronTab",
                namespaced=True,
                subresources=("status", "scale"),
            )
        ]
    )
    return registry
