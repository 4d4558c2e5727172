"""The sync server's rate limit: a burst per requester, then its rate; every requester counts
towards the total."""

from __future__ import annotations

from kcm_watcher import syncserver


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_requester_gets_its_burst_then_waits_for_its_rate() -> None:
    clock = Clock()
    limit = syncserver.RateLimit(per_requester=(3, 2.0), total=(100, 100.0), clock=clock)
    assert [limit.wait("_INBOX.a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limit.wait("_INBOX.a") == 0.5
    assert limit.wait("_INBOX.b") == 0.0  # another requester has its own burst
    clock.now += 0.5
    assert limit.wait("_INBOX.a") == 0.0


def test_the_total_limits_requesters_that_change_their_reply_subject() -> None:
    limit = syncserver.RateLimit(per_requester=(3, 1.0), total=(5, 1.0), clock=Clock())
    waits = [limit.wait(f"_INBOX.{i}") for i in range(6)]
    assert waits[:5] == [0.0] * 5 and waits[5] > 0


def test_the_requester_is_the_reply_subject_less_its_last_token() -> None:
    assert syncserver.requester("_INBOX.abc.7") == "_INBOX.abc"
    assert syncserver.requester("reply") == "reply"
