"""The simulator scheduler's queue: which pods it tries, in what order, and when it retries them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kcm_simulator.calls import Writer
from kcm_simulator.scheduler import Scheduler

Obj = dict[str, Any]


class _RecordingWriter(Writer):
    """Accepts every write without sending it, remembering what it was."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def call(self, what: str, fn: Callable[[], Awaitable[Obj]]) -> Obj | None:
        self.calls.append(what)
        return {}


def _node(name: str, pods: str = "110", heartbeat: str = "t0") -> Obj:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": pods},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}],
        },
    }


def _pod(name: str, created: str = "2026-01-01T00:00:00Z", **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name, "creationTimestamp": created},
        "spec": {"containers": [{"name": "c"}], **spec},
        "status": {"phase": "Pending"},
    }


def _scheduler() -> tuple[Scheduler, _RecordingWriter]:
    writer = _RecordingWriter()
    return Scheduler(None, writer), writer  # type: ignore[arg-type]  # the writer never calls the client


async def _settle(scheduler: Scheduler) -> None:
    task = asyncio.ensure_future(scheduler.run())
    for _ in range(20):
        await asyncio.sleep(0)
    task.cancel()


def test_pods_are_bound_oldest_first_spreading_over_the_least_loaded_nodes() -> None:
    async def scenario() -> list[str]:
        scheduler, writer = _scheduler()
        scheduler.reset_nodes([_node("a"), _node("b")])
        scheduler.reset_pods(
            [_pod("late", "2026-01-01T00:00:02Z"), _pod("early", "2026-01-01T00:00:01Z"), _pod("x")]
        )
        scheduler.on_pod("ADDED", _pod("new", "2026-01-01T00:00:03Z"))
        await _settle(scheduler)
        return writer.calls

    assert asyncio.run(scenario()) == ["bind ns/x", "bind ns/early", "bind ns/late", "bind ns/new"]


def _hog(phase: str = "Running") -> Obj:
    pod = _pod("hog", nodeName="a")
    pod["status"]["phase"] = phase
    return pod


@pytest.mark.parametrize(
    ("change", "retried"),
    [
        (lambda s: s.on_node("MODIFIED", _node("a", pods="1", heartbeat="t1")), False),
        (lambda s: s.on_node("MODIFIED", _node("a", pods="2")), True),
        (lambda s: s.on_node("ADDED", _node("b")), True),
        (lambda s: s.on_pod("DELETED", _hog()), True),
        (lambda s: s.on_pod("MODIFIED", _hog("Succeeded")), True),
        (lambda s: s.on_pod("MODIFIED", _hog()), False),
    ],
)
def test_unschedulable_pods_are_retried_only_when_a_change_may_make_room(
    change: Callable[[Scheduler], None], retried: bool
) -> None:
    async def scenario() -> list[str]:
        scheduler, writer = _scheduler()
        scheduler.reset_nodes([_node("a", pods="1")])
        scheduler.reset_pods([_hog(), _pod("waiting")])
        await _settle(scheduler)
        assert writer.calls == ["unschedulable ns/waiting"]
        writer.calls.clear()
        change(scheduler)
        await _settle(scheduler)
        return writer.calls

    assert asyncio.run(scenario()) == (["bind ns/waiting"] if retried else [])


class _GatedWriter(_RecordingWriter):
    """Holds every binding until released; refuses the bindings of `refused` pods."""

    def __init__(self, refused: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.refused = refused

    async def call(self, what: str, fn: Callable[[], Awaitable[Obj]]) -> Obj | None:
        self.calls.append(what)
        if not what.startswith("bind "):
            return {}
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await self.gate.wait()
        self.in_flight -= 1
        return None if what.removeprefix("bind ns/") in self.refused else {}


def test_bindings_are_sent_concurrently_with_each_pod_assumed_on_its_node() -> None:
    async def scenario() -> tuple[int, list[str]]:
        writer = _GatedWriter()
        scheduler = Scheduler(None, writer)  # type: ignore[arg-type]
        # Room for two pods: the third must wait for capacity although no binding has returned.
        scheduler.reset_nodes([_node("a", pods="2")])
        scheduler.reset_pods([_pod("p1", "t1"), _pod("p2", "t2"), _pod("p3", "t3")])
        running = asyncio.ensure_future(scheduler.run())
        await _turns()
        most = writer.most_in_flight
        writer.gate.set()
        await _turns()
        running.cancel()
        return most, writer.calls

    most, calls = asyncio.run(scenario())
    assert most == 2
    assert sorted(calls) == ["bind ns/p1", "bind ns/p2", "unschedulable ns/p3"]


def test_a_refused_binding_gives_its_room_back() -> None:
    async def scenario() -> list[str]:
        writer = _GatedWriter(refused=("p1",))
        scheduler = Scheduler(None, writer)  # type: ignore[arg-type]
        scheduler.reset_nodes([_node("a", pods="1")])
        scheduler.reset_pods([_pod("p1", "t1"), _pod("p2", "t2")])
        running = asyncio.ensure_future(scheduler.run())
        await _turns()
        assert sorted(writer.calls) == ["bind ns/p1", "unschedulable ns/p2"]
        writer.gate.set()
        await _turns()
        running.cancel()
        return writer.calls[2:]

    assert asyncio.run(scenario()) == ["bind ns/p2"]


async def _turns() -> None:
    for _ in range(20):
        await asyncio.sleep(0)
