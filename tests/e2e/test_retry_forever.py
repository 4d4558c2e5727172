"""Issue 13 item 7, end to end against `kcm dev`: a key whose reconcile keeps failing is
retried with backoff for ever, never dead-lettered, and converges once the cause is gone.

The stack runs with `--max-deliveries=3`, so a runtime that dead-letters failing keys does
so within a second (by default it would after 15 failures, about 160 s of backoff).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import wait_for
from tests.e2e.devstack import DevStack, dev_stack

MAX_DELIVERIES = 3
RS = "replicaset-controller"
RS_QUEUE = "replicaset"  # upstream's queue name, the workqueue_* metrics' `name`


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    args = [
        "--nodes",
        "1",
        "--controllers",
        "deployment,replicaset,resourcequota",
        f"--max-deliveries={MAX_DELIVERIES}",
    ]
    with dev_stack(tmp_path_factory.mktemp("retry"), *args) as s:
        yield s


def _queue_metrics(stack: DevStack, controller: str, queue: str) -> dict[str, float]:
    """`workqueue_retries_total` of upstream's queue name `queue` and
    `kcm_workqueue_dead_letters_total` of `controller`, summed over the replicas that run it
    (from their /metrics, found through the coordinator)."""
    totals = {"workqueue_retries_total": 0.0, "kcm_workqueue_dead_letters_total": 0.0}
    label = {"workqueue_retries_total": queue, "kcm_workqueue_dead_letters_total": controller}
    for member in stack.status().get("members", []):
        if controller not in member.get("controllers", []):
            continue
        with urllib.request.urlopen(member["ops_url"] + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in totals and sample.labels.get("name") == label[sample.name]:
                    totals[sample.name] += sample.value
    return totals


def test_a_replicaset_blocked_by_a_quota_converges_once_the_quota_is_lifted(stack: DevStack) -> None:
    ns = "quota-outage"
    stack.kubectl("create", "namespace", ns)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods", "namespace": ns},
        "spec": {"hard": {"pods": "0"}},
    }
    stack.kubectl("apply", "-f", "-", input=json.dumps(quota))

    def usage_known() -> bool:
        got = json.loads(stack.kubectl("get", "quota", "no-pods", "-n", ns, "-o", "json").stdout)
        return "used" in got.get("status", {})

    # A quota limits nothing until the resourcequota controller has written its status (upstream).
    wait_for(usage_known, 30, interval=0.2, what="quota usage known")
    # The API server itself refuses pods under that quota (else the test proves nothing).
    refused = stack.kubectl("run", "probe", "-n", ns, "--image=nginx", "--restart=Never", check=False)
    assert refused.returncode != 0 and "exceeded quota" in refused.stderr, refused.stderr

    stack.kubectl("create", "deployment", "web", "-n", ns, "--image=nginx", "--replicas=3")

    def failing_past_the_old_dead_letter_point() -> bool:
        counts = _queue_metrics(stack, RS, RS_QUEUE)
        assert counts["kcm_workqueue_dead_letters_total"] == 0, f"a failing key was dead-lettered: {counts}"
        return counts["workqueue_retries_total"] >= MAX_DELIVERIES + 3

    wait_for(failing_past_the_old_dead_letter_point, 60, interval=0.2, what="pod creates failing, retried")
    assert stack.kubectl("get", "pods", "-n", ns, "-o", "name").stdout.strip() == ""

    stack.kubectl("delete", "resourcequota", "no-pods", "-n", ns)

    def converged() -> bool:
        rs = json.loads(stack.kubectl("get", "replicasets", "-n", ns, "-o", "json").stdout)["items"]
        return len(rs) == 1 and rs[0].get("status", {}).get("replicas") == 3

    wait_for(converged, 90, interval=0.5, what="the ReplicaSet has its 3 pods")
    assert _queue_metrics(stack, RS, RS_QUEUE)["kcm_workqueue_dead_letters_total"] == 0
