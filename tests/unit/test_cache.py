"""Pure helpers of the cache; the cache itself is tested against nats-server in tests/e2e."""

from __future__ import annotations

import pytest
from kcm_shared import cache


@pytest.mark.parametrize(
    ("have", "want", "expected"),
    [
        ("10", "9", True),
        ("10", "10", True),
        ("9", "10", False),  # numeric, not lexical: "9" > "10" as strings
        ("100", "99", True),
        ("", "1", False),  # nothing consumed yet
        ("5", "", True),  # no requirement
        ("", "", True),
        ("abc", "abc", True),  # opaque versions can only be compared for equality
        ("abc", "abd", False),
    ],
)
def test_rv_at_least(have: str, want: str, expected: bool) -> None:
    assert cache.rv_at_least(have, want) is expected
