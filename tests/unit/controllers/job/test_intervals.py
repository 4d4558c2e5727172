"""Completion-index intervals, with upstream's indexed_job_utils_test.go cases as data."""

from __future__ import annotations

import pytest
from kcm_controllers.job.intervals import Intervals

# (status text, completions, indexes that just succeeded, want status spans, want spans):
# TestCalculateSucceededIndexes, less the pod filtering the controller does.
SUCCEEDED = {
    "one index": ("", 2, [1], [], [(1, 1)]),
    "two separate": ("", 11, [5, 10], [], [(5, 5), (10, 10)]),
    "two intervals": ("", 8, [2, 3, 5, 6, 7], [], [(2, 3), (5, 7)]),
    "prev interval out of range": ("0-5,8-10", 8, [], [(0, 5)], [(0, 5)]),
    "prev interval partially out of range": ("0-5,8-10", 10, [], [(0, 5), (8, 9)], [(0, 5), (8, 9)]),
    "prev and new separate": (
        "0,4,5,10-12",
        13,
        [2, 7, 8],
        [(0, 0), (4, 5), (10, 12)],
        [(0, 0), (2, 2), (4, 5), (7, 8), (10, 12)],
    ),
    "prev between new": ("3,4,6", 9, [2, 7, 8], [(3, 4), (6, 6)], [(2, 4), (6, 8)]),
    "new between prev": ("2,7,8", 9, [3, 4, 6], [(2, 2), (7, 8)], [(2, 4), (6, 8)]),
    "new within prev": ("2-7", 10, [0, 3, 5, 9], [(2, 7)], [(0, 0), (2, 7), (9, 9)]),
    "corrupted interval": ("0,1-foo,bar", 4, [3], [(0, 0)], [(0, 0), (3, 3)]),
}


@pytest.mark.parametrize("case", SUCCEEDED.values(), ids=SUCCEEDED.keys())
def test_parse_then_add_indexes(
    case: tuple[str, int, list[int], list[tuple[int, int]], list[tuple[int, int]]],
) -> None:
    text, completions, new, want_status, want = case
    status = Intervals.parse(text, completions)
    assert list(status.spans) == want_status
    assert list(status.with_indexes(new).spans) == want


HAS = {
    "empty": ([], 4, False),
    "before all": ([(2, 4), (5, 7)], 1, False),
    "after all": ([(2, 4), (6, 8)], 9, False),
    "in between": ([(2, 4), (6, 8)], 5, False),
    "in first": ([(2, 4), (6, 8)], 2, True),
    "in second": ([(2, 4), (6, 8)], 8, True),
}


@pytest.mark.parametrize("case", HAS.values(), ids=HAS.keys())
def test_has(case: tuple[list[tuple[int, int]], int, bool]) -> None:
    spans, index, want = case
    assert (index in Intervals(spans)) is want


@pytest.mark.parametrize(
    ("spans", "text"),
    [
        ([], ""),
        ([(0, 0)], "0"),
        ([(3, 4)], "3,4"),  # two indexes are listed, not ranged, as upstream writes them
        ([(1, 1), (3, 5), (7, 7)], "1,3-5,7"),
        ([(0, 2), (10, 10)], "0-2,10"),
    ],
)
def test_str_round_trips(spans: list[tuple[int, int]], text: str) -> None:
    assert str(Intervals(spans)) == text
    assert Intervals.parse(text, 100) == Intervals(spans)


@pytest.mark.parametrize(
    ("text", "completions", "want"),
    [
        (None, 5, []),
        ("", 5, []),
        ("+1", 5, [(1, 1)]),  # strconv.Atoi takes a sign
        (" 1,2", 5, [(2, 2)]),  # ...but no spaces
        ("1_0,3", 50, [(3, 3)]),  # ...nor Python's digit separators
        ("-1,2", 5, [(2, 2)]),  # "-1" splits into "" and "1"
        ("4,1", 3, []),  # upstream stops at the first part past the range
        ("3-1,5", 9, [(5, 5)]),  # a reversed span is dropped
        ("5,1-2,2-6", 9, [(1, 6)]),  # out of order and overlapping parts are merged
    ],
)
def test_parse_edge_cases(text: str | None, completions: int, want: list[tuple[int, int]]) -> None:
    assert list(Intervals.parse(text, completions).spans) == want


def test_set_operations() -> None:
    a = Intervals.of([5, 1, 2, 3])
    assert list(a.spans) == [(1, 3), (5, 5)]
    assert a.total() == 4
    assert list(a) == [1, 2, 3, 5]
    assert a.merge(Intervals([(4, 4), (9, 10)])) == Intervals([(1, 5), (9, 10)])
    assert not Intervals() and a
    assert "1" not in a
