"""What a simulated container "printed", and the kubelet's log options applied to it.

- `lines(pod, container, previous)`: the lines of a container's current run (or of its last
  terminated one), derived from the pod alone: a start line, the command line when the
  container has one, what that command prints when the built-in `shell` knows all of it, and an
  exit line once it terminated. Timestamps are the status's startedAt / finishedAt.
- `check(pod, container, previous)`: the kubelet's refusals (upstream
  `validateContainerLogStatus`): a container with no status yet is waiting to start, a
  `--previous` without a terminated run is not found.
- `Options.parse(query)`, `.select(lines, now)`, `.format(line)`: `tailLines`, `sinceSeconds`,
  `sinceTime`, `timestamps`, `limitBytes` as upstream's kubelet applies them.

Pure; called by `kubeletserver.py` for `/containerLogs` and `/attach`.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kcm_simulator import shell

Obj = dict[str, Any]
Line = tuple[dt.datetime, str]


class LogError(Exception):
    """A refusal the kubelet answers with 400 and this text."""


def _parse_time(text: object) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _q(text: str) -> str:
    """Go's %q for the names in the kubelet's messages (a JSON string reads the same)."""
    return json.dumps(text)


def container_spec(pod: Obj, name: str) -> Obj | None:
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict) and c.get("name") == name:
                return c
    return None


def container_status(pod: Obj, name: str) -> Obj | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for s in status.get(key) or []:
            if isinstance(s, dict) and s.get("name") == name:
                return s
    return None


def command_line(container: Obj) -> str:
    """The container's command and args as a shell would show them; empty for the image's own."""
    words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
    return shlex.join(words)


def check(pod: Obj, container: str, previous: bool) -> Obj:
    """The container's status, or the kubelet's error for a container with nothing to show."""
    pod_name = (pod.get("metadata") or {}).get("name", "")
    status = container_status(pod, container)
    if status is None:
        raise LogError(
            f"container {_q(container)} in pod {_q(pod_name)} is waiting to start: ContainerCreating"
        )
    if previous:
        if not (status.get("lastState") or {}).get("terminated"):
            raise LogError(f"previous terminated container {_q(container)} in pod {_q(pod_name)} not found")
        return status
    state = status.get("state") or {}
    waiting = state.get("waiting")
    if isinstance(waiting, dict) and not (status.get("lastState") or {}).get("terminated"):
        reason = str(waiting.get("reason") or "ContainerCreating")
        shown = {
            "ErrImagePull": "image can't be pulled",
            "ImagePullBackOff": "trying and failing to pull image",
        }.get(reason, reason)
        raise LogError(f"container {_q(container)} in pod {_q(pod_name)} is waiting to start: {shown}")
    return status


def lines(pod: Obj, container: str, previous: bool = False) -> list[Line]:
    """The run's lines, oldest first. The current run of a container waiting to restart is its
    last terminated one, as the kubelet shows the last container's log."""
    status = check(pod, container, previous)
    spec = container_spec(pod, container) or {}
    state = status.get("state") or {}
    last = (status.get("lastState") or {}).get("terminated")
    if previous:
        run: Obj = last or {}
    elif "running" in state:
        run = state["running"] or {}
    elif "terminated" in state:
        run = state["terminated"] or {}
    else:
        run = last or {}
    started = _parse_time(run.get("startedAt"))
    if started is None:
        return []
    image = spec.get("image", "")
    out: list[Line] = [(started, f"sim: container {container} started (image {image})")]
    cmd = command_line(spec)
    if cmd:
        out.append((started, f"$ {cmd}"))
        out += [(started, text) for text in _printed(pod, spec, started)]
    finished = _parse_time(run.get("finishedAt"))
    if finished is not None and "exitCode" in run:
        reason = run.get("reason") or ("Completed" if run.get("exitCode") == 0 else "Error")
        out.append((finished, f"sim: container {container} exited with code {run['exitCode']} ({reason})"))
    return out


def _printed(pod: Obj, spec: Obj, started: dt.datetime) -> list[str]:
    """What the command prints when the built-in shell runs all of it cleanly (`echo hello`,
    `sh -c 'echo $(MY_VAR); env'`); nothing for anything it does not know (a `while` loop)."""
    argv = [str(w) for w in (spec.get("command") or []) + (spec.get("args") or [])]
    try:
        result = shell.Container.of(pod, spec, started).run(argv)
    except shell.NotFound:
        return []
    if result.code != 0 or result.stderr:
        return []
    return result.stdout.decode(errors="replace").splitlines()


def is_running(pod: Obj, container: str) -> bool:
    status = container_status(pod, container) or {}
    return "running" in (status.get("state") or {})


def _go_time(ts: dt.datetime) -> str:
    """RFC 3339 with nanoseconds, as the kubelet prefixes lines with `timestamps=true`."""
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond * 1000:09d}Z"


@dataclass(frozen=True)
class Options:
    tail_lines: int | None = None
    since: dt.datetime | None = None
    since_seconds: int | None = None
    timestamps: bool = False
    limit_bytes: int | None = None
    follow: bool = False
    previous: bool = False

    @staticmethod
    def parse(query: Mapping[str, str]) -> Options:
        """The query's options; a malformed or negative number is a LogError (400)."""

        def number(key: str, least: int) -> int | None:
            text = query.get(key)
            if text is None:
                return None
            try:
                value = int(text)
            except ValueError:
                raise LogError(f"{key}: invalid value {text!r}: must be an integer") from None
            if value < least:
                raise LogError(f"{key}: invalid value {value}: must be at least {least}")
            return value

        since_time = None
        if "sinceTime" in query:
            since_time = _parse_time(query["sinceTime"])
            if since_time is None:
                raise LogError(f"sinceTime: invalid value {query['sinceTime']!r}: must be RFC 3339")
        return Options(
            tail_lines=number("tailLines", 0),
            since=since_time,
            since_seconds=number("sinceSeconds", 1),
            timestamps=query.get("timestamps") in ("true", "1"),
            limit_bytes=number("limitBytes", 1),
            follow=query.get("follow") in ("true", "1"),
            previous=query.get("previous") in ("true", "1"),
        )

    def select(self, all_lines: list[Line], now: dt.datetime) -> list[Line]:
        """The lines the options keep: newer than the since bound, then the last tailLines."""
        since = self.since
        if self.since_seconds is not None:
            since = now - dt.timedelta(seconds=self.since_seconds)
        kept = [ln for ln in all_lines if since is None or ln[0] >= since]
        if self.tail_lines is not None:
            kept = kept[len(kept) - self.tail_lines :] if self.tail_lines else []
        return kept

    def format(self, line: Line) -> bytes:
        text = f"{_go_time(line[0])} {line[1]}" if self.timestamps else line[1]
        return (text + "\n").encode()
