"""What simulated containers print, and the log options (kcm_simulator.containerlog)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from kcm_simulator import containerlog


def pod(status: dict[str, Any] | None, **container: Any) -> dict[str, Any]:
    spec = {"name": "c", "image": "busybox", **container}
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n", "containers": [spec]},
        "status": {"containerStatuses": [{"name": "c", **status}]} if status is not None else {},
    }


RUNNING = {"state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
RESTARTED = {
    "state": {"running": {"startedAt": "2026-01-01T00:01:00Z"}},
    "lastState": {
        "terminated": {
            "exitCode": 1,
            "reason": "Error",
            "startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:30Z",
        }
    },
}


def texts(lines: list[containerlog.Line]) -> list[str]:
    return [t for _, t in lines]


def test_a_run_prints_its_start_command_output_and_exit() -> None:
    done = {
        "state": {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": "2026-01-01T00:00:00Z",
                "finishedAt": "2026-01-01T00:00:05Z",
            }
        }
    }
    lines = containerlog.lines(pod(done, command=["sh", "-c", "echo hello; echo world"]), "c")
    assert texts(lines) == [
        "sim: container c started (image busybox)",
        "$ sh -c 'echo hello; echo world'",
        "hello",
        "world",
        "sim: container c exited with code 0 (Completed)",
    ]
    assert lines[-1][0] == dt.datetime(2026, 1, 1, 0, 0, 5, tzinfo=dt.UTC)


def test_date_prints_when_the_run_started() -> None:
    """The CronJob page's `date; echo Hello from the Kubernetes cluster`."""
    run = {"state": {"running": {"startedAt": "2019-02-22T11:02:09Z"}}}
    command = ["/bin/sh", "-c", "date; echo Hello from the Kubernetes cluster"]
    assert texts(containerlog.lines(pod(run, command=command), "c"))[2:] == [
        "Fri Feb 22 11:02:09 UTC 2019",
        "Hello from the Kubernetes cluster",
    ]


def test_a_command_the_shell_does_not_know_prints_only_its_command_line() -> None:
    lines = containerlog.lines(pod(RUNNING, args=["nginx", "-g", "daemon off;"]), "c")
    assert texts(lines) == ["sim: container c started (image busybox)", "$ nginx -g 'daemon off;'"]


def test_previous_is_the_last_terminated_run() -> None:
    assert texts(containerlog.lines(pod(RESTARTED), "c", previous=True)) == [
        "sim: container c started (image busybox)",
        "sim: container c exited with code 1 (Error)",
    ]


@pytest.mark.parametrize(
    ("status", "previous", "message"),
    [
        (None, False, "container 'c' in pod 'p' is waiting to start: ContainerCreating"),
        (RUNNING, True, "previous terminated container 'c' in pod 'p' not found"),
        (
            {"state": {"waiting": {"reason": "ImagePullBackOff"}}},
            False,
            "container 'c' in pod 'p' is waiting to start: trying and failing to pull image",
        ),
    ],
)
def test_the_kubelets_refusals(status: dict[str, Any] | None, previous: bool, message: str) -> None:
    with pytest.raises(containerlog.LogError) as caught:
        containerlog.lines(pod(status), "c", previous)
    assert str(caught.value) == message.replace("'", '"')


T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
LINES = [(T0 + dt.timedelta(seconds=i), f"line {i}") for i in range(5)]


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ({}, [0, 1, 2, 3, 4]),
        ({"tailLines": "2"}, [3, 4]),
        ({"tailLines": "0"}, []),
        ({"sinceSeconds": "2"}, [3, 4]),
        ({"sinceTime": "2026-01-01T00:00:01Z"}, [1, 2, 3, 4]),
        ({"sinceTime": "2026-01-01T00:00:01Z", "tailLines": "1"}, [4]),
    ],
)
def test_options_select(query: dict[str, str], kept: list[int]) -> None:
    now = T0 + dt.timedelta(seconds=5)
    assert containerlog.Options.parse(query).select(LINES, now) == [LINES[i] for i in kept]


def test_timestamps_are_rfc3339_with_nanoseconds() -> None:
    opts = containerlog.Options.parse({"timestamps": "true", "follow": "true"})
    assert opts.follow
    assert opts.format(LINES[1]) == b"2026-01-01T00:00:01.000000000Z line 1\n"
    assert containerlog.Options().format(LINES[1]) == b"line 1\n"


@pytest.mark.parametrize(
    "query",
    [{"tailLines": "-1"}, {"tailLines": "x"}, {"limitBytes": "0"}, {"sinceSeconds": "0"}, {"sinceTime": "y"}],
)
def test_malformed_options_are_refused(query: dict[str, str]) -> None:
    with pytest.raises(containerlog.LogError):
        containerlog.Options.parse(query)
