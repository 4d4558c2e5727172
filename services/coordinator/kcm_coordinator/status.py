"""`kcm status`: one look at the running system, from the coordinator's `/status`.

The launcher wires `register_status` into its parser and calls `main(args)` for the exit
code. The coordinator's URL comes from `--url`, else from `<state-dir>/coordinator.url`
(written by `kcm dev`, or by `kcm coordinator --ops-url-file`). Prints the controllers, then
one row per coordinator and watcher replica, then the controller replicas. Exits 1 when a
controller or the watcher is unhealthy, when the coordinator answering is not the leader, or
when it cannot be reached. `kcm dev` uses `fetch`, `ready_controllers` and `watcher_ready`
to wait for the stack.

Everything printed passes through `visible`: instance names, ops URLs and errors come from
heartbeats on the bus, which any identity that may beat writes, so a control character or a
terminal escape sequence there is shown as an escape, never sent to the terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, TextIO

URL_FILE = "coordinator.url"


def register_status(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="show controllers, partitions and health; exit 1 if unhealthy")
    p.add_argument("--state-dir", type=Path, default=Path(".kcm"), help=f"where {URL_FILE} is")
    p.add_argument("--url", help="the coordinator's ops URL (default: read from the state dir)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the coordinator")
    p.set_defaults(main=_main)


def _main(args: argparse.Namespace, words: list[str]) -> int:
    return main(args)


def main(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    url = args.url
    if not url:
        path = args.state_dir / URL_FILE
        try:
            url = path.read_text().strip()
        except OSError:
            print(
                visible(f"kcm status: no coordinator URL: {path} not found (is `kcm dev` running?)"),
                file=sys.stderr,
            )
            return 1
    try:
        status = fetch(url, args.timeout)
    except (OSError, ValueError) as exc:
        print(visible(f"kcm status: cannot reach the coordinator at {url}: {exc}"), file=sys.stderr)
        return 1
    return render(status, url, out)


def fetch(url: str, timeout: float) -> dict[str, Any]:
    """The coordinator's `/status` document; raises OSError or ValueError (not JSON)."""
    with urllib.request.urlopen(url.rstrip("/") + "/status", timeout=timeout) as resp:
        status: dict[str, Any] = json.load(resp)
    return status


def ready_controllers(status: dict[str, Any]) -> set[str]:
    """Controllers reported healthy with every partition owned."""
    return {
        name
        for name, info in status.get("controllers", {}).items()
        if info.get("healthy") and info.get("partitions") and all(info["partitions"].values())
    }


def watcher_ready(status: dict[str, Any]) -> bool:
    """One watcher leads, is heard from, and passes its checks."""
    return bool(status.get("watcher", {}).get("healthy"))


def _service_rows(status: dict[str, Any]) -> list[list[str]]:
    rows = [["SERVICE", "INSTANCE", "ROLE", "AGE", "HEALTH"]]
    for m in status.get("coordinator", {}).get("replicas", []):
        rows.append(
            _replica_row("coordinator", m, "ok" if m.get("healthy") else f"unhealthy: {m.get('error')}")
        )
    watcher = status.get("watcher")
    if watcher is None:
        return rows  # a coordinator from before watchers reported their health
    verdict = "ok" if watcher.get("healthy") else f"unhealthy: {watcher.get('error')}"
    replicas = watcher.get("replicas", [])
    for m in replicas:
        if m.get("instance") == watcher.get("leader"):
            rows.append(_replica_row("watcher", m, f"{verdict}; {_lag_summary(watcher)}"))
        else:
            rows.append(
                _replica_row("watcher", m, "ok" if m.get("healthy") else f"unhealthy: {m.get('error')}")
            )
    if watcher.get("leader") is None:
        rows.append(["watcher", "-", "-", "-", verdict])
    return rows


def _replica_row(service: str, m: dict[str, Any], health: str) -> list[str]:
    return [
        service,
        str(m["instance"]),
        "leader" if m.get("leader") else "standby",
        f"{m['age_seconds']:.1f}s",
        health,
    ]


def _lag_summary(watcher: dict[str, Any]) -> str:
    resources: dict[str, Any] = watcher.get("resources", {})
    lag = max((r.get("lag_seconds", 0.0) for r in resources.values()), default=0.0)
    failing = sorted(name for name, r in resources.items() if r.get("failing"))
    summary = f"{len(resources)} resources, lag {lag:.1f}s"
    return summary + (f", failing: {' '.join(failing)}" if failing else "")


def render(status: dict[str, Any], url: str, out: TextIO) -> int:
    """Print the tables; the exit code: 0 when everything is healthy."""
    if not status.get("leader"):
        holder = status.get("leader_identity") or "unknown"
        there = status.get("coordinator", {}).get("leader_ops_url")
        where = f"; ask it with --url {there}" if there else ""
        print(
            visible(f"kcm status: the coordinator at {url} is a standby (leader: {holder}{where})"),
            file=sys.stderr,
        )
        return 1
    print(visible(f"coordinator {url} (leader {status.get('identity')})"), file=out)
    controllers: dict[str, Any] = status.get("controllers", {})
    rows = [["CONTROLLER", "REPLICAS", "PARTITIONS", "DEPTH", "HEALTH"]]
    for name, info in controllers.items():
        parts = info.get("partitions", {})
        owned = sum(1 for owner in parts.values() if owner)
        rows.append(
            [
                name,
                str(len(info.get("replicas", []))),
                f"{owned}/{len(parts)}",
                str(info.get("depth", 0)),
                "ok" if info.get("healthy") else f"unhealthy: {info.get('error')}",
            ]
        )
    if controllers:
        _table(rows, out)
    else:
        print("no controller replica has reported yet", file=out)
    services = _service_rows(status)
    if len(services) > 1:
        print(file=out)
        _table(services, out)
    members = status.get("members", [])
    if members:
        print(file=out)
        rows = [["MEMBER", "SERVICE", "AGE", "HELD", "OPS"]]
        for m in members:
            held = " ".join(f"{c}:{len(ps)}" for c, ps in sorted(m.get("held", {}).items()))
            rows.append([m["instance"], m["service"], f"{m['age_seconds']:.1f}s", held, m.get("ops_url", "")])
        _table(rows, out)
    healthy = all(info.get("healthy") for info in controllers.values())
    return 0 if healthy and status.get("watcher", {}).get("healthy", True) else 1


def visible(text: str) -> str:
    """`text` with every character that is not printable (controls, ESC, format characters
    such as bidi overrides, line breaks) as a Python-style escape: `\\x1b`, `\\u202e`."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _table(rows: list[list[str]], out: TextIO) -> None:
    rows = [[visible(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(), file=out)
