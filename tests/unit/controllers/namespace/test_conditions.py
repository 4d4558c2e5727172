"""The namespace controller's pure helpers, with upstream's table cases
(pkg/controller/namespace/deletion/status_condition_utils_test.go) and its estimate rules."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from kcm_controllers.namespace import conditions as c
from kcm_controllers.namespace import controller as namespace_controller
from kcm_shared.apimachinery import gvr

NOW = "2026-01-02T03:04:05Z"
EARLIER = "2025-12-31T00:00:00Z"


def ok(condition_type: str) -> dict[str, Any]:
    want = c.ok(condition_type)
    return {
        "type": want.type,
        "status": want.status,
        "lastTransitionTime": NOW,
        "reason": want.reason,
        "message": want.message,
    }


ALL_OK = [ok(t) for t in c.CONDITION_TYPES]


@pytest.mark.parametrize(
    ("new", "stored", "expected"),
    [
        pytest.param(
            [],
            [{"type": "unknown", "status": "True"}],
            [{"type": "unknown", "status": "True"}, *ALL_OK],
            id="leave unknown",
        ),
        pytest.param(
            [],
            [{"type": c.DISCOVERY_FAILURE, "status": "True"}],
            ALL_OK,
            id="replace with success",
        ),
        pytest.param(
            [],
            [
                {"type": c.GV_PARSING_FAILURE, "status": "True"},
                {"type": c.DISCOVERY_FAILURE, "status": "True"},
            ],
            [ok(c.GV_PARSING_FAILURE), ok(c.DISCOVERY_FAILURE), *ALL_OK[2:]],
            id="leave different order",
        ),
        pytest.param(
            [c.Condition(c.GV_PARSING_FAILURE, "True", "foo", "bar")],
            [
                {"type": c.GV_PARSING_FAILURE, "status": "False"},
                {"type": c.DISCOVERY_FAILURE, "status": "True"},
            ],
            [
                {
                    "type": c.GV_PARSING_FAILURE,
                    "status": "True",
                    "reason": "foo",
                    "message": "bar",
                    "lastTransitionTime": NOW,
                },
                ok(c.DISCOVERY_FAILURE),
                *ALL_OK[2:],
            ],
            id="overwrite with failure",
        ),
        pytest.param(
            [c.Condition(c.GV_PARSING_FAILURE, "True", "foo", "bar")],
            [{"type": c.DISCOVERY_FAILURE, "status": "True"}],
            [
                ok(c.DISCOVERY_FAILURE),
                {
                    "type": c.GV_PARSING_FAILURE,
                    "status": "True",
                    "lastTransitionTime": NOW,
                    "reason": "foo",
                    "message": "bar",
                },
                *ALL_OK[2:],
            ],
            id="write new failure",
        ),
    ],
)
def test_update_conditions(
    new: list[c.Condition], stored: list[dict[str, Any]], expected: list[dict[str, Any]]
) -> None:
    merged, changed = c.update_conditions(stored, new, NOW)
    assert merged == expected
    assert changed


def test_update_conditions_keeps_transition_time_and_reports_no_change() -> None:
    stored = [{**ok(t), "lastTransitionTime": EARLIER} for t in c.CONDITION_TYPES]
    merged, changed = c.update_conditions(stored, [], NOW)
    assert (merged, changed) == (stored, False)
    # A new message with the same status keeps the transition time; a new status moves it.
    remaining = c.Condition(c.CONTENT_REMAINING, "True", "SomeResourcesRemain", "x")
    merged, changed = c.update_conditions(stored, [remaining], NOW)
    assert changed and merged[3]["lastTransitionTime"] == NOW and merged[3]["message"] == "x"
    again, changed = c.update_conditions(
        merged, [c.Condition(c.CONTENT_REMAINING, "True", "r", "y")], "later"
    )
    assert changed and again[3]["lastTransitionTime"] == NOW


DAEMONSETS = gvr.Resource("apps.k8s.io", "v1", "daemonsets")
DEPLOYMENTS = gvr.Resource("apps.k8s.io", "v1", "deployments")
REMAINING = c.Condition(
    c.CONTENT_REMAINING,
    "True",
    "SomeResourcesRemain",
    "Some resources are remaining: daemonsets.apps.k8s.io has 5 resource instances, "
    "deployments.apps.k8s.io has 5 resource instances",
)
FINALIZERS = c.Condition(
    c.FINALIZERS_REMAINING,
    "True",
    "SomeFinalizersRemain",
    "Some content in the namespace has finalizers remaining: kubedb in 5 resource instances, "
    "service-catalog in 6 resource instances",
)


@pytest.mark.parametrize(
    ("remaining", "finalizers", "expected"),
    [
        pytest.param({}, {}, [], id="nothing"),
        pytest.param({DEPLOYMENTS: 5, DAEMONSETS: 5}, {}, [REMAINING], id="just remaining"),
        pytest.param({}, {"service-catalog": 6, "kubedb": 5}, [FINALIZERS], id="just finalizers"),
        pytest.param(
            {DEPLOYMENTS: 5, DAEMONSETS: 5},
            {"service-catalog": 6, "kubedb": 5},
            [REMAINING, FINALIZERS],
            id="both",
        ),
    ],
)
def test_content_totals(
    remaining: dict[gvr.Resource, int], finalizers: dict[str, int], expected: list[c.Condition]
) -> None:
    assert c.content_totals(remaining, finalizers) == expected


def test_failure_conditions_read_as_upstream_writes_them() -> None:
    assert c.content_failure([]) is None
    failure = c.content_failure(["b failed", "a failed"])
    assert failure == c.Condition(
        c.CONTENT_FAILURE,
        "True",
        "ContentDeletionFailed",
        "Failed to delete all resource types, 2 remaining: a failed, b failed",
    )
    error = c.group_discovery_error(
        {"metrics.k8s.io/v1beta1": "the server is currently unable to handle the request"}
    )
    assert error == (
        "unable to retrieve the complete list of server APIs: "
        "metrics.k8s.io/v1beta1: the server is currently unable to handle the request"
    )
    partial = c.discovery_failure(error, {"metrics.k8s.io/v1beta1": "x"})
    assert partial.reason == "DiscoveryFailed"
    assert partial.message == f"Discovery failed for some groups, 1 failing: {error}"
    assert c.discovery_failure("connection refused").message == "connection refused"
    assert c.group_version_failure("bad").reason == "GroupVersionParsingFailed"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", ("", "")), ("/", ("", "")), ("v1", ("", "v1")), ("apps/v1", ("apps", "v1"))],
)
def test_parse_group_version(text: str, expected: tuple[str, str]) -> None:
    assert c.parse_group_version(text) == expected


def test_parse_group_version_refuses_two_slashes() -> None:
    with pytest.raises(ValueError, match="unexpected GroupVersion string: a/b/v1"):
        c.parse_group_version("a/b/v1")


def test_gvr_string_as_go_prints_it() -> None:
    assert c.gvr_string(gvr.Resource("", "v1", "pods")) == "/v1, Resource=pods"
    assert c.gvr_string(DEPLOYMENTS) == "apps.k8s.io/v1, Resource=deployments"


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([], 0, id="no pods"),
        pytest.param([c.PodGrace("Running", 30), c.PodGrace("Pending", 45)], 45, id="longest grace"),
        pytest.param([c.PodGrace("Succeeded", 60), c.PodGrace("Failed", 90)], 0, id="finished pods skipped"),
        pytest.param([c.PodGrace("Running", None), c.PodGrace("Running", 5)], 5, id="unset grace skipped"),
    ],
)
def test_pods_estimate(pods: list[c.PodGrace], expected: int) -> None:
    assert c.pods_estimate(pods) == expected


def test_estimate_is_dropped_once_the_namespace_was_terminating_that_long() -> None:
    deleted = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert c.effective_estimate(30, deleted, deleted + dt.timedelta(seconds=29)) == 30
    assert c.effective_estimate(30, deleted, deleted + dt.timedelta(seconds=30)) == 0
    assert c.effective_estimate(0, deleted, deleted) == 0


@pytest.mark.parametrize(("estimate", "seconds"), [(0, 1), (1, 1), (15, 8), (30, 16)])
def test_requeue_is_half_the_estimate_plus_one(estimate: int, seconds: int) -> None:
    assert c.requeue_seconds(estimate) == seconds


def test_aggregate_prints_like_utilerrors() -> None:
    assert c.aggregate(["one"]) == "one"
    assert c.aggregate(["one", "two"]) == "[one, two]"


def test_grace_waits_five_seconds_from_the_deletion_and_never_longer() -> None:
    deleted = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    grace = namespace_controller.grace_left
    assert grace(deleted, deleted + dt.timedelta(seconds=2)) == pytest.approx(3.0)
    assert grace(deleted, deleted + dt.timedelta(seconds=5)) <= 0
    assert grace(deleted, deleted - dt.timedelta(seconds=60)) == 5.0  # our clock behind the server's
