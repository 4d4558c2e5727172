"""The argparse types of flags: Go durations in seconds (`kcm_shared.apimachinery.goduration`),
for leader election, the coordinator, the watcher and the controllers' own periods, and integer
ranges for a Spec's own flags (`kcm_shared.runtime.controllerflags`)."""

from __future__ import annotations

import argparse

import pytest
from kcm_shared.apimachinery import goduration
from kcm_shared.runtime import controllerflags


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m", 60.0),
        ("500ms", 0.5),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("0", 0.0),
        ("-2s", -2.0),
    ],
)
def test_seconds(text: str, seconds: float) -> None:
    assert goduration.seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1x", "1s2"])
def test_seconds_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        goduration.seconds(text)


def test_positive_seconds_refuses_zero_and_below() -> None:
    assert goduration.positive_seconds("1ms") == pytest.approx(0.001)
    for text in ("0s", "-1s"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive duration"):
            goduration.positive_seconds(text)


@pytest.mark.parametrize(("text", "seconds"), [("0s", 0.0), ("1.5s", 1.5), ("2m", 120.0)])
def test_non_negative_seconds(text: str, seconds: float) -> None:
    assert goduration.non_negative_seconds(text) == pytest.approx(seconds)


def test_negative_duration_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="non-negative duration"):
        goduration.non_negative_seconds("-1s")


@pytest.mark.parametrize(
    ("text", "ok"), [("1", True), ("10", True), ("0", False), ("11", False), ("x", False)]
)
def test_int_in_range(text: str, ok: bool) -> None:
    parse = controllerflags.int_in_range("some-flag", 1, 10)
    if ok:
        assert parse(text) == int(text)
    else:
        with pytest.raises(
            argparse.ArgumentTypeError, match=f"some-flag must be between 1 and 10, got {text}"
        ):
            parse(text)
