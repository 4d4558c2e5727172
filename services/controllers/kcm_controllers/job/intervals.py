"""Sets of completion indexes as sorted, disjoint, closed intervals.

Upstream's orderedIntervals (pkg/controller/job/indexed_job_utils.go): an Indexed Job's
`status.completedIndexes` and `status.failedIndexes`, and a successPolicy rule's
`succeededIndexes`, are written as "1,3-5,7". The job controller parses them from status
(`Intervals.parse`), adds the indexes its pods just finished (`with_indexes`) and writes
them back (`str`); `success_policy.match` compares them.

Parsing skips what upstream skips: a part that is not a decimal number, and everything from
the first part whose start is at or past `completions`; an end past the range is cut to
`completions - 1`. Unlike upstream, parts out of order, overlapping or reversed ("5-3") are
normalised (sorted and merged; reversed ones skipped) rather than kept as written, so every
`Intervals` is sorted and disjoint.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator

# strconv.Atoi: an optional sign and ASCII digits, nothing else (no spaces, no "_").
_ATOI = re.compile(r"[+-]?[0-9]+")


def _atoi(text: str) -> int | None:
    return int(text) if _ATOI.fullmatch(text) else None


class Intervals:
    """An immutable set of non-negative indexes, kept as sorted, disjoint [first, last] spans."""

    __slots__ = ("_firsts", "_spans")

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        merged: list[tuple[int, int]] = []
        for first, last in sorted(s for s in spans if s[0] <= s[1]):
            if merged and first <= merged[-1][1] + 1:
                if last > merged[-1][1]:
                    merged[-1] = (merged[-1][0], last)
            else:
                merged.append((first, last))
        self._spans = tuple(merged)
        self._firsts = [first for first, _ in merged]

    @classmethod
    def parse(cls, text: str | None, completions: int) -> Intervals:
        """Read "1,3-5,7" as upstream parseIndexesFromString does (see the module docstring)."""
        spans: list[tuple[int, int]] = []
        if not text:
            return cls()
        for part in text.split(","):
            limits = part.split("-")
            first = _atoi(limits[0])
            if first is None:
                continue
            if first >= completions:
                break
            if len(limits) > 1:
                last = _atoi(limits[1])
                if last is None:
                    continue
                last = min(last, completions - 1)
            else:
                last = first
            spans.append((first, last))
        return cls(spans)

    @classmethod
    def of(cls, indexes: Iterable[int]) -> Intervals:
        return cls((ix, ix) for ix in indexes)

    def with_indexes(self, indexes: Iterable[int]) -> Intervals:
        """The union with `indexes` (upstream withOrderedIndexes; any order accepted)."""
        return Intervals((*self._spans, *((ix, ix) for ix in indexes)))

    def merge(self, other: Intervals) -> Intervals:
        """The union with `other` (upstream orderedIntervals.merge)."""
        return Intervals((*self._spans, *other._spans))

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        return self._spans

    def total(self) -> int:
        return sum(last - first + 1 for first, last in self._spans)

    def __contains__(self, index: object) -> bool:
        if not isinstance(index, int):
            return False
        at = bisect.bisect_right(self._firsts, index) - 1
        return at >= 0 and index <= self._spans[at][1]

    def __iter__(self) -> Iterator[int]:
        for first, last in self._spans:
            yield from range(first, last + 1)

    def __bool__(self) -> bool:
        return bool(self._spans)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Intervals) and self._spans == other._spans

    def __hash__(self) -> int:
        return hash(self._spans)

    def __str__(self) -> str:
        # Two adjacent indexes are written "3,4", as upstream does, not "3-4".
        return ",".join(
            str(first) if first == last else f"{first}{',' if last == first + 1 else '-'}{last}"
            for first, last in self._spans
        )

    def __repr__(self) -> str:
        return f"Intervals({list(self._spans)!r})"
