"""`kcm apiserver`'s DefaultTolerationSeconds flags: kube-apiserver's names, default 300, a
Go int64 each."""

from __future__ import annotations

import pytest
from kcm_cli import main


def test_the_toleration_seconds_default_to_300() -> None:
    args, _ = main.parse(["apiserver", "--kubeconfig-out", "k"])
    assert (args.default_not_ready_toleration_seconds, args.default_unreachable_toleration_seconds) == (
        300,
        300,
    )


def test_the_toleration_seconds_are_read() -> None:
    args, _ = main.parse(
        [
            "apiserver",
            "--kubeconfig-out",
            "k",
            "--default-not-ready-toleration-seconds=0",
            "--default-unreachable-toleration-seconds",
            "-5",
        ]
    )
    assert (args.default_not_ready_toleration_seconds, args.default_unreachable_toleration_seconds) == (0, -5)


@pytest.mark.parametrize("value", ["x", "1.5", str(2**63), ""])
def test_a_value_that_is_no_int64_is_refused(value: str) -> None:
    with pytest.raises(SystemExit):
        main.parse(["apiserver", "--kubeconfig-out", "k", f"--default-not-ready-toleration-seconds={value}"])
