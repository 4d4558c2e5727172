"""No log call passes an `extra=` key that LogRecord owns ("name", "msg", "args", ...): the
logging module raises KeyError for one, and the sync that logged fails with it."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def _extra_keys(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg == "extra" and isinstance(kw.value, ast.Dict):
                for key in kw.value.keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        found.append((key.lineno, key.value))
    return found


def test_no_log_extra_key_clashes_with_a_log_record_attribute() -> None:
    sources = [p for top in ("shared", "services", "bench") for p in (ROOT / top).rglob("*.py")]
    assert len(sources) > 50
    clashes = [
        f"{path.relative_to(ROOT)}:{line}: {key!r}"
        for path in sources
        for line, key in _extra_keys(path)
        if key in RESERVED
    ]
    assert not clashes, "extra= keys LogRecord owns:\n" + "\n".join(clashes)
