"""docs/bus.md names exactly what `kcm_shared.bus.wire` holds, in both directions.

A table of docs/bus.md with a `wire` column is a wire table: each row's `wire` cell names a
constant of the module, and the row's first cell shows its value in a code span (whole, or
a prefix followed by `<placeholders>` or a wildcard). Every constant of the module is a row
of some wire table. Beyond the tables, every `Kcm-`/`Nats-` header, `kcm.…` subject and
`KCM_…` stream the page mentions, and every `wire.`/`subjects.` name its examples use, must
exist, so the prose and the examples cannot drift either.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from kcm_shared.bus import subjects, wire

DOC = Path(__file__).resolve().parents[4] / "docs" / "bus.md"
TEXT = DOC.read_text()
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _module() -> dict[str, str]:
    return {name: value for name, value in vars(wire).items() if name.isupper() and isinstance(value, str)}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _wire_rows(text: str) -> list[tuple[str, list[str]]]:
    """(the `wire` cell's name, the first cell's code spans) of every row of every wire table."""
    rows: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        starts_table = line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|"))
        if not starts_table or "`wire`" not in _cells(line):
            continue
        column = _cells(line).index("`wire`")
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            cells = _cells(row)
            rows.append((cells[column].strip("`"), CODE_SPAN.findall(cells[0])))
    return rows


def _shown(span: str) -> str:
    """What a code span shows of a name: everything before its first placeholder or wildcard."""
    return re.split(r"[<>*]", span, maxsplit=1)[0].rstrip(".")


def _disagreements(text: str, module: dict[str, str]) -> list[str]:
    rows = _wire_rows(text)
    problems = [
        f"wire.{name} = {value!r} is in no table of docs/bus.md"
        for name, value in module.items()
        if name not in {documented for documented, _ in rows}
    ]
    for name, spans in rows:
        shown = ", ".join(f"`{span}`" for span in spans)
        if name not in module:
            problems.append(f"docs/bus.md documents wire.{name} ({shown}), which the module lacks")
        elif module[name] not in {_shown(span) for span in spans}:
            problems.append(f"docs/bus.md shows wire.{name} as {shown}; the module says {module[name]!r}")
    return problems


def _known(span: str, module: dict[str, str]) -> bool:
    """A subject or stream name the page mentions is a wire name, or starts with a prefix of one."""
    return any(
        span == v or span.startswith(v + ".") or (v.endswith("_") and span.startswith(v))
        for v in module.values()
    )


def test_the_tables_list_every_wire_name_and_no_other() -> None:
    assert _disagreements(TEXT, _module()) == []


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ({"EVENT": "Kcm-Kind"}, "docs/bus.md shows wire.EVENT as `Kcm-Event`; the module says 'Kcm-Kind'"),
        ({"EXPIRES": "Kcm-Expires"}, "wire.EXPIRES = 'Kcm-Expires' is in no table of docs/bus.md"),
        (
            {"TOO_LARGE": None},
            "docs/bus.md documents wire.TOO_LARGE (`Kcm-Too-Large`), which the module lacks",
        ),
    ],
    ids=["renamed", "added", "dropped"],
)
def test_a_renamed_added_or_dropped_name_is_caught(change: dict[str, str | None], found: str) -> None:
    changed = {name: value for name, value in {**_module(), **change}.items() if value is not None}
    assert found in _disagreements(TEXT, changed)


def test_every_header_the_page_mentions_is_a_wire_header() -> None:
    headers = set(re.findall(r"\b(?:Kcm|Nats)-[A-Za-z]+(?:-[A-Za-z]+)*", TEXT))
    assert headers - set(_module().values()) == set()


def test_every_subject_and_stream_the_page_mentions_is_under_a_wire_name() -> None:
    spans = [s for s in CODE_SPAN.findall(TEXT) if re.match(r"kcm\.[a-z]+(\.|$)|KCM_[A-Z]", s)]
    assert spans
    assert [s for s in spans if not _known(s, _module())] == []


def test_the_examples_use_names_that_exist() -> None:
    for block in re.findall(r"```python\n(.*?)```", TEXT, re.S):
        compile(block, str(DOC), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert {n for n in re.findall(r"\bwire\.(\w+)", TEXT) if not hasattr(wire, n)} == set()
    assert {n for n in re.findall(r"\bsubjects\.(\w+)", TEXT) if not hasattr(subjects, n)} == set()
