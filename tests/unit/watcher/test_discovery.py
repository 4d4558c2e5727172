"""Which resources `--resources` and discovery select."""

from __future__ import annotations

from typing import Any

from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery as shared_discovery
from kcm_watcher import discovery

R = gvr.Resource


def listed(group: str, version: str, doc: dict[str, Any]) -> list[shared_discovery.ApiResource]:
    return shared_discovery.parse_resource_list(group, version, doc, preferred=True)


CORE_V1 = {
    "resources": [
        {"name": "pods", "verbs": ["create", "get", "list", "watch", "delete"]},
        {"name": "pods/status", "verbs": ["get", "patch", "update"]},
        {"name": "events", "verbs": ["list", "watch", "create"]},
        {"name": "bindings", "verbs": ["create"]},
        {"name": "componentstatuses", "verbs": ["get", "list"]},
    ]
}


def test_watchable_keeps_list_watch_resources_without_subresources_and_events() -> None:
    assert discovery.watchable(listed("", "v1", CORE_V1)) == [R("", "v1", "pods")]


def test_watchable_skips_events_k8s_io_events_and_metrics() -> None:
    events = {"resources": [{"name": "events", "verbs": ["list", "watch"]}]}
    assert discovery.watchable(listed("events.k8s.io", "v1", events)) == []
    assert (
        discovery.watchable(
            listed(
                "metrics.k8s.io",
                "v1beta1",
                {"resources": [{"name": "pods", "verbs": ["get", "list", "watch"]}]},
            )
        )
        == []
    )
    assert discovery.watchable(listed("example.com", "v1", events)) == [R("example.com", "v1", "events")]


def test_selection_star_with_explicit_extras_and_exclusions() -> None:
    sel = discovery.Selection.parse("*, v1/events, -apps/v1/deployments")
    found = [R("", "v1", "pods"), R("apps", "v1", "deployments")]
    assert sel.choose(found) == {R("", "v1", "pods"), R("", "v1", "events")}


def test_selection_explicit_list_ignores_discovery() -> None:
    sel = discovery.Selection.parse("v1/configmaps,core/v1/secrets,apps/v1/deployments")
    assert not sel.everything
    assert sel.choose([R("", "v1", "pods")]) == {
        R("", "v1", "configmaps"),
        R("", "v1", "secrets"),
        R("apps", "v1", "deployments"),
    }
