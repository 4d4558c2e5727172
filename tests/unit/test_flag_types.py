"""kcm_shared.bus.flags' argparse types for controllers' own flags."""

from __future__ import annotations

import argparse

import pytest
from kcm_shared.bus import flags


@pytest.mark.parametrize(("text", "seconds"), [("0s", 0.0), ("1.5s", 1.5), ("2m", 120.0)])
def test_non_negative_duration(text: str, seconds: float) -> None:
    assert flags.non_negative_duration(text) == pytest.approx(seconds)


def test_negative_duration_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="non-negative duration"):
        flags.non_negative_duration("-1s")


@pytest.mark.parametrize(
    ("text", "ok"), [("1", True), ("10", True), ("0", False), ("11", False), ("x", False)]
)
def test_int_in_range(text: str, ok: bool) -> None:
    parse = flags.int_in_range("some-flag", 1, 10)
    if ok:
        assert parse(text) == int(text)
    else:
        with pytest.raises(
            argparse.ArgumentTypeError, match=f"some-flag must be between 1 and 10, got {text}"
        ):
            parse(text)
