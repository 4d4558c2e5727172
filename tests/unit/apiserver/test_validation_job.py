"""Job validation beyond the basics: podFailurePolicy, successPolicy, per-index backoff, managedBy,
and the /status rules, with upstream 1.32's fields and wording (pkg/apis/batch/validation)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kcm_apiserver.validation import validate
from kcm_apiserver.validation.batch import indexes_format

from tests.support.validation import check, fields, make

Obj = dict[str, Any]


def job(create: bool = True, template: Obj | None = None, **spec: Any) -> Obj:
    def mutate(o: Obj) -> None:
        o["spec"].update(spec)
        if template:
            o["spec"]["template"]["spec"].update(template)

    return make("Job", mutate=mutate, create=create)


def indexed(**spec: Any) -> Obj:
    return job(completionMode="Indexed", **{"completions": 4, "parallelism": 2, **spec})


def exit_rule(
    action: str = "FailJob", operator: str = "In", values: list[Any] | None = None, **req: Any
) -> Obj:
    return {
        "action": action,
        "onExitCodes": {"operator": operator, "values": [1] if values is None else values, **req},
    }


def condition_rule(action: str = "Ignore", **pattern: Any) -> Obj:
    return {"action": action, "onPodConditions": [{"type": "DisruptionTarget", **pattern}]}


def policy(*rules: Obj) -> Obj:
    return {"podFailurePolicy": {"rules": list(rules)}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (policy(exit_rule(), condition_rule()), []),
        (
            policy(exit_rule(action="")),
            [
                (
                    "FieldValueRequired",
                    "spec.podFailurePolicy.rules[0].action",
                    'Required value: valid values: ["Count" "FailIndex" "FailJob" "Ignore"]',
                )
            ],
        ),
        (
            policy(exit_rule(action="Retry")),
            [
                (
                    "FieldValueNotSupported",
                    "spec.podFailurePolicy.rules[0].action",
                    'Unsupported value: "Retry": supported values: "Count", "FailIndex", "FailJob", "Ignore"',
                )
            ],
        ),
        (
            policy(exit_rule(action="FailIndex")),
            [
                (
                    "FieldValueInvalid",
                    "spec.podFailurePolicy.rules[0].action",
                    'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
                )
            ],
        ),
        (
            policy(exit_rule(operator="Between")),
            [
                (
                    "FieldValueNotSupported",
                    "spec.podFailurePolicy.rules[0].onExitCodes.operator",
                    'Unsupported value: "Between": supported values: "In", "NotIn"',
                )
            ],
        ),
        (
            policy(exit_rule(operator="")),
            [
                (
                    "FieldValueRequired",
                    "spec.podFailurePolicy.rules[0].onExitCodes.operator",
                    'Required value: valid values: ["In" "NotIn"]',
                )
            ],
        ),
        (
            policy(exit_rule(values=[])),
            [
                (
                    "FieldValueInvalid",
                    "spec.podFailurePolicy.rules[0].onExitCodes.values",
                    "Invalid value: []int32{}: at least one value is required",
                )
            ],
        ),
        (
            policy(exit_rule(values=[0, 3, 3, 2])),
            [
                (
                    "FieldValueInvalid",
                    "spec.podFailurePolicy.rules[0].onExitCodes.values[0]",
                    "Invalid value: 0: must not be 0 for the In operator",
                ),
                (
                    "FieldValueDuplicate",
                    "spec.podFailurePolicy.rules[0].onExitCodes.values[2]",
                    "Duplicate value: 3",
                ),
                (
                    "FieldValueInvalid",
                    "spec.podFailurePolicy.rules[0].onExitCodes.values",
                    "Invalid value: []int32{0, 3, 3, 2}: must be ordered",
                ),
            ],
        ),
        (policy(exit_rule(operator="NotIn", values=[0])), []),
        (
            policy(exit_rule(values=list(range(1, 257)))),
            [
                (
                    "FieldValueTooMany",
                    "spec.podFailurePolicy.rules[0].onExitCodes.values",
                    "Too many: 256: must have at most 255 items",
                )
            ],
        ),
        (
            policy(exit_rule(containerName="sidecar")),
            [
                (
                    "FieldValueInvalid",
                    "spec.podFailurePolicy.rules[0].onExitCodes.containerName",
                    'Invalid value: "sidecar": must be one of the container or initContainer names in the pod template',
                )
            ],
        ),
        (policy(exit_rule(containerName="app")), []),
        (
            policy(condition_rule(status="Maybe")),
            [
                (
                    "FieldValueNotSupported",
                    "spec.podFailurePolicy.rules[0].onPodConditions[0].status",
                    'Unsupported value: "Maybe": supported values: "False", "True", "Unknown"',
                )
            ],
        ),
        (
            policy({"action": "Ignore", "onPodConditions": [{"type": "bad type!", "status": "True"}]}),
            [("FieldValueInvalid", "spec.podFailurePolicy.rules[0].onPodConditions[0].type")],
        ),
        (
            policy({**exit_rule(), "onPodConditions": [{"type": "DisruptionTarget"}]}),
            [
                (
                    "FieldValueInvalid",
                    "spec.podFailurePolicy.rules[0]",
                    "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
                )
            ],
        ),
        (
            policy({"action": "Count"}),
            [
                (
                    "FieldValueInvalid",
                    "spec.podFailurePolicy.rules[0]",
                    "Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                )
            ],
        ),
        (
            policy(*[exit_rule()] * 21),
            [
                (
                    "FieldValueTooMany",
                    "spec.podFailurePolicy.rules",
                    "Too many: 21: must have at most 20 items",
                )
            ],
        ),
        (
            {**policy(exit_rule()), "podReplacementPolicy": "TerminatingOrFailed"},
            [
                (
                    "FieldValueNotSupported",
                    "spec.podReplacementPolicy",
                    'Unsupported value: "TerminatingOrFailed": supported values: "Failed"',
                )
            ],
        ),
    ],
)
def test_pod_failure_policy(spec: Obj, expected: list[tuple[str, str, str]]) -> None:
    got = check("Job", job(**spec))
    if expected and len(expected[0]) == 2:
        assert [g[:2] for g in got] == expected
    else:
        assert got == expected


def test_pod_failure_policy_needs_restart_policy_never() -> None:
    got = check("Job", job(template={"restartPolicy": "OnFailure"}, **policy(exit_rule())))
    assert got == [
        (
            "FieldValueInvalid",
            "spec.template.spec.restartPolicy",
            'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified',
        )
    ]


def test_fail_index_with_backoff_limit_per_index() -> None:
    assert check("Job", indexed(backoffLimitPerIndex=1, **policy(exit_rule(action="FailIndex")))) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"backoffLimitPerIndex": 1, "maxFailedIndexes": 2}, []),
        (
            {"maxFailedIndexes": 2},
            [
                (
                    "FieldValueRequired",
                    "spec.backoffLimitPerIndex",
                    "Required value: when maxFailedIndexes is specified",
                )
            ],
        ),
        (
            {"backoffLimitPerIndex": 1, "maxFailedIndexes": 5},
            [
                (
                    "FieldValueInvalid",
                    "spec.maxFailedIndexes",
                    "Invalid value: 5: must be less than or equal to completions",
                )
            ],
        ),
        (
            {"backoffLimitPerIndex": -1},
            [
                (
                    "FieldValueInvalid",
                    "spec.backoffLimitPerIndex",
                    "Invalid value: -1: must be greater than or equal to 0",
                )
            ],
        ),
        (
            {"completions": 100_001, "parallelism": 10_001, "backoffLimitPerIndex": 1},
            [
                (
                    "FieldValueRequired",
                    "spec.maxFailedIndexes",
                    "Required value: must be specified when completions is above 100000",
                ),
                (
                    "FieldValueInvalid",
                    "spec.parallelism",
                    "Invalid value: 10001: must be less than or equal to 10000 when completions are above "
                    "100000 and used with backoff limit per index",
                ),
            ],
        ),
        (
            {"completions": 200_000, "parallelism": 100_001},
            [
                (
                    "FieldValueInvalid",
                    "spec.parallelism",
                    "Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed",
                )
            ],
        ),
    ],
)
def test_backoff_limit_per_index(spec: Obj, expected: list[tuple[str, str, str]]) -> None:
    assert check("Job", indexed(**spec)) == expected


def test_per_index_fields_need_indexed_mode() -> None:
    assert check("Job", job(backoffLimitPerIndex=1, maxFailedIndexes=1)) == [
        (
            "FieldValueInvalid",
            "spec.backoffLimitPerIndex",
            "Invalid value: 1: requires indexed completion mode",
        ),
        ("FieldValueInvalid", "spec.maxFailedIndexes", "Invalid value: 1: requires indexed completion mode"),
    ]


def success(*rules: Obj) -> Obj:
    return {"successPolicy": {"rules": list(rules)}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (success({"succeededIndexes": "0,2-3", "succeededCount": 2}), []),
        (success({"succeededCount": 4}), []),
        (
            success(),
            [
                (
                    "FieldValueRequired",
                    "spec.successPolicy.rules",
                    "Required value: at least one rules must be specified when the successPolicy is specified",
                )
            ],
        ),
        (
            success({}),
            [
                (
                    "FieldValueRequired",
                    "spec.successPolicy.rules[0]",
                    "Required value: at least one of succeededCount or succeededIndexes must be specified",
                )
            ],
        ),
        (
            success({"succeededIndexes": "0-4"}),
            [
                (
                    "FieldValueInvalid",
                    "spec.successPolicy.rules[0].succeededIndexes",
                    'Invalid value: "0-4": error parsing succeededIndexes: too large index: "4"',
                )
            ],
        ),
        (
            success({"succeededIndexes": "2,1"}),
            [
                (
                    "FieldValueInvalid",
                    "spec.successPolicy.rules[0].succeededIndexes",
                    'Invalid value: "2,1": error parsing succeededIndexes: non-increasing order, previous: 2, current: 1',
                )
            ],
        ),
        (
            success({"succeededCount": 5}),
            [
                (
                    "FieldValueInvalid",
                    "spec.successPolicy.rules[0].succeededCount",
                    "Invalid value: 5: must be less than or equal to 4 (the number of specified completions)",
                )
            ],
        ),
        (
            success({"succeededIndexes": "1", "succeededCount": 2}),
            [
                (
                    "FieldValueInvalid",
                    "spec.successPolicy.rules[0].succeededCount",
                    "Invalid value: 2: must be less than or equal to 1 "
                    "(the number of indexes in the specified succeededIndexes field)",
                )
            ],
        ),
        (
            success(*[{"succeededCount": 1}] * 21),
            [("FieldValueTooMany", "spec.successPolicy.rules", "Too many: 21: must have at most 20 items")],
        ),
    ],
)
def test_success_policy(spec: Obj, expected: list[tuple[str, str, str]]) -> None:
    assert check("Job", indexed(**spec)) == expected


def test_success_policy_needs_indexed_mode() -> None:
    assert check("Job", job(**success({"succeededCount": 1}))) == [
        (
            "FieldValueInvalid",
            "spec.successPolicy",
            "Invalid value: batch.SuccessPolicy{Rules:[]batch.SuccessPolicyRule{batch.SuccessPolicyRule"
            "{SucceededIndexes:(*string)(nil), SucceededCount:1}}}: requires indexed completion mode",
        )
    ]


@pytest.mark.parametrize(
    ("managed_by", "expected"),
    [
        ("kueue.x-k8s.io/multikueue", []),
        ("kubernetes.io/job-controller", []),
        ("", [("FieldValueRequired", "spec.managedBy", "Required value")]),
        (
            "no-slash",
            [
                (
                    "FieldValueInvalid",
                    "spec.managedBy",
                    'Invalid value: "no-slash": must be a domain-prefixed path (such as "acme.io/foo")',
                )
            ],
        ),
        (
            "Example.com/x",
            [("FieldValueInvalid", "spec.managedBy")],
        ),
        (
            "example.com/a b",
            [("FieldValueInvalid", "spec.managedBy")],
        ),
        (
            "example.com/" + "a" * 60,
            [("FieldValueTooLong", "spec.managedBy", "Too long: may not be more than 63 bytes")],
        ),
    ],
)
def test_managed_by(managed_by: str, expected: list[tuple[str, ...]]) -> None:
    got = check("Job", job(managedBy=managed_by))
    assert [g[: len(e)] for g, e in zip(got, expected, strict=False)] == expected and len(got) == len(
        expected
    )


def test_indexed_job_name_must_leave_room_for_hostnames() -> None:
    name = "a" * 62
    got = check(
        "Job", make("Job", name, lambda o: o["spec"].update(completionMode="Indexed", completions=10))
    )
    assert got == [
        (
            "FieldValueInvalid",
            "metadata.name",
            f'Invalid value: "{name}": will not able to create pod with invalid DNS label: {name}-9',
        )
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"managedBy": "example.com/other"}, [("FieldValueInvalid", "spec.managedBy")]),
        (
            {"successPolicy": {"rules": [{"succeededCount": 1}]}},
            [("FieldValueInvalid", "spec.successPolicy")],
        ),
        ({"completions": 6, "parallelism": 6}, []),
        ({"completions": 6}, [("FieldValueInvalid", "spec.completions")]),
        ({"backoffLimitPerIndex": 2}, [("FieldValueInvalid", "spec.backoffLimitPerIndex")]),
    ],
)
def test_indexed_update_rules(change: Obj, expected: list[tuple[str, str]]) -> None:
    old = indexed(backoffLimitPerIndex=1, managedBy="example.com/mine")
    new = copy.deepcopy(old)
    new["spec"].update(change)
    assert fields("Job", new, old) == expected
    if change == {"completions": 6}:
        assert (
            check("Job", new, old)[0][2]
            == "Invalid value: 6: can only be modified in tandem with spec.parallelism"
        )


# --- /status ---------------------------------------------------------------------------------

START = "2026-11-24T10:00:00Z"
END = "2026-11-24T10:05:00Z"


def cond(type_: str, status: str = "True") -> Obj:
    return {"type": type_, "status": status}


def status_check(old_job: Obj, status: Obj, old_status: Obj | None = None) -> list[tuple[str, str, str]]:
    old = copy.deepcopy(old_job)
    old["status"] = old_status or {}
    new = copy.deepcopy(old)
    new["status"] = status
    return [(c["reason"], c["field"], c["message"]) for c in validate("batch", "Job", new, old, "status")]


RUNNING = {"startTime": START, "active": 1}


@pytest.mark.parametrize(
    ("status", "old_status", "expected"),
    [
        ({"startTime": START, "active": 1, "ready": 0}, {}, []),
        (
            {
                "startTime": START,
                "succeeded": 1,
                "completionTime": END,
                "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
            },
            RUNNING,
            [],
        ),
        (
            {"startTime": START, "active": -1},
            {"startTime": START},
            [("FieldValueInvalid", "status.active", "Invalid value: -1: must be greater than or equal to 0")],
        ),
        (
            {"startTime": START, "conditions": [cond("Complete")]},
            RUNNING,
            [
                (
                    "FieldValueRequired",
                    "status.completionTime",
                    "Required value: completionTime is required for Complete jobs",
                )
            ],
        ),
        (
            {"startTime": START, "active": 1, "completionTime": END},
            RUNNING,
            [
                (
                    "FieldValueInvalid",
                    "status.completionTime",
                    "Invalid value: 2026-11-24 10:05:00 +0000 UTC: cannot set completionTime when there is no "
                    "Complete=True condition",
                )
            ],
        ),
        (
            {"startTime": START, "active": 1, "conditions": [cond("Failed")]},
            RUNNING,
            [
                (
                    "FieldValueInvalid",
                    "status.active",
                    "Invalid value: 1: active>0 is invalid for finished job",
                )
            ],
        ),
        (
            {"conditions": [cond("FailureTarget"), cond("Failed")]},
            {},
            [
                (
                    "FieldValueRequired",
                    "status.startTime",
                    "Required value: startTime is required for finished job",
                )
            ],
        ),
        (
            {
                "startTime": START,
                "uncountedTerminatedPods": {"failed": ["u1"]},
                "conditions": [cond("Failed")],
            },
            RUNNING,
            [
                (
                    "FieldValueInvalid",
                    "status.uncountedTerminatedPods",
                    'Invalid value: batch.UncountedTerminatedPods{Succeeded:[]types.UID(nil), Failed:[]types.UID{"u1"}}: '
                    "uncountedTerminatedPods needs to be empty for finished job",
                ),
            ],
        ),
        (
            {"startTime": START, "uncountedTerminatedPods": {"succeeded": ["u1", ""], "failed": ["u1"]}},
            {"startTime": START},
            [
                (
                    "FieldValueInvalid",
                    "status.uncountedTerminatedPods.succeeded[1]",
                    'Invalid value: "": must not be empty',
                ),
                ("FieldValueDuplicate", "status.uncountedTerminatedPods.failed[0]", 'Duplicate value: "u1"'),
            ],
        ),
        (
            {"startTime": START},
            {"startTime": START, "conditions": [cond("Failed")]},
            [
                (
                    "FieldValueInvalid",
                    "status.conditions",
                    "Invalid value: cannot disable the terminal Failed=True condition",
                )
            ],
        ),
        (
            {"startTime": START, "failed": 1},
            {"startTime": START, "failed": 2},
            [("FieldValueInvalid", "status.failed", "Invalid value: 1: cannot decrease the failed counter")],
        ),
        (
            {"startTime": END},
            {"startTime": START},
            [
                (
                    "FieldValueRequired",
                    "status.startTime",
                    "Required value: startTime cannot be removed for unsuspended job",
                )
            ],
        ),
        # Resuming restarts the clock (1.32.10's fix): allowed while Suspended goes True -> False.
        (
            {"startTime": END, "conditions": [cond("Suspended", "False")]},
            {"startTime": START, "conditions": [cond("Suspended")]},
            [],
        ),
        (
            {"startTime": END, "conditions": [cond("Suspended", "False")]},
            {"startTime": START, "conditions": [cond("Suspended", "False")]},
            [
                (
                    "FieldValueRequired",
                    "status.startTime",
                    "Required value: startTime cannot be removed for unsuspended job",
                )
            ],
        ),
        (
            {"startTime": START, "completedIndexes": "0"},
            {"startTime": START},
            [
                (
                    "FieldValueInvalid",
                    "status.completedIndexes",
                    'Invalid value: "0": cannot set non-empty completedIndexes when non-indexed completion mode',
                )
            ],
        ),
        (
            {"startTime": START, "conditions": [cond("SuccessCriteriaMet"), cond("FailureTarget")]},
            {"startTime": START},
            [
                (
                    "FieldValueInvalid",
                    "status.conditions",
                    "Invalid value: cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
                )
            ],
        ),
        (
            {
                "startTime": START,
                "completionTime": START,
                "conditions": [cond("Complete"), cond("SuccessCriteriaMet")],
            },
            {"startTime": START, "completionTime": START, "conditions": [cond("Complete")]},
            [
                (
                    "FieldValueInvalid",
                    "status.conditions",
                    "Invalid value: cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
                )
            ],
        ),
        # A status that was already wrong does not block writes that leave the wrong part alone.
        (
            {"startTime": START, "active": 2, "conditions": [cond("Complete")]},
            {"startTime": START, "active": 2, "conditions": [cond("Complete")]},
            [],
        ),
    ],
)
def test_status_rules(status: Obj, old_status: Obj, expected: list[tuple[str, str, str]]) -> None:
    assert status_check(job(), status, old_status) == expected


@pytest.mark.parametrize(
    ("status", "old_status", "expected"),
    [
        ({"startTime": START, "completedIndexes": "0,2-3", "failedIndexes": "1"}, {"startTime": START}, []),
        (
            {"startTime": START, "completedIndexes": "0-4"},
            {"startTime": START},
            [
                (
                    "FieldValueInvalid",
                    "status.completedIndexes",
                    'Invalid value: "0-4": error parsing completedIndexes: too large index: "4"',
                )
            ],
        ),
        (
            {"startTime": START, "completedIndexes": "0-2", "failedIndexes": "2-3"},
            {"startTime": START},
            [
                (
                    "FieldValueInvalid",
                    "status.failedIndexes",
                    'Invalid value: "2-3": failedIndexes and completedIndexes overlap at index: 2',
                )
            ],
        ),
        (
            {
                "startTime": START,
                "completedIndexes": "0",
                "completionTime": END,
                "conditions": [cond("Complete")],
            },
            {"startTime": START},
            [
                (
                    "FieldValueInvalid",
                    "status.conditions",
                    "Invalid value: cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
                )
            ],
        ),
    ],
)
def test_indexed_status_rules(status: Obj, old_status: Obj, expected: list[tuple[str, str, str]]) -> None:
    spec = indexed(backoffLimitPerIndex=1, **success({"succeededIndexes": "0"}))
    assert status_check(spec, status, old_status) == expected


def test_failed_indexes_need_backoff_limit_per_index() -> None:
    assert status_check(indexed(), {"startTime": START, "failedIndexes": "1"}, {"startTime": START}) == [
        (
            "FieldValueInvalid",
            "status.failedIndexes",
            'Invalid value: "1": cannot set non-null failedIndexes when backoffLimitPerIndex is null',
        )
    ]


def test_status_write_does_not_revalidate_the_stored_spec() -> None:
    broken = job()
    broken["spec"]["backoffLimit"] = -1  # stored before a rule existed
    assert status_check(broken, {"startTime": START}) == []


@pytest.mark.parametrize(
    ("text", "completions", "spans", "error"),
    [
        ("", 3, [], ""),
        ("0,2-4,6", 7, [(0, 0), (2, 4), (6, 6)], ""),
        (
            "1-2-3",
            7,
            [],
            "the fragment \"1-2-3\" violates the requirement that an index interval can have at most two parts separated by '-'",
        ),
        ("a", 7, [], 'cannot convert string to integer for index: "a"'),
        ("3-3", 7, [], "non-increasing order, previous: 3, current: 3"),
        ("1-2,2", 7, [], "non-increasing order, previous: 2, current: 2"),
        ("7", 7, [], 'too large index: "7"'),
    ],
)
def test_indexes_format(text: str, completions: int, spans: list[tuple[int, int]], error: str) -> None:
    assert indexes_format(text, completions) == (spans, error)
