"""`kcm status`: one look at the running system, from the coordinator's `/status`.

The launcher wires `register_status` into its parser and calls `main(args)` for the exit
code. The coordinator's URL comes from `--url`, else from `<state-dir>/coordinator.url`
(written by `kcm dev`, or by `kcm coordinator --ops-url-file`). Exits 1 when a controller
is unhealthy, when the coordinator answering is not the leader, or when it cannot be reached.
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


def main(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    url = args.url
    if not url:
        path = args.state_dir / URL_FILE
        try:
            url = path.read_text().strip()
        except OSError:
            print(
                f"kcm status: no coordinator URL: {path} not found (is `kcm dev` running?)", file=sys.stderr
            )
            return 1
    try:
        status = fetch(url, args.timeout)
    except (OSError, ValueError) as exc:
        print(f"kcm status: cannot reach the coordinator at {url}: {exc}", file=sys.stderr)
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


def render(status: dict[str, Any], url: str, out: TextIO) -> int:
    """Print the tables; the exit code: 0 when everything is healthy."""
    if not status.get("leader"):
        holder = status.get("leader_identity") or "unknown"
        print(f"kcm status: the coordinator at {url} is a standby (leader: {holder})", file=sys.stderr)
        return 1
    print(f"coordinator {url} (leader {status.get('identity')})", file=out)
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
    members = status.get("members", [])
    if members:
        print(file=out)
        rows = [["MEMBER", "SERVICE", "AGE", "HELD", "OPS"]]
        for m in members:
            held = " ".join(f"{c}:{len(ps)}" for c, ps in sorted(m.get("held", {}).items()))
            rows.append([m["instance"], m["service"], f"{m['age_seconds']:.1f}s", held, m.get("ops_url", "")])
        _table(rows, out)
    return 0 if all(info.get("healthy") for info in controllers.values()) else 1


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(), file=out)
