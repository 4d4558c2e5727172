"""kcm_shared.apimachinery.resourceversion: ordering numeric resourceVersions, never opaque ones."""

from __future__ import annotations

import pytest
from kcm_shared.apimachinery import resourceversion


@pytest.mark.parametrize(
    ("rv", "than", "expected"),
    [("10", "9", True), ("10", "10", False), ("9", "10", False), ("a", "1", None), ("1", "", None)],
)
def test_newer_is_strict_and_unknown_for_opaque_versions(rv: str, than: str, expected: bool | None) -> None:
    assert resourceversion.newer(rv, than) is expected


@pytest.mark.parametrize(
    ("rv", "held", "stale"),
    [
        ("3", "5", True),  # an older state: a deposed watcher's, or a fetch's race
        ("5", "5", False),  # the same state (a re-delivery, or a relist's tombstone of it)
        ("7", "5", False),
        ("9", "10", True),  # numeric, not lexical
        ("abc", "5", False),  # opaque versions cannot be ordered: stream order decides
        ("5", "abc", False),
        ("", "5", False),
    ],
)
def test_older_is_strict_and_never_for_opaque_versions(rv: str, held: str, stale: bool) -> None:
    assert resourceversion.older(rv, held) is stale
