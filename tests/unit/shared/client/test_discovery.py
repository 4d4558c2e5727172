"""The REST mapper the garbage collector builds from discovery (kcm_shared.client.discovery)."""

from __future__ import annotations

import pytest
from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery

CORE = {
    "resources": [
        {
            "name": "configmaps",
            "kind": "ConfigMap",
            "namespaced": True,
            "verbs": ["create", "delete", "get", "list", "watch"],
        },
        {"name": "pods/status", "kind": "Pod", "namespaced": True, "verbs": ["get", "patch"]},
        {"name": "nodes", "kind": "Node", "namespaced": False, "verbs": ["delete", "get", "list", "watch"]},
        {"name": "bindings", "kind": "Binding", "namespaced": True, "verbs": ["create"]},
    ]
}
DEPLOYMENTS = {
    "name": "deployments",
    "kind": "Deployment",
    "namespaced": True,
    "verbs": ["delete", "list", "watch"],
}
APPS_V1 = {"resources": [DEPLOYMENTS]}
APPS_V1BETA1 = {"resources": [DEPLOYMENTS]}


def mapper() -> discovery.Mapper:
    resources = discovery.parse_resource_list("", "v1", CORE, preferred=True)
    resources += discovery.parse_resource_list("apps", "v1", APPS_V1, preferred=True)
    resources += discovery.parse_resource_list("apps", "v1beta1", APPS_V1BETA1, preferred=False)
    return discovery.Mapper(tuple(resources))


@pytest.mark.parametrize(
    ("api_version", "kind", "resource", "namespaced"),
    [
        ("v1", "ConfigMap", gvr.Resource("", "v1", "configmaps"), True),
        ("v1", "Node", gvr.Resource("", "v1", "nodes"), False),
        ("apps/v1", "Deployment", gvr.Resource("apps", "v1", "deployments"), True),
        ("apps/v1beta1", "Deployment", gvr.Resource("apps", "v1beta1", "deployments"), True),
    ],
)
def test_kind_maps_to_resource(api_version: str, kind: str, resource: gvr.Resource, namespaced: bool) -> None:
    found = mapper().for_kind(api_version, kind)
    assert (found.resource, found.namespaced) == (resource, namespaced)


@pytest.mark.parametrize(
    ("api_version", "kind"), [("v1", "Widget"), ("apps/v2", "Deployment"), ("bogus", "ConfigMap")]
)
def test_unknown_kind_is_a_mapping_error(api_version: str, kind: str) -> None:
    with pytest.raises(discovery.MappingError):
        mapper().for_kind(api_version, kind)


def test_preferred_with_verbs_skips_subresources_and_other_versions() -> None:
    got = {str(r.resource) for r in mapper().preferred_with(("delete", "list", "watch"))}
    assert got == {"core/v1/configmaps", "core/v1/nodes", "apps/v1/deployments"}


def test_api_version() -> None:
    assert discovery.api_version(gvr.Resource("", "v1", "pods")) == "v1"
    assert discovery.api_version(gvr.Resource("apps", "v1", "deployments")) == "apps/v1"
