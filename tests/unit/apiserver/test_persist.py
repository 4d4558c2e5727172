"""Group commit of the API server's `--data-dir` state (kcm_apiserver.persist)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from kcm_apiserver import persist
from kcm_apiserver.store import Store


def obj(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": data}


def stored(directory: Path) -> dict[str, dict[str, Any]]:
    """The objects committed so far, read through a connection of its own."""
    with sqlite3.connect(directory / "apiserver.sqlite3") as conn:
        rows = conn.execute("SELECT name, body FROM objects").fetchall()
    return {name: json.loads(body) for name, body in rows}


def committed_rv(directory: Path) -> int:
    with sqlite3.connect(directory / "apiserver.sqlite3") as conn:
        row = conn.execute("SELECT rv FROM counter").fetchone()
    return int(row[0]) if row else 0


def test_outside_an_event_loop_each_write_commits_at_once(tmp_path: Path) -> None:
    db = persist.Database(tmp_path)
    store = Store(db)
    store.put("/configmaps", obj("a", v="1"))
    assert stored(tmp_path)["a"]["data"] == {"v": "1"}
    store.remove("/configmaps", "default", "a")
    assert stored(tmp_path) == {} and committed_rv(tmp_path) == 2
    db.close()


def test_writes_of_one_round_commit_together_before_anyone_resumes(tmp_path: Path) -> None:
    async def scenario() -> None:
        db = persist.Database(tmp_path)
        store = Store(db)
        watcher = store.watch("/configmaps", None, None, None)
        seen_committed: list[dict[str, dict[str, Any]]] = []

        async def watch() -> None:
            await watcher.queue.get()
            # The first event wakes this task: the round's writes must be saved by then.
            seen_committed.append(stored(tmp_path))

        task = asyncio.create_task(watch())
        await asyncio.sleep(0)  # the watcher waits on its queue
        store.put("/configmaps", obj("a", v="1"))
        store.put("/configmaps", obj("b", v="1"))
        store.put("/configmaps", obj("a", v="2"))
        store.remove("/configmaps", "default", "b")
        assert stored(tmp_path) == {}  # staged, not yet committed
        await store.synced()
        assert stored(tmp_path).keys() == {"a"} and stored(tmp_path)["a"]["data"] == {"v": "2"}
        assert committed_rv(tmp_path) == store.rv == 4
        await task
        assert seen_committed[0].keys() == {"a"}
        await store.synced()  # nothing staged: returns at once
        db.close()

    asyncio.run(scenario())


def test_a_failed_commit_fails_its_waiters_and_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        db = persist.Database(tmp_path)
        store = Store(db)
        real = db._commit
        failures = [sqlite3.OperationalError("disk I/O error")]

        def commit(pending: Any) -> None:
            if failures:
                raise failures.pop()
            real(pending)

        monkeypatch.setattr(db, "_commit", commit)
        store.put("/configmaps", obj("a", v="1"))
        with pytest.raises(sqlite3.OperationalError):
            await store.synced()
        assert stored(tmp_path) == {}
        # Nothing written since: waiting again retries the change that was kept.
        await store.synced()
        assert stored(tmp_path)["a"]["data"] == {"v": "1"}
        db.close()

    asyncio.run(scenario())


def test_close_commits_what_is_staged(tmp_path: Path) -> None:
    async def scenario() -> None:
        db = persist.Database(tmp_path)
        store = Store(db)
        store.put("/configmaps", obj("a", v="1"))
        store.close()

    asyncio.run(scenario())
    assert stored(tmp_path)["a"]["data"] == {"v": "1"}
    reopened: dict[str, Any] = {}
    db = persist.Database(tmp_path)
    assert db.load(lambda key, ns, name, o: reopened.setdefault(name, o)) == 1
    assert reopened["a"]["metadata"]["resourceVersion"] == "1"
    db.close()
