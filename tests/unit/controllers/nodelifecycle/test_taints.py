"""NoSchedule taints from conditions and labels from stable ones: upstream
node_lifecycle_controller_test.go's TestTaintsNodeByCondition, TestReconcileNodeLabels and
pkg/util/taints' add/remove, as data."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kcm_controllers.nodelifecycle import taints
from kcm_controllers.nodelifecycle.taints import TaintRef
from kcm_controllers.nodelifecycle.views import NodeView


def node(conditions: dict[str, str], taint_list: list[dict[str, Any]] | None = None, **spec: Any) -> NodeView:
    doc = {
        "metadata": {"name": "n"},
        "spec": {"taints": taint_list or [], **spec},
        "status": {"conditions": [{"type": k, "status": v} for k, v in conditions.items()]},
    }
    return msgspec.convert(doc, NodeView)


NS = taints.NO_SCHEDULE


@pytest.mark.parametrize(
    ("conditions", "present", "spec", "add", "remove"),
    [
        ({"Ready": "True"}, [], {}, [], []),
        (
            {"Ready": "True"},
            [{"key": taints.NOT_READY, "effect": NS}],
            {},
            [],
            [TaintRef(taints.NOT_READY, NS)],
        ),
        ({"Ready": "False"}, [], {}, [TaintRef(taints.NOT_READY, NS)], []),
        (
            {"Ready": "Unknown"},
            [{"key": taints.NOT_READY, "effect": NS}],
            {},
            [TaintRef(taints.UNREACHABLE, NS)],
            [TaintRef(taints.NOT_READY, NS)],
        ),
        ({"Ready": "True", "MemoryPressure": "True"}, [], {}, [TaintRef(taints.MEMORY_PRESSURE, NS)], []),
        ({"Ready": "True", "DiskPressure": "True"}, [], {}, [TaintRef(taints.DISK_PRESSURE, NS)], []),
        ({"Ready": "True", "PIDPressure": "True"}, [], {}, [TaintRef(taints.PID_PRESSURE, NS)], []),
        (
            {"Ready": "True", "NetworkUnavailable": "True"},
            [],
            {},
            [TaintRef(taints.NETWORK_UNAVAILABLE, NS)],
            [],
        ),
        ({"Ready": "True"}, [], {"unschedulable": True}, [TaintRef(taints.UNSCHEDULABLE, NS)], []),
        (
            {"Ready": "True"},
            [{"key": taints.UNSCHEDULABLE, "effect": NS}],
            {},
            [],
            [TaintRef(taints.UNSCHEDULABLE, NS)],
        ),
        # Not ours: another key, or a NoExecute taint of one of our keys.
        (
            {"Ready": "True"},
            [{"key": "example.com/x", "effect": NS}, {"key": taints.NOT_READY, "effect": "NoExecute"}],
            {},
            [],
            [],
        ),
    ],
)
def test_no_schedule_diff(
    conditions: dict[str, str],
    present: list[dict[str, Any]],
    spec: dict[str, Any],
    add: list[TaintRef],
    remove: list[TaintRef],
) -> None:
    assert taints.no_schedule_diff(node(conditions, present, **spec)) == (add, remove)


def test_with_taints_swaps_stamps_and_keeps_the_others() -> None:
    present = [
        {"key": "example.com/x", "value": "v", "effect": NS},
        {"key": taints.NOT_READY, "effect": "NoExecute", "timeAdded": "old"},
    ]
    got = taints.with_taints(present, [taints.UNREACHABLE_NO_EXECUTE], [taints.NOT_READY_NO_EXECUTE], "now")
    assert got == [
        {"key": "example.com/x", "value": "v", "effect": NS},
        {"key": taints.UNREACHABLE, "effect": "NoExecute", "timeAdded": "now"},
    ]


@pytest.mark.parametrize(
    ("labels", "updates"),
    [
        ({}, {}),
        ({"kubernetes.io/os": "linux", "beta.kubernetes.io/os": "linux"}, {}),
        ({"kubernetes.io/os": "linux"}, {"beta.kubernetes.io/os": "linux"}),
        (
            {"kubernetes.io/arch": "amd64", "beta.kubernetes.io/arch": "arm64"},
            {"beta.kubernetes.io/arch": "amd64"},
        ),
        ({"beta.kubernetes.io/os": "windows"}, {}),  # no stable label: left alone
    ],
)
def test_label_updates(labels: dict[str, str], updates: dict[str, str]) -> None:
    n = msgspec.convert({"metadata": {"name": "n", "labels": labels}}, NodeView)
    assert taints.label_updates(n) == updates
