"""What SQLite costs on disk and in memory: in-memory databases private to the object that
opened them, and a write-ahead log that stays small, is not held back by idle connections, and
goes away when the last connection closes."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from langmem_sqlite import ConversationStore, SQLChatMessageHistory, SQLSaver, SQLStore
from langmem_sqlite.engine.dialects.sqlite import (
    SQLITE_JOURNAL_SIZE_LIMIT,
    SQLITE_WAL_AUTOCHECKPOINT_PAGES,
)

CFG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _put(saver: SQLSaver, value: Any) -> None:
    ckpt = empty_checkpoint()
    version = saver.get_next_version(None, None)
    ckpt["channel_values"] = {"x": value}
    ckpt["channel_versions"] = {"x": version}
    saver.put(CFG, ckpt, {"step": 1}, {"x": version})


@pytest.mark.parametrize("spelling", [":memory:", "sqlite://", "sqlite:///:memory:"])
def test_each_in_memory_object_has_its_own_empty_database(spelling: str) -> None:
    """As ``sqlite3.connect(":memory:")``: every saver, store and history opened on an
    in-memory URL starts empty and never sees another's rows."""
    first, second = SQLSaver(spelling), SQLSaver(spelling)
    _put(first, "only in the first")
    assert first.get_tuple(CFG) is not None
    assert second.get_tuple(CFG) is None
    assert asyncio.run(second.aget_tuple(CFG)) is None

    a, b = SQLStore(spelling), SQLStore(spelling)
    a.put(("ns",), "k", {"v": 1})
    assert a.get(("ns",), "k") is not None
    assert b.get(("ns",), "k") is None and asyncio.run(b.aget(("ns",), "k")) is None

    h1, h2 = SQLChatMessageHistory("s", spelling), SQLChatMessageHistory("s", spelling)
    h1.add_messages([HumanMessage("private")])
    assert [m.content for m in h1.messages] == ["private"]
    assert h2.messages == [] and asyncio.run(h2.aget_messages()) == []

    c1, c2 = ConversationStore(spelling), ConversationStore(spelling)
    c1.add_messages("s", [HumanMessage("x")])
    assert c2.get_messages("s") == []


def test_one_in_memory_object_is_one_database_for_all_its_threads() -> None:
    saver = SQLSaver(":memory:")
    _put(saver, 0)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            _put(saver, i)
            assert saver.get_tuple(CFG) is not None
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(list(saver.list(CFG))) == 9
    assert len(asyncio.run(_alist(saver))) == 9


async def _alist(saver: SQLSaver) -> list[Any]:
    return [t async for t in saver.alist(CFG)]


def _wal(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_the_log_stays_small_while_in_use(tmp_path: Path) -> None:
    """Writes far beyond the log's checkpoint size: the log never grows much past
    ``wal_autocheckpoint`` pages, and after a checkpoint lets it start over it is cut back to
    ``journal_size_limit``."""
    path = tmp_path / "w.db"
    store = SQLStore(path)
    peak = 0
    blob = "x" * 20_000
    for i in range(600):  # about 12 MB of values, in 600 transactions
        store.put(("ns",), str(i), {"blob": blob, "i": i})
        peak = max(peak, _wal(path))
    page = 4096
    assert peak <= (SQLITE_WAL_AUTOCHECKPOINT_PAGES + 64) * page, peak
    assert peak > SQLITE_JOURNAL_SIZE_LIMIT  # the log did grow past the limit meanwhile
    conn = sqlite3.connect(path)
    try:  # a checkpoint completes (as an automatic one does every 256 pages) ...
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        conn.close()
    assert (busy, log) == (0, done)
    store.put(("small",), "k", {"i": 1})  # ... and the next writer starts the log over
    assert _wal(path) <= SQLITE_JOURNAL_SIZE_LIMIT + 64 * page


def test_idle_pooled_connections_do_not_hold_back_checkpoints(tmp_path: Path) -> None:
    """Reads leave no snapshot open on the connections they return to the pool, so a
    checkpoint copies the whole log into the file."""
    path = tmp_path / "r.db"
    saver, store = SQLSaver(path), SQLStore(path)
    for i in range(50):
        _put(saver, i)
        store.put(("ns",), str(i), {"i": i})
    for _ in range(20):  # reads on several pooled connections, sync and async
        saver.get_tuple(CFG)
        list(saver.list(CFG, limit=5))
        store.search(("ns",), limit=5)
        asyncio.run(saver.aget_tuple(CFG))
    conn = sqlite3.connect(path)
    try:
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        conn.close()
    assert busy == 0 and log == done, (busy, log, done)


def test_the_log_goes_when_the_last_connection_closes(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    saver = SQLSaver(path)
    for i in range(20):
        _put(saver, i)
    assert Path(f"{path}-wal").exists()
    saver.db.dispose()
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()
    assert saver.get_tuple(CFG) is not None  # still usable: new connections are opened


def test_a_process_that_exits_leaves_no_log(tmp_path: Path) -> None:
    """A program that writes and ends without closing anything: the package closes its
    connections at exit, and SQLite removes the log."""
    path = tmp_path / "exit.db"
    code = f"""
from langgraph.checkpoint.base import empty_checkpoint
from langmem_sqlite import SQLSaver, SQLStore, ConversationStore
from langchain_core.messages import HumanMessage
saver = SQLSaver({str(path)!r})
c = empty_checkpoint(); v = saver.get_next_version(None, None)
c["channel_values"] = {{"x": 1}}; c["channel_versions"] = {{"x": v}}
saver.put({{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}, c, {{}}, {{"x": v}})
SQLStore({str(path)!r}).put(("ns",), "k", {{"v": 1}})
ConversationStore({str(path)!r}).add_messages("s", [HumanMessage("x")])
"""
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ), timeout=120)
    assert path.exists()
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()
