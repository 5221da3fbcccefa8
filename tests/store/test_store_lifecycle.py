"""SQLStore's lifecycle as LangGraph's stores have it: ``from_conn_string`` (``with`` and ``async
with``), ``store.embeddings``, and the async stores' ``await store.setup()``, ``sweep_ttl``,
``start_ttl_sweeper`` and ``stop_ttl_sweeper``, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import BaseStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from langmem_sqlite import SQLStore
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables


def _open_files(path: Path) -> int:
    """File descriptors of this process open on ``path`` (or its -wal/-shm)."""
    names = {str(path), f"{path}-wal", f"{path}-shm"}
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") in names:
                count += 1
        except OSError:
            pass
    return count


def test_from_conn_string_closes_the_sqlite_file_on_exit(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with SQLStore.from_conn_string(str(path)) as store:
        assert isinstance(store, SQLStore)
        store.put(("a",), "k", {"v": 1})
        assert store.get(("a",), "k").value == {"v": 1}  # type: ignore[union-attr]
        assert _open_files(path) > 0
    assert _open_files(path) == 0
    with SQLStore.from_conn_string(f"sqlite:///{path}") as again:  # the data stayed
        assert again.get(("a",), "k").value == {"v": 1}  # type: ignore[union-attr]
    assert _open_files(path) == 0


async def test_from_conn_string_async_with(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with SQLStore.from_conn_string(str(path), ttl={"default_ttl": 60}) as store:
        await store.setup()
        await store.aput(("a",), "k", {"v": 1})
        assert (await store.aget(("a",), "k")).value == {"v": 1}  # type: ignore[union-attr]
        task = await store.start_ttl_sweeper()
        assert isinstance(task, asyncio.Task) and not task.done()
    assert task.done()
    assert _open_files(path) == 0


@pytest.mark.parametrize("backend", ["postgres", "mariadb"])
def test_from_conn_string_closes_server_connections(db_url: str, backend: str) -> None:
    """On exit no connection of the store's pool stays open on the server."""
    name = f"lm{uuid.uuid4().hex[:12]}"
    args: dict[str, Any] = (
        {"connect_args": {"application_name": name}} if backend == "postgres" else {}
    )
    prefix = f"t{uuid.uuid4().hex[:10]}_"

    def connections(store: SQLStore) -> int:
        admin = sa.create_engine(get_database(db_url).url)
        try:
            with admin.connect() as c:
                if backend == "postgres":
                    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = :n"
                    return int(c.execute(sa.text(query), {"n": name}).scalar() or 0)
                return store.db.sync_engine.pool.checkedin()  # type: ignore[attr-defined,no-any-return]
        finally:
            admin.dispose()

    try:
        with SQLStore.from_conn_string(db_url, table_prefix=prefix, engine_args=args) as store:
            store.setup()
            store.put(("a",), "k", {"v": 1})
            assert store.get(("a",), "k") is not None
            assert connections(store) > 0
        assert connections(store) == 0
    finally:
        get_tables(prefix).metadata.drop_all(get_database(db_url).sync_engine)


def test_from_conn_string_refuses_engines(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path}/x.db")
    with pytest.raises(TypeError, match="conn_string"):
        SQLStore.from_conn_string(engine)  # type: ignore[arg-type]
    engine.dispose()


def test_embeddings_attribute(tmp_path: Path) -> None:
    embed = DeterministicFakeEmbedding(size=8)
    store = SQLStore(f"sqlite:///{tmp_path}/x.db", index={"dims": 8, "embed": embed})
    assert store.embeddings is embed
    assert SQLStore(f"sqlite:///{tmp_path}/y.db").embeddings is None


async def _anchor_style_app(store: BaseStore) -> dict[str, Any]:
    """Code written for AsyncSqliteStore / AsyncPostgresStore, as their docs show it."""
    await store.setup()  # type: ignore[attr-defined]
    await store.aput(("users", "1"), "prefs", {"theme": "dark"})
    await store.aput(("users", "1"), "short", {"v": 1}, ttl=0.0005)
    await asyncio.sleep(1.1)  # AsyncSqliteStore's clock counts whole seconds
    swept = await store.sweep_ttl()  # type: ignore[attr-defined]
    task = await store.start_ttl_sweeper()  # type: ignore[attr-defined]
    running = not task.done()
    stopped = await store.stop_ttl_sweeper()  # type: ignore[attr-defined]
    await asyncio.sleep(0)
    item = await store.aget(("users", "1"), "prefs")
    return {
        "value": item.value if item else None,
        "swept": swept,
        "task": isinstance(task, asyncio.Task),
        "running": running,
        "stopped": stopped,
        "task done": task.done(),
        "left": sorted(i.key for i in await store.asearch(("users",))),
    }


async def test_async_anchor_lifecycle_calls_work(db_url: str, prefix: str, tmp_path: Path) -> None:
    ttl = {"default_ttl": None, "sweep_interval_minutes": 1}
    ours = await _anchor_style_app(SQLStore(db_url, table_prefix=prefix, ttl=ttl))  # type: ignore[arg-type]
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "anchor.db"), ttl=ttl) as anchor:  # type: ignore[arg-type]
        theirs = await _anchor_style_app(anchor)
    assert ours == theirs
    assert ours["swept"] == 1 and ours["left"] == ["prefs"]


async def test_async_sweeper_task_sweeps(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix, ttl={"sweep_interval_minutes": 0.001})
    await store.asetup()
    await store.aput(("a",), "gone", {"v": 1}, ttl=0.0005)
    await store.aput(("a",), "kept", {"v": 2})
    task = await store.astart_ttl_sweeper()
    assert await store.astart_ttl_sweeper() is task  # idempotent
    items = get_tables(prefix).store_items
    engine = get_database(db_url).sync_engine
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with engine.connect() as c:
            left = sorted(c.execute(sa.select(items.c.key)).scalars())
        if left == ["kept"]:
            break
        await asyncio.sleep(0.05)
    assert left == ["kept"]  # deleted by the task, not by a read
    assert await store.astop_ttl_sweeper() and task.done()
    async with store:
        pass


def test_sync_lifecycle_still_runs_at_once(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    assert store.setup() is None
    store.put(("a",), "k", {"v": 1}, ttl=0.0005)
    time.sleep(0.1)
    assert store.sweep_ttl() == 1
    thread = store.start_ttl_sweeper(0.01)
    assert thread.is_alive()
    assert store.stop_ttl_sweeper(5) and not thread.is_alive()
    with store:
        pass


async def test_sync_helpers_called_from_async_code_run_at_once(db_url: str, prefix: str) -> None:
    """A plain function calling ``setup()`` from async code still runs it: only a coroutine
    calling it directly gets an awaitable."""
    store = SQLStore(db_url, table_prefix=prefix)

    def helper() -> Any:
        return store.setup()

    assert helper() is None
    coro = store.setup()
    assert asyncio.iscoroutine(coro)
    await coro


def test_memory_stores_are_private_and_empty() -> None:
    """``SQLStore(":memory:")`` is a database of its own, empty, as ``SqliteStore``'s."""
    first, second = SQLStore(":memory:"), SQLStore(":memory:")
    first.put(("a",), "k", {"v": 1})
    assert second.get(("a",), "k") is None and second.search(("a",)) == []
    assert first.get(("a",), "k").value == {"v": 1}  # type: ignore[union-attr]
    for _ in range(2):
        with SQLStore.from_conn_string(":memory:") as store:
            assert store.search(()) == []
            store.put(("a",), "k", {"v": 2})


async def test_memory_store_async() -> None:
    first, second = SQLStore(":memory:"), SQLStore(":memory:")
    await first.aput(("a",), "k", {"v": 1})
    assert await second.aget(("a",), "k") is None
    assert (await first.aget(("a",), "k")).value == {"v": 1}  # type: ignore[union-attr]
