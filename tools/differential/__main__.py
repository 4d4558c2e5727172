"""`python -m tools.differential [SCENARIO ...]` (`make differential`): differential runs.

Plays each scenario (tools/differential/scenarios/<controller>.sh) under upstream
kube-controller-manager and then under kcm on the same upstream API server (`kcm dev
--apiserver=upstream [--reference]` on one state directory: etcd keeps the cluster across the two),
each scenario in a namespace of its own, all scenarios of a side under one start of its controller
manager, `--jobs` at a time. Then prints, per scenario, the differences in what the controllers
wrote (tools/differential/normalize.py), each marked with its verdict from known.yaml beside this
file (`admitted` with a reason, or `bug`; entries under "*" hold for every scenario) or as
`unexplained`, and a table of the counts. Exits 1
when a difference is unexplained or a scenario failed on both sides, 0 otherwise.

The state directory (default `.kcm-diff`) is the tool's own: a run starts it afresh, and
`--diff-only` compares again what the last run kept there (`STATE/differential/<side>/<scenario>/`:
the namespace's final objects, the script's captures and its failure).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import secrets
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.differential import normalize, play

SCENARIOS = play.HERE / "scenarios"
KNOWN = play.HERE / "known.yaml"
ANY = "*"  # known.yaml's entries for every scenario
MARKER = ".kcm-differential"  # in a state directory this tool made, and may therefore wipe


@dataclass(frozen=True)
class Verdict:
    match: re.Pattern[str]
    verdict: str  # "admitted" or "bug"
    reason: str


def known(path: Path = KNOWN) -> dict[str, list[Verdict]]:
    doc = yaml.safe_load(path.read_text()) or {}
    return {
        scenario: [Verdict(re.compile(v["match"]), v["verdict"], v["reason"]) for v in entries or []]
        for scenario, entries in doc.items()
    }


def scenarios(names: list[str]) -> list[Path]:
    every = {p.stem: p for p in sorted(SCENARIOS.glob("*.sh"))}
    unknown = [n for n in names if n not in every]
    if unknown:
        raise SystemExit(f"kcm-diff: no scenario {', '.join(unknown)} (have: {', '.join(every)})")
    return [every[n] for n in names] if names else list(every.values())


def _fresh(state: Path) -> None:
    if state.exists() and any(state.iterdir()) and not (state / MARKER).exists():
        raise SystemExit(f"kcm-diff: {state} is not empty and not this tool's; give another --state-dir")
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    (state / MARKER).write_text("made by tools/differential; wiped by its next run\n")


def run_side(side: str, state: Path, chosen: list[Path], tag: str, jobs: int) -> None:
    short = "ref" if side == play.REFERENCE else "kcm"
    started = time.monotonic()
    with play.side(state, side, state / f"kcm-dev-{side}.log") as kubeconfig:
        print(f"{side}: controller manager ready in {time.monotonic() - started:.0f} s", flush=True)

        def one(scenario: Path) -> None:
            begun = time.monotonic()
            out = state / "differential" / side / scenario.stem
            error = play.play(kubeconfig, scenario, f"{scenario.stem}-{short}-{tag}", out)
            verdict = f"FAILED: {error.splitlines()[-1] if error else ''}" if error else "played"
            print(f"{side}: {scenario.stem} {verdict} in {time.monotonic() - begun:.0f} s", flush=True)

        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            for future in [pool.submit(one, s) for s in chosen]:
                future.result()


def load(state: Path, side: str, scenario: str) -> normalize.Run | None:
    out = state / "differential" / side / scenario
    if not (out / "final.json").exists():
        return None
    captures = {
        p.stem: normalize.items(json.loads(p.read_text())) for p in sorted((out / "captures").glob("*.json"))
    }
    return normalize.Run(
        namespace=(out / "namespace").read_text(),
        objects=normalize.items(json.loads((out / "final.json").read_text())),
        captures=captures,
        error=(out / "error").read_text(),
    )


def report(state: Path, chosen: list[Path], verdicts: dict[str, list[Verdict]]) -> dict[str, Any]:
    """Print each scenario's differences and the table of counts; the same as a document."""
    doc: dict[str, Any] = {}
    for scenario in (s.stem for s in chosen):
        ref, kcm = load(state, play.REFERENCE, scenario), load(state, play.KCM, scenario)
        if ref is None or kcm is None:
            doc[scenario] = {"missing": [s for s, r in ((play.REFERENCE, ref), (play.KCM, kcm)) if r is None]}
            continue
        rows = []
        for diff in normalize.compare(ref, kcm):
            line = diff.line()
            candidates = [*verdicts.get(scenario, []), *verdicts.get(ANY, [])]
            found = next((v for v in candidates if v.match.search(line)), None)
            rows.append(
                {
                    "line": line,
                    "verdict": found.verdict if found else "unexplained",
                    "reason": found.reason if found else "",
                }
            )
        doc[scenario] = {"differences": rows, "failed": bool(ref.error and kcm.error)}
    for scenario, entry in doc.items():
        rows = entry.get("differences", [])
        print(
            f"\n== {scenario}: {len(rows)} difference(s)"
            + (" (FAILED on both sides)" if entry.get("failed") else "")
        )
        if "missing" in entry:
            print(f"  not played under {', '.join(entry['missing'])}")
        for row in rows:
            print(f"  [{row['verdict']}] {row['line']}")
    print(f"\n{'scenario':40} {'differences':>11} {'admitted':>8} {'bug':>5} {'unexplained':>11}")
    for scenario, entry in doc.items():
        rows = entry.get("differences", [])
        count = {v: sum(r["verdict"] == v for r in rows) for v in ("admitted", "bug", "unexplained")}
        print(
            f"{scenario:40} {len(rows):>11} {count['admitted']:>8} {count['bug']:>5} {count['unexplained']:>11}"
        )
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.differential", description=__doc__.split("\n\n")[0])
    p.add_argument("scenarios", nargs="*", help="scenario names (default: all), e.g. deployment job")
    p.add_argument("--state-dir", type=Path, default=Path(".kcm-diff"), help="the tool's own state directory")
    p.add_argument("--jobs", type=int, default=4, help="scenarios played at once")
    p.add_argument("--diff-only", action="store_true", help="compare what the last run kept; play nothing")
    p.add_argument("--json", type=Path, help="also write the report here")
    args = p.parse_args(argv)
    chosen = scenarios(args.scenarios)
    state: Path = args.state_dir.resolve()
    if not args.diff_only:
        _fresh(state)
        tag = secrets.token_hex(2)
        for side in (play.REFERENCE, play.KCM):
            run_side(side, state, chosen, tag, args.jobs)
    doc = report(state, chosen, known())
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
    bad = [
        s
        for s, e in doc.items()
        if e.get("failed") or "missing" in e or any(r["verdict"] == "unexplained" for r in e["differences"])
    ]
    if bad:
        print(f"\nunexplained differences or failures in: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
