"""The ReplicaSet controller killed (-9) in the middle of a scale-up never double-creates.

Two replicas of the controller, throttled (`--kube-api-qps`) so that creating the pods
takes several seconds; both are killed while pods are being created. `kcm dev` restarts
them; the new partition owner starts from a cache caught up with the API server, counts the
pods the dead one created, and creates only the rest (invariants 1 and 6). A double create
would show as more pods than replicas, or as the surplus being deleted again.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
from typing import Any

from tests.conftest import wait_for
from tests.e2e import devstack

REPLICAS = 60

stack = devstack.stack_fixture(
    "--controllers",
    "replicaset",
    "--replicas",
    "replicaset=2",
    "--kube-api-qps",
    "5",
    "--kube-api-burst",
    "5",
)


def pods(stack: devstack.DevStack, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(stack.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)[
        "items"
    ]
    return items


def test_killed_mid_scale_up_creates_each_replica_once(stack: devstack.DevStack) -> None:
    ns = "failover"
    stack.kubectl("create", "namespace", ns)
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input=textwrap.dedent(f"""\
            apiVersion: apps/v1
            kind: ReplicaSet
            metadata: {{name: many, namespace: {ns}}}
            spec:
              replicas: {REPLICAS}
              selector: {{matchLabels: {{app: many}}}}
              template:
                metadata: {{labels: {{app: many}}}}
                spec:
                  containers: [{{name: c, image: nginx}}]
            """),
    )
    wait_for(lambda: len(pods(stack, ns)) >= 3, 30, 0.05, "the scale-up under way")
    victims = stack.controller_pids("replicaset")
    assert len(victims) == 2
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    created_before_restart = len(pods(stack, ns))
    assert created_before_restart < REPLICAS, "the scale-up finished before the kill: nothing was tested"

    def settled() -> bool:
        rs = json.loads(stack.kubectl("get", "rs", "-n", ns, "many", "-o", "json").stdout)
        return rs.get("status", {}).get("replicas") == REPLICAS and len(pods(stack, ns)) >= REPLICAS

    wait_for(settled, 90, 0.5, f"{REPLICAS} replicas after the restart")
    assert not set(stack.controller_pids("replicaset")) & set(victims)
    all_pods = pods(stack, ns)
    assert len(all_pods) == REPLICAS
    assert not [p for p in all_pods if p["metadata"].get("deletionTimestamp")]
    events = json.loads(stack.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
    assert not [e for e in events if e["reason"] == "SuccessfulDelete"]
