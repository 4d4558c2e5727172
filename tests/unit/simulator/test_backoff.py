"""The simulated kubelet's flowcontrol back-off (image pulls, container restarts)."""

from __future__ import annotations

import pytest
from kcm_simulator import backoff


def test_backoff_doubles_to_the_maximum_and_starts_over_after_quiet() -> None:
    b = backoff.Backoff()
    now = 1000.0
    delays = []
    for _ in range(7):
        delays.append(b.next("uid_nginx:404", now))
        now += 1
    assert delays == [10, 20, 40, 80, 160, 300, 300]
    assert b.remaining("uid_nginx:404", now) == 299
    assert b.remaining("other", now) == 0
    # Quiet for more than twice the maximum: the next failure waits the first delay again.
    assert b.next("uid_nginx:404", now + 601) == 10


def test_backoff_is_scaled_and_bounded() -> None:
    b = backoff.Backoff(scale=0.01, size=2)
    assert b.next("a", 0) == pytest.approx(0.1)
    assert b.next("a", 0) == pytest.approx(0.2)
    b.next("b", 0)
    b.next("c", 0)
    assert b.remaining("a", 0) == 0  # the least recently failed key was forgotten
    b.forget("c")
    assert b.remaining("c", 0) == 0 and b.remaining("b", 0) == pytest.approx(0.1)


def test_remaining_since_counts_from_the_callers_time_as_is_in_back_off_since() -> None:
    b = backoff.Backoff()
    b.next("pod_c", 100.0)  # the first exit: restarted at once, 10 s recorded
    # The next exit, 5 s later: back off 10 s from that exit.
    assert b.remaining_since("pod_c", 105.0, 106.0) == 9
    assert b.delay("pod_c") == 10
    assert b.remaining_since("pod_c", 105.0, 115.0) == 0
    # A container that ran more than twice the maximum since the last failure restarts at once.
    assert b.remaining_since("pod_c", 100.0 + 601, 100.0 + 601) == 0
    assert b.remaining_since("other", 0.0, 0.0) == 0 and b.delay("other") == 0
