"""The API semantics controllers depend on, driven through the official Python client and raw HTTP."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from tests.conftest import ApiServer, kill_process, start_apiserver, wait_for


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
    }


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


@pytest.fixture(scope="module")
def core(apiserver: ApiServer) -> Iterator[k8s.CoreV1Api]:
    _, api_client = apiserver.client()
    yield k8s.CoreV1Api(api_client)
    api_client.close()


@pytest.fixture(scope="module")
def apps(apiserver: ApiServer) -> Iterator[k8s.AppsV1Api]:
    _, api_client = apiserver.client()
    yield k8s.AppsV1Api(api_client)
    api_client.close()


def http(
    server: ApiServer,
    method: str,
    path: str,
    body: Any = None,
    ctype: str = "application/json",
    **params: str,
) -> requests.Response:
    data = body if isinstance(body, (str, bytes)) or body is None else json.dumps(body)
    return requests.request(
        method, server.url + path, data=data, params=params, headers={"Content-Type": ctype}, timeout=10
    )


class TestMetadata:
    def test_create_sets_uid_timestamp_and_resource_version(self, core: k8s.CoreV1Api) -> None:
        created = core.create_namespaced_pod("default", pod("meta-a"))
        assert created.metadata.uid
        assert created.metadata.creation_timestamp is not None
        assert int(created.metadata.resource_version) > 0
        assert created.status.phase == "Pending"

    def test_resource_versions_are_monotonic_across_kinds(self, core: k8s.CoreV1Api) -> None:
        a = core.create_namespaced_config_map("default", {"metadata": {"name": "mono-a"}})
        b = core.create_namespaced_pod("default", pod("mono-b"))
        c = core.create_namespaced_config_map("default", {"metadata": {"name": "mono-c"}})
        assert (
            int(a.metadata.resource_version)
            < int(b.metadata.resource_version)
            < int(c.metadata.resource_version)
        )

    def test_generate_name_and_already_exists(self, core: k8s.CoreV1Api) -> None:
        made = core.create_namespaced_config_map("default", {"metadata": {"generateName": "gen-"}})
        assert made.metadata.name.startswith("gen-") and len(made.metadata.name) > 4
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map("default", {"metadata": {"name": made.metadata.name}})
        assert err.value.status == 409
        assert json.loads(err.value.body)["reason"] == "AlreadyExists"

    def test_stale_update_conflicts(self, core: k8s.CoreV1Api) -> None:
        cm = core.create_namespaced_config_map("default", {"metadata": {"name": "stale"}, "data": {"a": "1"}})
        cm.data = {"a": "2"}
        core.replace_namespaced_config_map("stale", "default", cm)
        cm.data = {"a": "3"}
        with pytest.raises(ApiException) as err:
            core.replace_namespaced_config_map("stale", "default", cm)
        body = json.loads(err.value.body)
        assert (err.value.status, body["reason"], body["kind"]) == (409, "Conflict", "Status")
        assert "the object has been modified" in body["message"]

    def test_generation_moves_on_spec_change_only(self, apps: k8s.AppsV1Api) -> None:
        d = apps.create_namespaced_deployment("default", deployment("gen-d"))
        assert d.metadata.generation == 1
        d = apps.patch_namespaced_deployment("gen-d", "default", {"metadata": {"labels": {"x": "y"}}})
        assert d.metadata.generation == 1
        d = apps.patch_namespaced_deployment("gen-d", "default", {"spec": {"replicas": 3}})
        assert d.metadata.generation == 2

    def test_deployment_annotation_change_bumps_generation(self, apiserver: ApiServer) -> None:
        # Upstream's Deployment strategy: annotations are copied to ReplicaSets, so they are desired state.
        apiserver.kubectl("create", "deployment", "gen-a", "--image=nginx:1")
        assert apiserver.kubectl_json("get", "deployment", "gen-a")["metadata"]["generation"] == 1
        apiserver.kubectl("annotate", "deployment", "gen-a", "team=blue")
        assert apiserver.kubectl_json("get", "deployment", "gen-a")["metadata"]["generation"] == 2
        apiserver.kubectl("label", "deployment", "gen-a", "tier=web")
        assert apiserver.kubectl_json("get", "deployment", "gen-a")["metadata"]["generation"] == 2

    def test_daemonset_template_generation_annotation(self, apiserver: ApiServer) -> None:
        key = "deprecated.daemonset.template.generation"
        ds = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "tg"},
            "spec": {
                "selector": {"matchLabels": {"app": "tg"}},
                "template": {
                    "metadata": {"labels": {"app": "tg"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
                },
            },
        }
        apiserver.kubectl("create", "-f", "-", input=json.dumps(ds))
        assert apiserver.kubectl_json("get", "ds", "tg")["metadata"]["annotations"][key] == "1"
        apiserver.kubectl("set", "image", "ds/tg", "c=nginx:2")
        got = apiserver.kubectl_json("get", "ds", "tg")
        assert (got["metadata"]["annotations"][key], got["metadata"]["generation"]) == ("2", 2)
        # A client's own value is ignored on update.
        apiserver.kubectl("annotate", "--overwrite", "ds", "tg", f"{key}=7")
        assert apiserver.kubectl_json("get", "ds", "tg")["metadata"]["annotations"][key] == "2"

    def test_hpa_behavior_defaults(self, apiserver: ApiServer) -> None:
        hpa = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "beh"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                "maxReplicas": 5,
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}},
            },
        }
        apiserver.kubectl("create", "-f", "-", input=json.dumps(hpa))
        behavior = apiserver.kubectl_json("get", "hpa.v2.autoscaling", "beh")["spec"]["behavior"]
        assert behavior["scaleUp"] == {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        }
        assert behavior["scaleDown"] == {
            "stabilizationWindowSeconds": 30,
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        }
        # Without a behavior there is nothing to fill in (`kubectl autoscale` sets none).
        apiserver.kubectl("create", "deployment", "hpa-target", "--image=nginx:1")
        apiserver.kubectl("autoscale", "deployment", "hpa-target", "--max=3", "--name=nobeh")
        assert "behavior" not in apiserver.kubectl_json("get", "hpa.v2.autoscaling", "nobeh")["spec"]

    def test_defaults_are_applied(self, apps: k8s.AppsV1Api) -> None:
        d = apps.create_namespaced_deployment("default", deployment("defaulted"))
        assert d.spec.strategy.type == "RollingUpdate"
        assert d.spec.strategy.rolling_update.max_surge == "25%"
        assert d.spec.revision_history_limit == 10
        assert d.spec.progress_deadline_seconds == 600

    def test_invalid_object_is_422_with_causes(self, apps: k8s.AppsV1Api) -> None:
        bad = deployment("bad-sel")
        bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
        with pytest.raises(ApiException) as err:
            apps.create_namespaced_deployment("default", bad)
        body = json.loads(err.value.body)
        assert err.value.status == 422 and body["reason"] == "Invalid"
        assert any(c["field"].startswith("spec.template.metadata.labels") for c in body["details"]["causes"])

    def test_dry_run_validates_and_stores_nothing(self, core: k8s.CoreV1Api) -> None:
        out = core.create_namespaced_pod("default", pod("dry"), dry_run="All")
        assert out.spec.restart_policy == "Always"
        with pytest.raises(ApiException) as err:
            core.read_namespaced_pod("dry", "default")
        assert err.value.status == 404


class TestList:
    def test_pagination_walks_every_item_once(self, core: k8s.CoreV1Api) -> None:
        core.create_namespace({"metadata": {"name": "paged"}})
        for i in range(7):
            core.create_namespaced_config_map("paged", {"metadata": {"name": f"cm-{i}"}})
        names, token, pages = [], None, 0
        while True:
            page = core.list_namespaced_config_map("paged", limit=3, _continue=token)
            names += [i.metadata.name for i in page.items]
            pages += 1
            token = page.metadata._continue
            if not token:
                break
            assert page.metadata.remaining_item_count == 7 - len(names)
        assert names == [f"cm-{i}" for i in range(7)] and pages == 3

    def test_label_selectors_equality_and_set_based(self, core: k8s.CoreV1Api) -> None:
        core.create_namespace({"metadata": {"name": "labels"}})
        core.create_namespaced_pod("labels", pod("p1", app="web", tier="front"))
        core.create_namespaced_pod("labels", pod("p2", app="web", tier="back"))
        core.create_namespaced_pod("labels", pod("p3", app="db"))

        def names(sel: str) -> list[str]:
            return [p.metadata.name for p in core.list_namespaced_pod("labels", label_selector=sel).items]

        assert names("app=web") == ["p1", "p2"]
        assert names("app=web,tier!=front") == ["p2"]
        assert names("tier in (front,back)") == ["p1", "p2"]
        assert names("!tier") == ["p3"]
        with pytest.raises(ApiException) as err:
            names("app in (")
        assert err.value.status == 400

    def test_field_selectors(self, core: k8s.CoreV1Api) -> None:
        core.create_namespace({"metadata": {"name": "fields"}})
        core.create_namespaced_pod("fields", pod("f1"))
        p2 = pod("f2")
        p2["spec"]["nodeName"] = "node-1"
        core.create_namespaced_pod("fields", p2)
        on_node = core.list_namespaced_pod("fields", field_selector="spec.nodeName=node-1").items
        assert [p.metadata.name for p in on_node] == ["f2"]
        by_name = core.list_pod_for_all_namespaces(
            field_selector="metadata.name=f1,metadata.namespace=fields"
        )
        assert [p.metadata.name for p in by_name.items] == ["f1"]
        with pytest.raises(ApiException) as err:
            core.list_namespaced_pod("fields", field_selector="spec.bogus=1")
        assert err.value.status == 400 and "field label not supported" in err.value.body


class TestWatch:
    def test_watch_from_list_resource_version_sees_later_changes(self, core: k8s.CoreV1Api) -> None:
        core.create_namespace({"metadata": {"name": "watched"}})
        listed = core.list_namespaced_config_map("watched")
        seen: list[tuple[str, str]] = []
        w = k8s_watch.Watch()

        def consume() -> None:
            for ev in w.stream(
                core.list_namespaced_config_map,
                "watched",
                resource_version=listed.metadata.resource_version,
                timeout_seconds=20,
            ):
                seen.append((ev["type"], ev["object"].metadata.name))
                if len(seen) == 3:
                    w.stop()

        t = threading.Thread(target=consume)
        t.start()
        core.create_namespaced_config_map("watched", {"metadata": {"name": "w1"}})
        core.patch_namespaced_config_map("w1", "watched", {"data": {"k": "v"}})
        core.delete_namespaced_config_map("w1", "watched")
        t.join(25)
        assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]

    def test_watch_from_zero_starts_with_current_state(self, core: k8s.CoreV1Api) -> None:
        core.create_namespace({"metadata": {"name": "zero"}})
        core.create_namespaced_config_map("zero", {"metadata": {"name": "existing"}})
        w = k8s_watch.Watch()
        first = next(
            iter(w.stream(core.list_namespaced_config_map, "zero", resource_version="0", timeout_seconds=5))
        )
        w.stop()
        assert (first["type"], first["object"].metadata.name) == ("ADDED", "existing")

    def test_bookmarks_arrive_when_allowed(self, apiserver: ApiServer) -> None:
        rv = http(apiserver, "GET", "/api/v1/namespaces/default/configmaps").json()["metadata"][
            "resourceVersion"
        ]
        with requests.get(
            apiserver.url + "/api/v1/namespaces/default/configmaps",
            stream=True,
            timeout=30,
            params={
                "watch": "true",
                "resourceVersion": rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "20",
            },
        ) as resp:
            line = next(resp.iter_lines())
        event = json.loads(line)
        assert event["type"] == "BOOKMARK"
        assert int(event["object"]["metadata"]["resourceVersion"]) >= int(rv)

    @pytest.mark.parametrize(
        ("accept", "kind", "api_version", "list_kind"),
        [
            ("application/json", "ConfigMap", "v1", "ConfigMapList"),
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                "PartialObjectMetadata",
                "meta.k8s.io/v1",
                "PartialObjectMetadataList",
            ),
        ],
    )
    def test_watch_list_ends_its_initial_events_as_kube_apiserver_does(
        self, apiserver: ApiServer, accept: str, kind: str, api_version: str, list_kind: str
    ) -> None:
        """client-go's watch-list (kube-controller-manager's informers) decodes every event as the
        kind it asked for, bookmarks too, and builds its list from the blueprint annotation; the
        expected values are what kube-apiserver v1.32 sends."""
        http(apiserver, "POST", "/api/v1/namespaces", {"metadata": {"name": "watchlist"}})
        http(apiserver, "POST", "/api/v1/namespaces/watchlist/configmaps", {"metadata": {"name": "one"}})
        events = []
        with requests.get(
            apiserver.url + "/api/v1/namespaces/watchlist/configmaps",
            stream=True,
            timeout=30,
            headers={"Accept": accept},
            params={
                "watch": "true",
                "sendInitialEvents": "true",
                "resourceVersionMatch": "NotOlderThan",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "20",
            },
        ) as resp:
            for line in resp.iter_lines():
                events.append(json.loads(line))
                if events[-1]["type"] == "BOOKMARK":
                    break
        assert [(e["type"], e["object"]["kind"], e["object"]["apiVersion"]) for e in events] == [
            ("ADDED", kind, api_version),
            ("BOOKMARK", kind, api_version),
        ]
        annotations = events[-1]["object"]["metadata"]["annotations"]
        blueprint = {"kind": list_kind, "apiVersion": api_version, "metadata": {}, "items": None}
        assert annotations == {
            "k8s.io/initial-events-end": "true",
            "kubernetes.io/initial-events-list-blueprint": base64.b64encode(
                json.dumps(blueprint, separators=(",", ":")).encode() + b"\n"
            ).decode(),
        }

    def test_label_selector_watch_turns_unmatching_update_into_deleted(self, core: k8s.CoreV1Api) -> None:
        core.create_namespace({"metadata": {"name": "selwatch"}})
        core.create_namespaced_config_map("selwatch", {"metadata": {"name": "s", "labels": {"keep": "yes"}}})
        rv = core.list_namespaced_config_map("selwatch").metadata.resource_version
        w = k8s_watch.Watch()
        events: list[str] = []

        def consume() -> None:
            for ev in w.stream(
                core.list_namespaced_config_map,
                "selwatch",
                label_selector="keep=yes",
                resource_version=rv,
                timeout_seconds=15,
            ):
                events.append(ev["type"])
                w.stop()

        t = threading.Thread(target=consume)
        t.start()
        core.patch_namespaced_config_map("s", "selwatch", {"metadata": {"labels": {"keep": "no"}}})
        t.join(20)
        assert events == ["DELETED"]


def test_too_old_resource_version_is_410(tmp_path: Path) -> None:
    server = start_apiserver(tmp_path / "small", "--watch-history", "5")
    try:
        _, api_client = server.client()
        core = k8s.CoreV1Api(api_client)
        old_rv = core.list_namespaced_config_map("default").metadata.resource_version
        for i in range(10):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"churn-{i}"}})
        with pytest.raises(ApiException) as err:
            for _ in k8s_watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old_rv, timeout_seconds=5
            ):
                pass
        assert err.value.status == 410
        # A recent version is still served.
        recent = core.list_namespaced_config_map("default").metadata.resource_version
        resp = requests.get(
            server.url + "/api/v1/namespaces/default/configmaps",
            timeout=10,
            params={"watch": "1", "resourceVersion": recent, "timeoutSeconds": "1"},
        )
        assert resp.status_code == 200 and "ERROR" not in resp.text
    finally:
        server.stop()


class TestSubresources:
    def test_status_ignores_spec_and_main_resource_ignores_status(self, apps: k8s.AppsV1Api) -> None:
        apps.create_namespaced_deployment("default", deployment("st", replicas=2))
        apps.patch_namespaced_deployment_status(
            "st", "default", {"spec": {"replicas": 9}, "status": {"replicas": 5}}
        )
        d = apps.read_namespaced_deployment("st", "default")
        assert (d.spec.replicas, d.status.replicas) == (2, 5)
        apps.patch_namespaced_deployment("st", "default", {"status": {"replicas": 1}})
        assert apps.read_namespaced_deployment("st", "default").status.replicas == 5

    def test_status_write_keeps_annotations_but_not_labels_of_a_deployment(self, apps: k8s.AppsV1Api) -> None:
        # As upstream's status strategy: the deployment controller writes its revision this way.
        apps.create_namespaced_deployment("default", deployment("st-meta"))
        body = {
            "metadata": {"annotations": {"deployment.kubernetes.io/revision": "1"}, "labels": {"x": "y"}},
            "status": {"observedGeneration": 1},
        }
        d = apps.patch_namespaced_deployment_status("st-meta", "default", body)
        assert d.metadata.annotations == {"deployment.kubernetes.io/revision": "1"}
        assert not d.metadata.labels
        assert (d.metadata.generation, d.status.observed_generation) == (1, 1)

    def test_status_write_keeps_pod_labels(self, core: k8s.CoreV1Api) -> None:
        core.create_namespaced_pod("default", pod("st-pod"))
        p = core.read_namespaced_pod_status("st-pod", "default")
        p.metadata.labels = {"seen": "yes"}
        p.status.message = "hello"
        p = core.replace_namespaced_pod_status("st-pod", "default", p)
        assert (p.metadata.labels, p.status.message) == ({"seen": "yes"}, "hello")

    def test_scale_reads_and_writes_replicas(self, apps: k8s.AppsV1Api) -> None:
        apps.create_namespaced_deployment("default", deployment("sc", replicas=2))
        scale = apps.read_namespaced_deployment_scale("sc", "default")
        assert scale.spec.replicas == 2 and scale.status.selector == "app=sc"
        apps.patch_namespaced_deployment_scale("sc", "default", {"spec": {"replicas": 4}})
        assert apps.read_namespaced_deployment("sc", "default").spec.replicas == 4

    def test_binding_assigns_a_node_once(self, core: k8s.CoreV1Api) -> None:
        core.create_namespaced_pod("default", pod("bindme"))
        target = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "bindme"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
        }
        core.create_namespaced_pod_binding("bindme", "default", target, _preload_content=False)
        bound = core.read_namespaced_pod("bindme", "default")
        assert bound.spec.node_name == "n1"
        assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_binding("bindme", "default", target, _preload_content=False)
        assert err.value.status == 409

    def test_eviction_honours_disruption_budget(self, apiserver: ApiServer, core: k8s.CoreV1Api) -> None:
        _, api_client = apiserver.client()
        policy = k8s.PolicyV1Api(api_client)
        core.create_namespace({"metadata": {"name": "evict"}})
        running = pod("guarded", app="g")
        core.create_namespaced_pod("evict", running)
        # Ready: a pod that is not may go while the budget is met (IfHealthyBudget), as upstream.
        ready = {"type": "Ready", "status": "True"}
        core.patch_namespaced_pod_status(
            "guarded", "evict", {"status": {"phase": "Running", "conditions": [ready]}}
        )
        policy.create_namespaced_pod_disruption_budget(
            "evict",
            {
                "metadata": {"name": "pdb"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "g"}}},
            },
        )
        policy.patch_namespaced_pod_disruption_budget_status(
            "pdb",
            "evict",
            {
                "status": {
                    "disruptionsAllowed": 0,
                    "currentHealthy": 1,
                    "desiredHealthy": 1,
                    "expectedPods": 1,
                    "observedGeneration": 1,
                }
            },
        )
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded"}}
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_eviction("guarded", "evict", eviction)
        assert err.value.status == 429
        assert json.loads(err.value.body)["details"]["causes"][0]["reason"] == "DisruptionBudget"
        policy.patch_namespaced_pod_disruption_budget_status(
            "pdb", "evict", {"status": {"disruptionsAllowed": 1}}
        )
        core.create_namespaced_pod_eviction("guarded", "evict", eviction)
        with pytest.raises(ApiException) as gone:
            core.read_namespaced_pod("guarded", "evict")
        assert gone.value.status == 404
        budget = policy.read_namespaced_pod_disruption_budget("pdb", "evict")
        assert budget.status.disruptions_allowed == 0 and "guarded" in budget.status.disrupted_pods
        # Taking the last disruption flips the condition in the same write (upstream).
        cond = budget.status.conditions[0]
        assert (cond.type, cond.status, cond.reason) == ("DisruptionAllowed", "False", "InsufficientPods")

    def test_evicted_pod_gets_disruption_target_before_its_deletion(self, core: k8s.CoreV1Api) -> None:
        core.create_namespace({"metadata": {"name": "evict-cond"}})
        running = pod("leaving")
        running["spec"]["nodeName"] = "node-1"  # a pod on a node terminates gracefully
        made = core.create_namespaced_pod("evict-cond", running)
        # A resourceVersion precondition holds the pod as the client read it; upstream moves it
        # past the condition's own write, so the delete still lands.
        options = {"preconditions": {"resourceVersion": made.metadata.resource_version}}
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "leaving"},
            "deleteOptions": options,
        }
        core.create_namespaced_pod_eviction("leaving", "evict-cond", eviction)
        left = core.read_namespaced_pod("leaving", "evict-cond")
        assert left.metadata.deletion_timestamp is not None
        target = next(c for c in left.status.conditions if c.type == "DisruptionTarget")
        assert (target.status, target.reason, target.message) == (
            "True",
            "EvictionByEvictionAPI",
            "Eviction API: evicting",
        )
        # A stale precondition is refused before anything is written.
        core.create_namespaced_pod("evict-cond", pod("stays"))
        stale = {**eviction, "metadata": {"name": "stays"}}
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_eviction("stays", "evict-cond", stale)
        assert err.value.status == 409
        assert "does not match the ResourceVersion in record" in json.loads(err.value.body)["message"]
        assert core.read_namespaced_pod("stays", "evict-cond").status.conditions is None


class TestDeletion:
    def test_finalizers_hold_the_object_until_removed(self, core: k8s.CoreV1Api) -> None:
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "fin", "finalizers": ["example.com/x"]}}
        )
        core.delete_namespaced_config_map("fin", "default")
        held = core.read_namespaced_config_map("fin", "default")
        assert held.metadata.deletion_timestamp is not None
        core.patch_namespaced_config_map("fin", "default", {"metadata": {"finalizers": None}})
        with pytest.raises(ApiException) as err:
            core.read_namespaced_config_map("fin", "default")
        assert err.value.status == 404

    @pytest.mark.parametrize(
        ("policy", "finalizer"), [("Foreground", "foregroundDeletion"), ("Orphan", "orphan")]
    )
    def test_propagation_policy_adds_its_finalizer(
        self, apps: k8s.AppsV1Api, policy: str, finalizer: str
    ) -> None:
        name = f"prop-{policy.lower()}"
        apps.create_namespaced_deployment("default", deployment(name))
        apps.delete_namespaced_deployment(name, "default", propagation_policy=policy)
        d = apps.read_namespaced_deployment(name, "default")
        assert d.metadata.finalizers == [finalizer] and d.metadata.deletion_timestamp is not None

    def test_background_deletes_at_once(self, apps: k8s.AppsV1Api) -> None:
        apps.create_namespaced_deployment("default", deployment("prop-bg"))
        apps.delete_namespaced_deployment("prop-bg", "default", propagation_policy="Background")
        with pytest.raises(ApiException) as err:
            apps.read_namespaced_deployment("prop-bg", "default")
        assert err.value.status == 404

    def test_preconditions_are_checked(self, core: k8s.CoreV1Api) -> None:
        core.create_namespaced_config_map("default", {"metadata": {"name": "precond"}})
        with pytest.raises(ApiException) as err:
            core.delete_namespaced_config_map("precond", "default", body={"preconditions": {"uid": "nope"}})
        assert err.value.status == 409

    def test_bound_pods_delete_gracefully_unbound_at_once(self, core: k8s.CoreV1Api) -> None:
        core.create_namespaced_pod("default", pod("unbound"))
        core.delete_namespaced_pod("unbound", "default")
        with pytest.raises(ApiException):
            core.read_namespaced_pod("unbound", "default")
        bound = pod("bound")
        bound["spec"]["nodeName"] = "n1"
        core.create_namespaced_pod("default", bound)
        core.delete_namespaced_pod("bound", "default")
        p = core.read_namespaced_pod("bound", "default")
        assert p.metadata.deletion_timestamp is not None and p.metadata.deletion_grace_period_seconds == 30
        core.delete_namespaced_pod("bound", "default", grace_period_seconds=0)
        with pytest.raises(ApiException) as err:
            core.read_namespaced_pod("bound", "default")
        assert err.value.status == 404


class TestNamespaces:
    def test_system_namespaces_exist(self, core: k8s.CoreV1Api) -> None:
        names = {n.metadata.name for n in core.list_namespace().items}
        assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names

    def test_missing_namespace_is_404(self, core: k8s.CoreV1Api) -> None:
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map("nowhere", {"metadata": {"name": "x"}})
        assert err.value.status == 404

    def test_terminating_namespace_refuses_content_until_finalized(self, core: k8s.CoreV1Api) -> None:
        core.create_namespace({"metadata": {"name": "doomed"}})
        core.delete_namespace("doomed")
        ns = core.read_namespace("doomed")
        assert ns.status.phase == "Terminating" and ns.spec.finalizers == ["kubernetes"]
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map("doomed", {"metadata": {"name": "late"}})
        assert err.value.status == 403
        causes = json.loads(err.value.body)["details"]["causes"]
        assert [c["reason"] for c in causes] == ["NamespaceTerminating"], causes
        ns.spec.finalizers = []
        core.replace_namespace_finalize("doomed", ns)
        with pytest.raises(ApiException) as gone:
            core.read_namespace("doomed")
        assert gone.value.status == 404


class TestHttpSurface:
    def test_errors_are_status_objects(self, apiserver: ApiServer) -> None:
        resp = http(apiserver, "GET", "/api/v1/namespaces/default/pods/none")
        body = resp.json()
        assert resp.status_code == 404
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'pods "none" not found',
            "reason": "NotFound",
            "code": 404,
            "details": {"name": "none", "kind": "pods"},
        }

    def test_undecodable_body_is_400(self, apiserver: ApiServer) -> None:
        resp = http(apiserver, "POST", "/api/v1/namespaces/default/configmaps", "{not json")
        assert resp.status_code == 400 and resp.json()["reason"] == "BadRequest"

    def test_version_health_and_discovery(self, apiserver: ApiServer) -> None:
        assert http(apiserver, "GET", "/version").json()["major"] == "1"
        for path in ("/healthz", "/livez", "/readyz"):
            assert http(apiserver, "GET", path).text == "ok"
        groups = {g["name"] for g in http(apiserver, "GET", "/apis").json()["groups"]}
        assert {
            "apps",
            "batch",
            "coordination.k8s.io",
            "discovery.k8s.io",
            "policy",
            "autoscaling",
            "certificates.k8s.io",
            "rbac.authorization.k8s.io",
            "storage.k8s.io",
            "events.k8s.io",
            "apiextensions.k8s.io",
        } <= groups
        core = {r["name"]: r for r in http(apiserver, "GET", "/api/v1").json()["resources"]}
        assert core["pods"]["shortNames"] == ["po"] and "pods/eviction" in core
        assert core["nodes"]["namespaced"] is False


def test_state_survives_restart_with_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_apiserver(tmp_path / "one", "--data-dir", str(data))
    try:
        _, c = first.client()
        made = k8s.CoreV1Api(c).create_namespaced_config_map(
            "default", {"metadata": {"name": "kept"}, "data": {"a": "b"}}
        )
    finally:
        first.stop()
    second = start_apiserver(tmp_path / "two", "--data-dir", str(data))
    try:
        _, c = second.client()
        core = k8s.CoreV1Api(c)
        kept = core.read_namespaced_config_map("kept", "default")
        assert kept.data == {"a": "b"} and kept.metadata.uid == made.metadata.uid
        newer = core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
        assert int(newer.metadata.resource_version) > int(made.metadata.resource_version)
    finally:
        second.stop()


def test_answered_writes_survive_kill_with_data_dir(tmp_path: Path) -> None:
    """Writes are committed in groups, yet none is answered before it is committed: every
    object a client saw created or changed is there after a kill -9 right after the last
    answer, at the version the answer gave."""
    data = tmp_path / "data"
    first = start_apiserver(tmp_path / "one", "--data-dir", str(data))
    path = "/api/v1/namespaces/default/configmaps"
    url = first.url + path
    answered: dict[str, str] = {}
    lock = threading.Lock()

    def writer(worker: int) -> None:
        with requests.Session() as s:
            for i in range(40):
                name = f"w{worker}-{i}"
                made = s.post(url, json={"metadata": {"name": name}, "data": {"v": "1"}}, timeout=10)
                assert made.status_code == 201, made.text
                changed = s.patch(
                    f"{url}/{name}",
                    json={"data": {"v": "2"}},
                    headers={"Content-Type": "application/merge-patch+json"},
                    timeout=10,
                )
                assert changed.status_code == 200, changed.text
                with lock:
                    answered[name] = changed.json()["metadata"]["resourceVersion"]

    try:
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        kill_process(first.proc)
    assert len(answered) == 320
    second = start_apiserver(tmp_path / "two", "--data-dir", str(data))
    try:
        items = requests.get(second.url + path, timeout=10).json()["items"]
        kept = {cm["metadata"]["name"]: cm for cm in items if cm["metadata"]["name"] in answered}
        assert set(kept) == set(answered)
        for name, rv in answered.items():
            assert kept[name]["data"] == {"v": "2"}, name
            assert kept[name]["metadata"]["resourceVersion"] == rv, name
    finally:
        second.stop()


def test_token_required_off_loopback(tmp_path: Path) -> None:
    server = start_apiserver(tmp_path / "tok", "--bind", "0.0.0.0", "--token", "s3cret")
    try:
        assert requests.get(server.url + "/api/v1/namespaces", timeout=5).status_code == 401
        ok = requests.get(
            server.url + "/api/v1/namespaces", headers={"Authorization": "Bearer s3cret"}, timeout=5
        )
        assert ok.status_code == 200
        wait_for(lambda: "s3cret" in server.kubeconfig.read_text(), 5, what="token in kubeconfig")
    finally:
        server.stop()
