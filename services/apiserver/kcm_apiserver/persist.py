"""Optional durable state for `--data-dir`: one SQLite table of objects plus the counter.

Group commit: the changes made while the event loop runs one round of callbacks go to
SQLite in one transaction, in the next round (scheduled with `call_soon`). Every answer and
every chunk of a watch stream waits for `synced()` first, so nothing is acknowledged, read or
seen by a watcher before it is committed, as when each write committed on its own; an object
written several times in one round is stored once. One commit per write was a
sixth of the API server's CPU under bench/job_pods.py's load (profiled); bench/apiserver.py
prints creates with `--data-dir` beside the in-memory server.

WAL mode with synchronous=NORMAL commits without an fsync, which keeps writes fast; a crash
of the machine (not of the process) may lose the last moments, which is fine for a
development server.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

log = logging.getLogger("kcm.apiserver.persist")

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
        self._pending: dict[tuple[str, str, str], tuple[int, dict[str, Any] | None]] = {}
        self._rv = 0
        self._scheduled = False
        self._waiters: list[asyncio.Future[None]] = []

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
        self._stage((key, namespace, name), obj, rv)

    def delete(self, key: str, namespace: str, name: str, rv: int) -> None:
        self._stage((key, namespace, name), None, rv)

    def _stage(self, row: tuple[str, str, str], obj: dict[str, Any] | None, rv: int) -> None:
        # The store replaces objects rather than changing them, so encoding at the flush
        # stores the state of this write.
        self._pending[row] = (rv, obj)
        self._rv = rv
        try:
            self._schedule()
        except RuntimeError:  # set-up before serving: nobody waits, commit now
            self.flush()

    def _schedule(self) -> None:
        """Flush in the event loop's next round (RuntimeError outside a running loop)."""
        if not self._scheduled:
            asyncio.get_running_loop().call_soon(self.flush)
            self._scheduled = True

    def flush(self) -> None:
        """Commit the staged changes in one transaction and release the requests waiting."""
        self._scheduled = False
        pending, self._pending = self._pending, {}
        waiters, self._waiters = self._waiters, []
        error: Exception | None = None
        if pending:
            try:
                self._commit(pending)
            except Exception as exc:  # a full disk, a locked file: the waiters must hear of it
                # Kept for the next flush (the next write schedules it); these requests fail.
                log.error("apiserver state not saved", extra={"error": str(exc), "objects": len(pending)})
                self._pending = {**pending, **self._pending}
                error = exc
        for waiter in waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)

    def _commit(self, pending: dict[tuple[str, str, str], tuple[int, dict[str, Any] | None]]) -> None:
        encode = self._encode
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?)",
                [(*row, rv, encode(obj)) for row, (rv, obj) in pending.items() if obj is not None],
            )
            self._conn.executemany(
                "DELETE FROM objects WHERE key = ? AND namespace = ? AND name = ?",
                [row for row, (_, obj) in pending.items() if obj is None],
            )
            self._conn.execute("INSERT OR REPLACE INTO counter VALUES (0, ?)", (self._rv,))

    async def synced(self) -> None:
        """Return once every change staged so far is committed (raise if that failed)."""
        if not self._scheduled and not self._pending:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._schedule()  # after a failed flush nothing is scheduled: try again now
        await waiter

    def close(self) -> None:
        self.flush()
        self._conn.close()
