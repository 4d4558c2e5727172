"""tools/differential: the normalization that makes two runs comparable, and the scenario set."""

from __future__ import annotations

from typing import Any

from kcm_cli.controllers import BUILTIN

from tools.differential import __main__ as differential
from tools.differential import normalize


def _pod(ns: str, name: str, rs: str, hash_: str, ip: str, ready: str = "True") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "generateName": f"{rs}-",
            "uid": "0b5b6c4e-1111-4000-8000-000000000000"
            if ns.endswith("a")
            else "9d9d9d9d-2222-4000-8000-00000000",
            "resourceVersion": "17" if ns.endswith("a") else "901",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": hash_},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": rs, "uid": "0b5b6c4e-1111-4000-8000-000000000001"}
            ],
        },
        "spec": {"nodeName": "sim-node-1" if ns.endswith("a") else "sim-node-2"},
        "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": ready}]},
    }


def _run(ns: str, hash_: str, pods: list[tuple[str, str]], events: list[tuple[str, str]]) -> normalize.Run:
    rs = f"web-{hash_}"
    objects: list[dict[str, Any]] = [
        {
            "kind": "ReplicaSet",
            "metadata": {
                "name": rs,
                "namespace": ns,
                "labels": {"pod-template-hash": hash_},
                "annotations": {"deployment.kubernetes.io/revision": "1"},
                "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "x"}],
            },
            "status": {"replicas": len(pods)},
        },
        *(_pod(ns, f"{rs}-{suffix}", rs, hash_, ip) for suffix, ip in pods),
    ]
    for i, (reason, message) in enumerate(events):
        objects.append(
            {
                "kind": "Event",
                "metadata": {"name": f"e{i}", "namespace": ns},
                "involvedObject": {"kind": "ReplicaSet", "name": rs},
                "type": "Normal",
                "reason": reason,
                "message": message.format(rs=rs, ns=ns),
                "firstTimestamp": f"2026-01-01T00:00:0{i}Z",
                "source": {"component": "replicaset-controller"},
            }
        )
    return normalize.Run(namespace=ns, objects=objects)


def test_runs_that_differ_only_in_what_is_masked_are_equal() -> None:
    a = _run(
        "web-a",
        "5c97c79d9c",
        [("bxq7z", "10.244.1.5"), ("k2v9w", "10.244.2.7")],
        [("SuccessfulCreate", "Created pod: {rs}-bxq7z in {ns}")],
    )
    b = _run(
        "web-b",
        "5c97c79d9c",
        [("p8t4n", "10.244.0.9"), ("zz2mm", "10.244.1.3")],
        [("SuccessfulCreate", "Created pod: {rs}-mm7qf in {ns}")],
    )
    assert normalize.compare(a, b) == []


def test_a_hash_of_another_value_is_one_difference_and_masked_elsewhere() -> None:
    a = _run("web-a", "5c97c79d9c", [("bxq7z", "10.244.1.5")], [])
    b = _run("web-b", "cc767654", [("p8t4n", "10.244.0.9")], [])
    assert [d.line() for d in normalize.compare(a, b)] == [
        "ReplicaSet of Deployment/web: pod-template-hash at rev1: reference 5c97c79d9c, kcm cc767654"
    ]


def test_fields_conditions_counts_and_events_in_order_differ() -> None:
    a = _run("web-a", "5c97c79d9c", [("bxq7z", "10.244.1.5")], [("A", "first"), ("B", "second")])
    b = _run(
        "web-b",
        "5c97c79d9c",
        [("p8t4n", "10.244.0.9"), ("zz2mm", "10.244.1.3")],
        [("B", "second"), ("A", "first")],
    )
    b.objects[1]["status"]["conditions"][0]["status"] = "False"
    lines = [d.line() for d in normalize.compare(a, b)]
    assert "Pod/web-<hash@rev1>-<gen>: count: reference 1, kcm 2" in lines
    assert "ReplicaSet/web-<hash@rev1>: status.replicas: reference 1, kcm 2" in lines
    # One object's Events are a sequence: the same two in another order differ.
    assert any(line.startswith("Events of ReplicaSet/web-<hash@rev1>") for line in lines)


def test_a_volumes_claim_ref_resource_version_is_masked_and_its_name_is_not() -> None:
    def run(ns: str, rv: str, claim: str) -> normalize.Run:
        ref = {"kind": "PersistentVolumeClaim", "namespace": ns, "name": claim, "resourceVersion": rv}
        volume = {"kind": "PersistentVolume", "metadata": {"name": f"{ns}-pv"}, "spec": {"claimRef": ref}}
        return normalize.Run(namespace=ns, objects=[], captures={"bound": [volume]})

    assert normalize.compare(run("pv-a", "291", "data"), run("pv-b", "827", "data")) == []
    (diff,) = normalize.compare(run("pv-a", "291", "data"), run("pv-b", "827", "other"))
    assert diff.where.endswith("spec.claimRef.name")


def test_keyed_lists_keep_their_order_as_a_leaf() -> None:
    flat = normalize.flatten({"ports": [{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]})
    assert flat["ports#order"] == ["http", "metrics"]
    assert (flat["ports[http].port"], flat["ports[metrics].port"]) == (80, 9090)
    swapped = {"ports": [{"name": "metrics", "port": 9090}, {"name": "http", "port": 80}]}
    assert normalize.flatten(swapped)["ports#order"] == ["metrics", "http"]


def test_unkeyed_lists_compare_in_an_order_of_their_own_contents() -> None:
    # Endpoints subsets: upstream orders addresses by IP and subsets by a hash of IPs and uids,
    # all masked, so two runs may hold the same subsets in other orders.
    def subsets(p1_first: bool) -> dict[str, Any]:
        p1, p3 = (
            {"ip": "<pod-ip>", "targetRef": {"name": "p1"}},
            {"ip": "<pod-ip>", "targetRef": {"name": "p3"}},
        )
        both = [p1, p3] if p1_first else [p3, p1]
        metrics = {"addresses": both, "ports": [{"name": "metrics", "port": 9090}]}
        http = {"addresses": [p1], "ports": [{"name": "http", "port": 8080}]}
        return {"subsets": [metrics, http] if p1_first else [http, metrics]}

    assert normalize.flatten(subsets(True)) == normalize.flatten(subsets(False))


def test_every_built_in_controller_has_a_scenario_and_known_differences_name_scenarios() -> None:
    names = {path.stem for path in differential.scenarios([])}
    assert {spec.alias for spec in BUILTIN} <= names
    assert set(differential.known()) <= names | {differential.ANY}


def test_the_simulators_own_events_are_not_compared() -> None:
    """Scheduled and Pulled come from the simulator on both sides: which node and when is its
    timing; the controllers' Events are still compared."""
    a = _run("web-a", "5c97c79d9c", [("bxq7z", "10.244.1.5")], [("A", "first")])
    b = _run("web-b", "5c97c79d9c", [("p8t4n", "10.244.0.9")], [("A", "first")])
    for i, (component, node) in enumerate((("default-scheduler", "sim-node-0"), ("kubelet", "sim-node-0"))):
        event = {**a.objects[-1], "metadata": {"name": f"sim{i}", "namespace": "web-a"}}
        event["reason"], event["message"] = "Scheduled", f"to {node}"
        event["source"] = {"component": component}
        a.objects.append(event)
    assert normalize.compare(a, b) == []
    b.objects[-1] = {**b.objects[-1], "reason": "B"}
    assert normalize.compare(a, b) != []
