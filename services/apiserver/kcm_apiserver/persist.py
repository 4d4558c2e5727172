"""Optional durable state for `--data-dir`: one SQLite table of objects plus the counter.

Written through on every change. WAL mode with synchronous=NORMAL commits without an
fsync per write, which keeps creates fast; a crash of the machine (not of the process)
may lose the last moments, which is fine for a development server.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
  key TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
  rv INTEGER NOT NULL, body BLOB NOT NULL,
  PRIMARY KEY (key, namespace, name)
);
CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 0), rv INTEGER NOT NULL);
"""


class Database:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(directory / "apiserver.sqlite3", isolation_level="DEFERRED")
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._encode = msgspec.json.Encoder().encode

    def load(self, sink: Callable[[str, str, str, dict[str, Any]], None]) -> int:
        """Feed every stored object to `sink`; return the last resourceVersion handed out."""
        decode = msgspec.json.Decoder(dict[str, Any]).decode
        for key, namespace, name, body in self._conn.execute(
            "SELECT key, namespace, name, body FROM objects"
        ):
            sink(key, namespace, name, decode(body))
        row = self._conn.execute("SELECT rv FROM counter WHERE id = 0").fetchone()
        return int(row[0]) if row else 0

    def put(self, key: str, namespace: str, name: str, rv: int, obj: dict[str, Any]) -> None:
        with self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?)",
                (key, namespace, name, rv, self._encode(obj)),
            )
            self._set_rv(rv)

    def delete(self, key: str, namespace: str, name: str, rv: int) -> None:
        with self._conn:
            self._conn.execute(
                "DELETE FROM objects WHERE key = ? AND namespace = ? AND name = ?", (key, namespace, name)
            )
            self._set_rv(rv)

    def _set_rv(self, rv: int) -> None:
        self._conn.execute("INSERT OR REPLACE INTO counter VALUES (0, ?)", (rv,))

    def close(self) -> None:
        self._conn.close()
