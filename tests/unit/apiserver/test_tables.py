"""Server-side Table rendering: upstream's columns and cells per kind, and the Table envelope."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kcm_apiserver.tables import human_duration, table_for_watch_event, to_table

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
SECOND, MINUTE, HOUR, DAY = 1.0, 60.0, 3600.0, 86400.0
MS = 0.001
NS = 1e-9
YEAR = 365 * DAY


def ago(seconds: float) -> str:
    return datetime.fromtimestamp(NOW.timestamp() - seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "creationTimestamp": ago(5 * MINUTE), **extra}


def cells(group: str, kind: str, obj: dict[str, Any]) -> list[Any]:
    row: list[Any] = to_table(group, kind, [obj], now=NOW)["rows"][0]["cells"]
    return row


def column_names(table: dict[str, Any], wide: bool = False) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"] if wide or c["priority"] == 0]


# --- human_duration: upstream duration_test.go ---------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "want"),
    [
        (SECOND, "1s"),
        (70 * SECOND, "70s"),
        (190 * SECOND, "3m10s"),
        (70 * MINUTE, "70m"),
        (47 * HOUR, "47h"),
        (49 * HOUR, "2d1h"),
        ((8 * 24 + 2) * HOUR, "8d"),
        (367 * 24 * HOUR, "367d"),
        ((365 * 2 * 24 + 25) * HOUR, "2y1d"),
        ((365 * 8 * 24 + 2) * HOUR, "8y"),
        # TestHumanDurationBoundaries
        (-2 * SECOND, "<invalid>"),
        (-2 * SECOND + NS, "0s"),
        (0, "0s"),
        (SECOND - MS, "0s"),
        (2 * MINUTE - MS, "119s"),
        (2 * MINUTE, "2m"),
        (2 * MINUTE + SECOND, "2m1s"),
        (10 * MINUTE - MS, "9m59s"),
        (10 * MINUTE, "10m"),
        (10 * MINUTE + SECOND, "10m"),
        (3 * HOUR - MS, "179m"),
        (3 * HOUR, "3h"),
        (3 * HOUR + MINUTE, "3h1m"),
        (8 * HOUR - MS, "7h59m"),
        (8 * HOUR, "8h"),
        (8 * HOUR + 59 * MINUTE, "8h"),
        (2 * DAY - MS, "47h"),
        (2 * DAY, "2d"),
        (2 * DAY + HOUR, "2d1h"),
        (8 * DAY - MS, "7d23h"),
        (8 * DAY, "8d"),
        (8 * DAY + 23 * HOUR, "8d"),
        (2 * YEAR - MS, "729d"),
        (2 * YEAR, "2y"),
        (2 * YEAR + 23 * HOUR, "2y"),
        (2 * YEAR + 23 * HOUR + 59 * MINUTE, "2y"),
        (2 * YEAR + DAY - MS, "2y"),
        (2 * YEAR + DAY, "2y1d"),
        (3 * YEAR, "3y"),
        (4 * YEAR, "4y"),
        (5 * YEAR, "5y"),
        (6 * YEAR, "6y"),
        (7 * YEAR, "7y"),
        (8 * YEAR - MS, "7y364d"),
        (8 * YEAR, "8y"),
        (8 * YEAR + 364 * DAY, "8y"),
        (9 * YEAR, "9y"),
    ],
)
def test_human_duration_matches_upstream(seconds: float, want: str) -> None:
    assert human_duration(seconds) == want


# --- Pod -------------------------------------------------------------------------------------------


def pod(
    *,
    phase: str = "Running",
    statuses: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    containers: int = 1,
    conditions: list[dict[str, Any]] | None = None,
    **meta_extra: Any,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": "img"} for i in range(containers)]}
    if init_containers is not None:
        spec["initContainers"] = init_containers
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta("p", **meta_extra),
        "spec": spec,
        "status": status,
    }


RUNNING = {"name": "c0", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": ago(HOUR)}}}
READY = [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]


@pytest.mark.parametrize(
    ("obj", "ready", "status", "restarts"),
    [
        pytest.param(pod(statuses=[RUNNING], conditions=READY), "1/1", "Running", "0", id="running"),
        pytest.param(
            pod(
                statuses=[
                    {
                        **RUNNING,
                        "restartCount": 3,
                        "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(2 * MINUTE)}},
                    }
                ],
                conditions=READY,
            ),
            "1/1",
            "Running",
            "3 (2m ago)",
            id="running-with-restarts",
        ),
        pytest.param(
            pod(
                phase="Pending",
                statuses=[
                    {"name": "c0", "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}
                ],
            ),
            "0/1",
            "ContainerCreating",
            "0",
            id="pending-waiting-reason",
        ),
        pytest.param(
            pod(
                phase="Running",
                statuses=[
                    {
                        "name": "c0",
                        "ready": False,
                        "restartCount": 5,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    }
                ],
            ),
            "0/1",
            "CrashLoopBackOff",
            "5",
            id="crashloop-without-last-state",
        ),
        pytest.param(pod(phase="Pending"), "0/1", "Pending", "0", id="pending-unscheduled"),
        pytest.param(
            pod(
                phase="Succeeded",
                statuses=[
                    {
                        "name": "c0",
                        "ready": False,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                    }
                ],
            ),
            "0/1",
            "Completed",
            "0",
            id="completed",
        ),
        pytest.param(
            pod(phase="Failed", statuses=[{"name": "c0", "state": {"terminated": {"exitCode": 137}}}]),
            "0/1",
            "ExitCode:137",
            "0",
            id="failed-exit-code",
        ),
        pytest.param(
            pod(
                phase="Failed",
                statuses=[{"name": "c0", "state": {"terminated": {"exitCode": 0, "signal": 9}}}],
            ),
            "0/1",
            "Signal:9",
            "0",
            id="failed-signal",
        ),
        pytest.param(
            pod(
                containers=2,
                statuses=[
                    {
                        "name": "c0",
                        "ready": False,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                    },
                    {**RUNNING, "name": "c1"},
                ],
                conditions=[{"type": "Ready", "status": "False"}],
            ),
            "1/2",
            "NotReady",
            "0",
            id="completed-container-beside-running-one",
        ),
        pytest.param(
            pod(statuses=[RUNNING], conditions=READY, deletionTimestamp=ago(SECOND)),
            "1/1",
            "Terminating",
            "0",
            id="terminating",
        ),
        pytest.param(
            pod(phase="Succeeded", deletionTimestamp=ago(SECOND)),
            "0/1",
            "Succeeded",
            "0",
            id="terminal-not-terminating",
        ),
        pytest.param(
            {**pod(deletionTimestamp=ago(SECOND)), "status": {"phase": "Running", "reason": "NodeLost"}},
            "0/1",
            "Unknown",
            "0",
            id="node-lost",
        ),
        pytest.param(
            pod(
                phase="Pending",
                conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
            ),
            "0/1",
            "SchedulingGated",
            "0",
            id="scheduling-gated",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init_containers=[{"name": "i0"}, {"name": "i1"}],
                init_statuses=[
                    {"name": "i0", "state": {"terminated": {"exitCode": 0}}},
                    {"name": "i1", "state": {"running": {}}},
                ],
                statuses=[{"name": "c0", "state": {"waiting": {"reason": "PodInitializing"}}}],
            ),
            "0/1",
            "Init:1/2",
            "0",
            id="init-progress",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init_containers=[{"name": "i0"}],
                init_statuses=[
                    {"name": "i0", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ],
            ),
            "0/1",
            "Init:CrashLoopBackOff",
            "4",
            id="init-waiting-reason",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init_containers=[{"name": "i0"}],
                init_statuses=[{"name": "i0", "state": {"terminated": {"exitCode": 2}}}],
            ),
            "0/1",
            "Init:ExitCode:2",
            "0",
            id="init-failed",
        ),
        pytest.param(
            pod(
                init_containers=[{"name": "sidecar", "restartPolicy": "Always"}],
                init_statuses=[{"name": "sidecar", "started": True, "ready": True, "state": {"running": {}}}],
                statuses=[RUNNING],
                conditions=READY,
            ),
            "2/2",
            "Running",
            "0",
            id="restartable-sidecar-counts",
        ),
    ],
)
def test_pod_ready_status_and_restarts_follow_upstream(
    obj: dict[str, Any], ready: str, status: str, restarts: str
) -> None:
    assert cells("", "Pod", obj)[1:4] == [ready, status, restarts]


def test_pod_columns_and_wide_cells() -> None:
    obj = pod(statuses=[RUNNING], conditions=[*READY, {"type": "example.com/gate", "status": "True"}])
    obj["spec"]["nodeName"] = "node-1"
    obj["spec"]["readinessGates"] = [{"conditionType": "example.com/gate"}, {"conditionType": "other"}]
    obj["status"]["podIPs"] = [{"ip": "10.1.2.3"}]
    table = to_table("", "Pod", [obj], now=NOW)
    assert column_names(table) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert column_names(table, wide=True)[5:] == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    assert table["rows"][0]["cells"] == [
        "p",
        "1/1",
        "Running",
        "0",
        "5m",
        "10.1.2.3",
        "node-1",
        "<none>",
        "1/2",
    ]


@pytest.mark.parametrize(
    ("phase", "want"),
    [
        (
            "Succeeded",
            [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": "The pod has completed successfully.",
                }
            ],
        ),
        (
            "Failed",
            [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}],
        ),
        ("Running", None),
    ],
)
def test_finished_pods_carry_a_completed_row_condition(phase: str, want: list[dict[str, str]] | None) -> None:
    row = to_table("", "Pod", [pod(phase=phase)], now=NOW)["rows"][0]
    assert row.get("conditions") == want


# --- workloads -------------------------------------------------------------------------------------


def test_deployment_cells() -> None:
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta("web"),
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]}],
            },
            "template": {
                "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]}
            },
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    table = to_table("apps", "Deployment", [deploy], now=NOW)
    assert column_names(table, wide=True) == [
        "Name",
        "Ready",
        "Up-to-date",
        "Available",
        "Age",
        "Containers",
        "Images",
        "Selector",
    ]
    assert table["rows"][0]["cells"] == [
        "web",
        "2/3",
        3,
        2,
        "5m",
        "a,b",
        "nginx,busybox",
        "app=web,tier in (be,fe)",
    ]


def test_statefulset_and_daemonset_cells() -> None:
    sts = {
        "metadata": meta("db"),
        "spec": {"replicas": 2, "template": {"spec": {"containers": []}}},
        "status": {},
    }
    assert cells("apps", "StatefulSet", sts) == ["db", "0/2", "5m", "", ""]
    ds = {
        "metadata": meta("agent"),
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "spec": {"nodeSelector": {"os": "linux"}, "containers": [{"name": "a", "image": "i"}]}
            },
        },
        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2},
    }
    assert cells("apps", "DaemonSet", ds) == ["agent", 3, 3, 2, 0, 0, "os=linux", "5m", "a", "i", "app=agent"]


def test_controller_revision_names_its_controller() -> None:
    rev = {
        "metadata": meta(
            "web-1",
            ownerReferences=[
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": True}
            ],
        ),
        "revision": 4,
    }
    assert cells("apps", "ControllerRevision", rev) == ["web-1", "statefulset.apps/web", 4, "5m"]


@pytest.mark.parametrize(
    ("spec", "status", "extra_meta", "want"),
    [
        pytest.param(
            {"completions": 1, "parallelism": 1},
            {
                "succeeded": 1,
                "startTime": ago(10 * MINUTE),
                "completionTime": ago(10 * MINUTE - 42),
                "conditions": [{"type": "Complete", "status": "True"}],
            },
            {},
            ["Complete", "1/1", "42s"],
            id="complete",
        ),
        pytest.param(
            {"parallelism": 3},
            {"startTime": ago(3 * MINUTE)},
            {},
            ["Running", "0/1 of 3", "3m"],
            id="running-work-queue",
        ),
        pytest.param(
            {"completions": 5},
            {"failed": 2, "startTime": ago(HOUR), "conditions": [{"type": "Failed", "status": "True"}]},
            {},
            ["Failed", "0/5", "60m"],
            id="failed-without-completion-time",
        ),
        pytest.param(
            {"completions": 1},
            {"conditions": [{"type": "Suspended", "status": "True"}]},
            {},
            ["Suspended", "0/1", ""],
            id="suspended-never-started",
        ),
        pytest.param(
            {"completions": 1},
            {"conditions": [{"type": "Suspended", "status": "True"}]},
            {"deletionTimestamp": ago(SECOND)},
            ["Terminating", "0/1", ""],
            id="terminating-before-suspended",
        ),
    ],
)
def test_job_status_completions_and_duration(
    spec: dict[str, Any], status: dict[str, Any], extra_meta: dict[str, Any], want: list[str]
) -> None:
    job = {"metadata": meta("j", **extra_meta), "spec": spec, "status": status}
    table = to_table("batch", "Job", [job], now=NOW)
    assert column_names(table) == ["Name", "Status", "Completions", "Duration", "Age"]
    assert table["rows"][0]["cells"][1:4] == want


def test_cronjob_cells() -> None:
    cron = {
        "metadata": meta("nightly"),
        "spec": {
            "schedule": "0 0 * * *",
            "suspend": False,
            "jobTemplate": {"spec": {"template": {"spec": {}}}},
        },
        "status": {"active": [{"name": "x"}], "lastScheduleTime": ago(2 * HOUR)},
    }
    assert cells("batch", "CronJob", cron)[:7] == ["nightly", "0 0 * * *", "<none>", "False", 1, "120m", "5m"]


# --- nodes, services, events ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "unschedulable", "want"),
    [
        ([{"type": "Ready", "status": "True"}], False, "Ready"),
        ([{"type": "Ready", "status": "False"}], False, "NotReady"),
        ([{"type": "Ready", "status": "Unknown"}], False, "NotReady"),
        ([{"type": "MemoryPressure", "status": "False"}], False, "Unknown"),
        ([{"type": "Ready", "status": "True"}], True, "Ready,SchedulingDisabled"),
        ([], True, "Unknown,SchedulingDisabled"),
    ],
)
def test_node_status_from_ready_condition(
    conditions: list[dict[str, Any]], unschedulable: bool, want: str
) -> None:
    node = {
        "metadata": meta("n"),
        "spec": {"unschedulable": unschedulable},
        "status": {"conditions": conditions},
    }
    assert cells("", "Node", node)[1] == want


def test_node_roles_version_and_wide_cells() -> None:
    node = {
        "metadata": meta(
            "n1",
            labels={
                "node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/worker": "",
                "kubernetes.io/role": "edge",
                "node-role.kubernetes.io/": "",
            },
        ),
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [
                {"type": "InternalIP", "address": "192.168.0.5"},
                {"type": "Hostname", "address": "n1"},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "osImage": "Debian",
                "containerRuntimeVersion": "containerd://2",
            },
        },
    }
    assert cells("", "Node", node) == [
        "n1",
        "Ready",
        "control-plane,edge,worker",
        "5m",
        "v1.32.0",
        "192.168.0.5",
        "<none>",
        "Debian",
        "<unknown>",
        "containerd://2",
    ]


@pytest.mark.parametrize(
    ("spec", "status", "want"),
    [
        pytest.param(
            {"type": "ClusterIP", "clusterIPs": ["10.96.0.10"], "ports": [{"port": 53, "protocol": "UDP"}]},
            {},
            ["ClusterIP", "10.96.0.10", "<none>", "53/UDP"],
            id="cluster-ip",
        ),
        pytest.param(
            {
                "type": "NodePort",
                "clusterIP": "10.0.0.2",
                "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}],
            },
            {},
            ["NodePort", "10.0.0.2", "<none>", "80:30080/TCP"],
            id="node-port",
        ),
        pytest.param(
            {"type": "LoadBalancer", "clusterIPs": ["10.0.0.3"], "ports": []},
            {},
            ["LoadBalancer", "10.0.0.3", "<pending>", "<none>"],
            id="load-balancer-pending",
        ),
        pytest.param(
            {"type": "LoadBalancer", "clusterIPs": ["10.0.0.3"], "externalIPs": ["5.5.5.5"]},
            {"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}, {"hostname": "lb.example"}]}},
            ["LoadBalancer", "10.0.0.3", "9.9.9.9,lb.example,5.5.5.5", "<none>"],
            id="load-balancer-ingress",
        ),
        pytest.param(
            {"type": "ExternalName", "externalName": "db.example.com"},
            {},
            ["ExternalName", "<none>", "db.example.com", "<none>"],
            id="external-name",
        ),
    ],
)
def test_service_cells(spec: dict[str, Any], status: dict[str, Any], want: list[str]) -> None:
    svc = {"metadata": meta("svc"), "spec": spec, "status": status}
    assert cells("", "Service", svc)[1:5] == want


def core_event(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": meta("p.17a"),
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
        "reason": "Pulled",
        "message": "  Pulled image  ",
        "type": "Normal",
        "source": {"component": "kubelet", "host": "n1"},
        **extra,
    }


@pytest.mark.parametrize(
    ("event", "want"),
    [
        pytest.param(
            core_event(firstTimestamp=ago(HOUR), lastTimestamp=ago(MINUTE), count=4),
            [
                "60s",
                "Normal",
                "Pulled",
                "pod/p",
                "spec.containers{c}",
                "kubelet, n1",
                "Pulled image",
                "60m",
                4,
                "p.17a",
            ],
            id="core-with-counts",
        ),
        pytest.param(
            core_event(eventTime="2024-06-01T11:59:30.000000Z"),
            [
                "30s",
                "Normal",
                "Pulled",
                "pod/p",
                "spec.containers{c}",
                "kubelet, n1",
                "Pulled image",
                "30s",
                1,
                "p.17a",
            ],
            id="singleton-event-time",
        ),
        pytest.param(
            core_event(
                eventTime=ago(HOUR),
                series={"count": 7, "lastObservedTime": "2024-06-01T11:58:00.000000Z"},
                source={},
                reportingComponent="controller",
            ),
            [
                "2m",
                "Normal",
                "Pulled",
                "pod/p",
                "spec.containers{c}",
                "controller",
                "Pulled image",
                "60m",
                7,
                "p.17a",
            ],
            id="series",
        ),
    ],
)
def test_event_cells(event: dict[str, Any], want: list[Any]) -> None:
    table = to_table("", "Event", [event], now=NOW)
    assert column_names(table) == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert table["rows"][0]["cells"] == want


def test_events_k8s_io_objects_print_like_core_events() -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": meta("e"),
        "regarding": {"kind": "Node", "name": "n1"},
        "note": "rebooted",
        "reason": "Rebooted",
        "type": "Warning",
        "eventTime": ago(10 * SECOND),
        "reportingController": "kubelet",
        "reportingInstance": "n1",
    }
    assert cells("events.k8s.io", "Event", event) == [
        "10s",
        "Warning",
        "Rebooted",
        "node/n1",
        "",
        "kubelet, n1",
        "rebooted",
        "10s",
        1,
        "e",
    ]


# --- other printers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "kind", "obj", "want"),
    [
        pytest.param(
            "", "Namespace", {"metadata": meta("ns"), "status": {"phase": "Active"}}, ["ns", "Active", "5m"]
        ),
        pytest.param(
            "",
            "ConfigMap",
            {"metadata": meta("cm"), "data": {"a": "1"}, "binaryData": {"b": "AA=="}},
            ["cm", 2, "5m"],
        ),
        pytest.param(
            "",
            "Secret",
            {"metadata": meta("s"), "type": "Opaque", "data": {"k": "dg=="}},
            ["s", "Opaque", 1, "5m"],
        ),
        pytest.param("", "ServiceAccount", {"metadata": meta("sa")}, ["sa", 0, "5m"]),
        pytest.param(
            "",
            "Endpoints",
            {
                "metadata": meta("ep"),
                "subsets": [
                    {
                        "addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                        "ports": [{"port": 80}, {"port": 443}],
                    }
                ],
            },
            ["ep", "10.0.0.1:80,[fd00::1]:80,10.0.0.1:443 + 1 more...", "5m"],
        ),
        pytest.param("", "Endpoints", {"metadata": meta("ep")}, ["ep", "<none>", "5m"]),
        pytest.param(
            "",
            "PersistentVolumeClaim",
            {
                "metadata": meta("data"),
                "spec": {"volumeName": "pv1", "storageClassName": "fast"},
                "status": {
                    "phase": "Bound",
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                },
            },
            ["data", "Bound", "pv1", "1Gi", "RWO,RWX", "fast", "<unset>", "5m", "<unset>"],
        ),
        pytest.param(
            "",
            "ResourceQuota",
            {
                "metadata": meta("q"),
                "status": {
                    "hard": {"pods": "10", "limits.cpu": "2", "requests.cpu": "1"},
                    "used": {"pods": "3"},
                },
            },
            ["q", "pods: 3/10, requests.cpu: 0/1", "limits.cpu: 0/2", "5m"],
        ),
        pytest.param(
            "policy",
            "PodDisruptionBudget",
            {"metadata": meta("pdb"), "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}},
            ["pdb", "50%", "N/A", 1, "5m"],
        ),
        pytest.param(
            "coordination.k8s.io",
            "Lease",
            {"metadata": meta("l"), "spec": {"holderIdentity": "me"}},
            ["l", "me", "5m"],
        ),
        pytest.param(
            "discovery.k8s.io",
            "EndpointSlice",
            {
                "metadata": meta("es"),
                "addressType": "IPv4",
                "ports": [{"port": 80}, {"name": "x"}],
                "endpoints": [{"addresses": ["10.0.0.1"]}],
            },
            ["es", "IPv4", "80,x", "10.0.0.1", "5m"],
        ),
        pytest.param(
            "certificates.k8s.io",
            "CertificateSigningRequest",
            {
                "metadata": meta("csr"),
                "spec": {
                    "signerName": "kubernetes.io/kubelet-serving",
                    "username": "u",
                    "expirationSeconds": 3600,
                },
                "status": {"conditions": [{"type": "Approved"}], "certificate": "Y2VydA=="},
            },
            ["csr", "5m", "kubernetes.io/kubelet-serving", "u", "60m", "Approved,Issued"],
        ),
        pytest.param(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            {
                "metadata": meta("rb"),
                "roleRef": {"kind": "Role", "name": "reader"},
                "subjects": [
                    {"kind": "User", "name": "alice"},
                    {"kind": "ServiceAccount", "namespace": "ns", "name": "bot"},
                ],
            },
            ["rb", "Role/reader", "5m", "alice", "", "ns/bot"],
        ),
        pytest.param(
            "storage.k8s.io",
            "StorageClass",
            {
                "metadata": meta("std", annotations={"storageclass.kubernetes.io/is-default-class": "true"}),
                "provisioner": "csi.example",
            },
            ["std (default)", "csi.example", "Delete", "Immediate", False, "5m"],
        ),
        pytest.param(
            "autoscaling",
            "HorizontalPodAutoscaler",
            {
                "metadata": meta("hpa"),
                "spec": {
                    "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                    "maxReplicas": 5,
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 50},
                            },
                        },
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "memory",
                                "target": {"type": "AverageValue", "averageValue": "1Gi"},
                            },
                        },
                        {
                            "type": "Pods",
                            "pods": {
                                "metric": {"name": "qps"},
                                "target": {"type": "AverageValue", "averageValue": "10"},
                            },
                        },
                    ],
                },
                "status": {
                    "currentReplicas": 2,
                    "currentMetrics": [
                        {
                            "type": "Resource",
                            "resource": {"name": "cpu", "current": {"averageUtilization": 20}},
                        }
                    ],
                },
            },
            [
                "hpa",
                "Deployment/web",
                "cpu: 20%/50%, memory: <unknown>/1Gi + 1 more...",
                "<unset>",
                5,
                2,
                "5m",
            ],
        ),
        pytest.param(
            "autoscaling",
            "HorizontalPodAutoscaler",
            {
                "apiVersion": "autoscaling/v1",
                "metadata": meta("hpa"),
                "spec": {
                    "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                    "minReplicas": 1,
                    "maxReplicas": 3,
                },
            },
            ["hpa", "Deployment/web", "cpu: <unknown>/80%", "1", 3, 0, "5m"],
            id="hpa-v1-object",
        ),
    ],
)
def test_printer_cells(group: str, kind: str, obj: dict[str, Any], want: list[Any]) -> None:
    assert cells(group, kind, obj) == want


@pytest.mark.parametrize(
    ("group", "kind"),
    [
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("", "LimitRange"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("example.com", "Unknown"),
    ],
)
def test_kinds_without_printer_get_name_and_created_at(group: str, kind: str) -> None:
    obj = {"metadata": {"name": "x", "creationTimestamp": "2024-05-01T10:00:00.5+02:00"}}
    table = to_table(group, kind, [obj], now=NOW)
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Created At", "date"),
    ]
    assert table["rows"][0]["cells"] == ["x", "2024-05-01T08:00:00Z"]


# --- custom resources ------------------------------------------------------------------------------

WIDGET = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "metadata": {"name": "w", "creationTimestamp": ago(2 * HOUR), "labels": {"app.kubernetes.io/name": "w"}},
    "spec": {
        "replicas": 3,
        "ratio": 0.5,
        "size": 2.0,
        "enabled": True,
        "tags": ["a", "b"],
        "nested": {"b": 1, "a": "<x>"},
    },
    "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]},
}


@pytest.mark.parametrize(
    ("column", "want"),
    [
        ({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}, 3),
        ({"name": "Size", "type": "integer", "jsonPath": ".spec.size"}, 2),
        ({"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"}, 0.5),
        ({"name": "Ratio", "type": "string", "jsonPath": ".spec.ratio"}, "0.5"),
        ({"name": "On", "type": "boolean", "jsonPath": ".spec.enabled"}, True),
        ({"name": "On", "type": "string", "jsonPath": ".spec.enabled"}, "true"),
        ({"name": "Tags", "type": "string", "jsonPath": ".spec.tags"}, '["a","b"]'),
        ({"name": "Nested", "type": "string", "jsonPath": ".spec.nested"}, '{"a":"\\u003cx\\u003e","b":1}'),
        ({"name": "First", "type": "string", "jsonPath": ".spec.tags[0]"}, "a"),
        ({"name": "Last", "type": "string", "jsonPath": ".spec.tags[-1]"}, "b"),
        (
            {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
            "True",
        ),
        ({"name": "App", "type": "string", "jsonPath": ".metadata.labels['app.kubernetes.io/name']"}, "w"),
        ({"name": "App", "type": "string", "jsonPath": ".metadata.labels.app\\.kubernetes\\.io/name"}, "w"),
        ({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}, "120m"),
        ({"name": "Bad", "type": "date", "jsonPath": ".spec.tags[0]"}, "<invalid>"),
        ({"name": "Missing", "type": "string", "jsonPath": ".spec.nope"}, None),
        ({"name": "Mismatch", "type": "integer", "jsonPath": ".spec.enabled"}, None),
    ],
)
def test_crd_additional_printer_columns(column: dict[str, Any], want: Any) -> None:
    table = to_table("example.com", "Widget", [WIDGET], now=NOW, crd_columns=[column])
    assert column_names(table) == ["Name", column["name"]]
    assert table["rows"][0]["cells"] == ["w", want]


def test_crd_column_definition_fields() -> None:
    column = {"name": "Size", "type": "integer", "format": "int32", "priority": 1, "jsonPath": ".spec.size"}
    definition = to_table("example.com", "Widget", [], crd_columns=[column])["columnDefinitions"][1]
    assert definition == {
        "name": "Size",
        "type": "integer",
        "format": "int32",
        "description": "Custom resource definition column (in JSONPath format): .spec.size",
        "priority": 1,
    }


def test_crd_without_printer_columns_shows_name_and_age() -> None:
    table = to_table("example.com", "Widget", [WIDGET], now=NOW, crd_columns=[])
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Age", "date"),
    ]
    assert table["rows"][0]["cells"] == ["w", "120m"]


# --- the Table envelope ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("include_object", "want"),
    [
        (
            "",
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": WIDGET["metadata"]},
        ),
        (
            "Metadata",
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": WIDGET["metadata"]},
        ),
        ("Object", WIDGET),
        ("None", None),
    ],
)
def test_include_object(include_object: str, want: Any) -> None:
    table = to_table(
        "example.com", "Widget", [WIDGET], include_object=include_object, now=NOW, crd_columns=[]
    )
    assert table["rows"][0]["object"] == want


def test_include_object_rejects_unknown_values() -> None:
    with pytest.raises(ValueError, match="unrecognized includeObject value"):
        to_table("", "Pod", [], include_object="Everything")


def test_partial_metadata_follows_requested_table_version() -> None:
    table = to_table("", "Pod", [pod()], now=NOW, api_version="meta.k8s.io/v1beta1")
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("objects", "list_meta", "want"),
    [
        (
            [],
            {"resourceVersion": "42", "continue": "abc", "remainingItemCount": 3},
            {
                "resourceVersion": "42",
                "continue": "abc",
                "remainingItemCount": 3,
            },
        ),
        ([], {"resourceVersion": "42", "continue": ""}, {"resourceVersion": "42"}),
        ([pod(resourceVersion="7")], None, {"resourceVersion": "7"}),
        ([pod(resourceVersion="7"), pod(resourceVersion="8")], None, {}),
    ],
)
def test_table_metadata(
    objects: list[dict[str, Any]], list_meta: dict[str, Any] | None, want: dict[str, Any]
) -> None:
    table = to_table("", "Pod", objects, list_meta=list_meta, now=NOW)
    assert (table["kind"], table["apiVersion"], table["metadata"]) == ("Table", "meta.k8s.io/v1", want)


def test_empty_list_has_columns_and_no_rows() -> None:
    table = to_table("apps", "Deployment", [], list_meta={"resourceVersion": "1"})
    assert table["rows"] == []
    assert column_names(table) == ["Name", "Ready", "Up-to-date", "Available", "Age"]


@pytest.mark.parametrize(("first", "has_columns"), [(True, True), (False, False)])
def test_watch_event_table_has_one_row_and_headers_only_first(first: bool, has_columns: bool) -> None:
    table = table_for_watch_event("", "Pod", pod(resourceVersion="9"), now=NOW, first=first)
    assert len(table["rows"]) == 1
    assert table["metadata"] == {"resourceVersion": "9"}
    assert bool(table["columnDefinitions"]) is has_columns


def test_column_definitions_have_all_upstream_fields() -> None:
    table = to_table("", "Pod", [], now=NOW)
    assert table["columnDefinitions"][0] == {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": table["columnDefinitions"][0]["description"],
        "priority": 0,
    }
    assert table["columnDefinitions"][0]["description"].startswith("Name must be unique within a namespace.")
