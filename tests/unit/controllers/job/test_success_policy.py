"""successPolicy matching, with upstream's success_policy_test.go cases as data."""

from __future__ import annotations

import msgspec
import pytest
from kcm_controllers.job import success_policy
from kcm_controllers.job.intervals import Intervals

Rule = tuple[str | None, int | None]  # (succeededIndexes, succeededCount)
MATCHED = "Matched rules at index {}"

# name: (rules or None for no policy, completions, succeeded spans, want message)
CASES: dict[str, tuple[list[Rule] | None, int, list[tuple[int, int]], str | None]] = {
    "successPolicy is null": (None, 10, [(0, 0)], None),
    "any rules are nothing": ([], 10, [(0, 0)], None),
    "rules.succeededIndexes is invalid format": ([("invalid-form", None)], 10, [(0, 0)], None),
    "rules.succeededIndexes is specified; succeededIndexes matched rules": (
        [("0-2", None)],
        10,
        [(0, 2), (4, 7)],
        MATCHED.format(0),
    ),
    "rules.succeededIndexes is specified; succeededIndexes didn't match rules": (
        [("3", None)],
        10,
        [(0, 2)],
        None,
    ),
    "rules.succeededCount is specified; succeededIndexes matched rules": (
        [(None, 2)],
        10,
        [(0, 2)],
        MATCHED.format(0),
    ),
    "rules.succeededCount is specified; succeededIndexes didn't match rules": (
        [(None, 4)],
        10,
        [(0, 2)],
        None,
    ),
    "multiple rules; rules.succeededIndexes is specified; succeededIndexes met one of rules": (
        [("9", None), ("4,6", None)],
        10,
        [(0, 2), (4, 7)],
        MATCHED.format(1),
    ),
    "multiple rules; rules.succeededIndexes is specified; succeededIndexes met all rules": (
        [("0,1", None), ("5", None)],
        10,
        [(0, 2), (4, 7)],
        MATCHED.format(0),
    ),
    "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes met all rules": (
        [("3-6", 2)],
        10,
        [(0, 2), (4, 7)],
        MATCHED.format(0),
    ),
    "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes didn't match rules": (
        [("3-6", 2)],
        10,
        [(0, 2), (6, 7)],
        None,
    ),
    "rules.succeededIndexes is specified; succeededIndexes are nothing": ([(None, 4)], 10, [], None),
    "rules is proper subset of succeededIndexes": (
        [("2-4,6-8", None)],
        10,
        [(1, 5), (6, 9)],
        MATCHED.format(0),
    ),
    "rules equals succeededIndexes": ([("2-4,6-9", None)], 10, [(2, 4), (6, 9)], MATCHED.format(0)),
    "rules is subset of succeededIndexes": ([("2-4,8-12", None)], 10, [(2, 5), (7, 15)], MATCHED.format(0)),
    "rules is an empty set": ([("", None)], 10, [(1, 3)], None),
    "succeededIndexes is an empty set": ([("", None)], 10, [], None),
    "all elements of rules.succeededIndexes aren't included in succeededIndexes": (
        [("10-12,14-16", None)],
        10,
        [(1, 3), (5, 7)],
        None,
    ),
    "rules overlaps succeededIndexes at first": ([("1-3,5-7", None)], 10, [(2, 4), (6, 8)], None),
    "with succeededCount; rules overlaps succeededIndexes at first": (
        [("1-3,5-7", 4)],
        10,
        [(2, 4), (6, 8)],
        MATCHED.format(0),
    ),
    "rules overlaps succeededIndexes at last": ([("2-4,6-9", None)], 10, [(1, 3), (5, 7)], None),
    "with succeededCount; rules overlaps succeededIndexes at last": (
        [("2-4,6-9", 4)],
        10,
        [(1, 3), (5, 7)],
        MATCHED.format(0),
    ),
    "rules completely overlaps succeededIndexes": ([("0-4,6-9", None)], 10, [(1, 3), (7, 8)], None),
    "with succeededCount; rules completely overlaps succeededIndexes": (
        [("0-4,6-9", 5)],
        10,
        [(1, 3), (7, 8)],
        MATCHED.format(0),
    ),
    "rules overlaps multiple succeededIndexes at last": ([("0-6,8-9", None)], 10, [(1, 3), (5, 9)], None),
    "with succeededCount; rules overlaps multiple succeededIndexes at last": (
        [("0-6,8-9", 7)],
        10,
        [(1, 3), (5, 9)],
        MATCHED.format(0),
    ),
    "rules overlaps succeededIndexes at first, and rules equals succeededIndexes at last": (
        [("0-5,7-9", None)],
        10,
        [(1, 5), (7, 10)],
        None,
    ),
    "with succeededCount; rules overlaps succeededIndexes at first, and equals at last": (
        [("0-5,7-9", 8)],
        10,
        [(1, 5), (7, 10)],
        MATCHED.format(0),
    ),
    "the first rules overlaps succeededIndexes at first": ([("0-3,6-9", None)], 10, [(1, 10)], None),
    "with succeededCount; the first rules overlaps succeededIndexes at first": (
        [("0-3,6-9", 7)],
        10,
        [(1, 10)],
        MATCHED.format(0),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_match(case: tuple[list[Rule] | None, int, list[tuple[int, int]], str | None]) -> None:
    rules, completions, spans, want = case
    policy = None
    if rules is not None:
        doc = [
            {k: v for k, v in (("succeededIndexes", ix), ("succeededCount", n)) if v is not None}
            for ix, n in rules
        ]
        policy = msgspec.convert({"rules": doc}, success_policy.SuccessPolicy)
    assert success_policy.match(policy, completions, Intervals(spans)) == want
