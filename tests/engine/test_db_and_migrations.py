"""The engine layer and the migrations, on real databases."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from sqlalchemy.ext.asyncio import create_async_engine
from support import backend_url, server_url

from langmem_sqlite import ConversationStore, SchemaTooNewError, SQLSaver, SQLStore, get_database
from langmem_sqlite.engine import migrations, reading_database
from langmem_sqlite.engine.migrations import LATEST_VERSION, MIGRATIONS, ensure_schema
from langmem_sqlite.engine.schema import get_tables


def test_path_and_url_forms_share_one_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    a = get_database("memory.db")
    b = get_database(str(tmp_path / "memory.db"))
    c = get_database(f"sqlite:///{tmp_path / 'memory.db'}")
    assert a is b is c
    assert a.backend == "sqlite" and a.url.database == str(tmp_path / "memory.db")
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'other.db'}")
    assert get_database(engine) is get_database(engine)
    assert get_database(engine).sync_engine is engine


def test_default_database_is_a_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LANGMEM_SQLITE_URL", raising=False)
    ConversationStore().add_messages("s", [HumanMessage("zero config")])
    assert (tmp_path / "langmem.db").exists()
    monkeypatch.setenv("LANGMEM_SQLITE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    ConversationStore().add_messages("s", [HumanMessage("from env")])
    assert (tmp_path / "env.db").exists()


@pytest.mark.parametrize(
    ("value", "error"),
    [("", ValueError), ("   ", ValueError), ("nope://", ValueError), (42, TypeError)],
)
def test_bad_connections(value: object, error: type) -> None:
    with pytest.raises(error, match="connection"):
        get_database(value)  # type: ignore[arg-type]


def test_sqlite_settings(tmp_path: Path) -> None:
    db = get_database(tmp_path / "p.db")
    with db.sync_engine.connect() as conn:
        pragma = {
            k: conn.exec_driver_sql(f"PRAGMA {k}").scalar()
            for k in (
                "journal_mode",
                "busy_timeout",
                "synchronous",
                "foreign_keys",
                "wal_autocheckpoint",
                "journal_size_limit",
            )
        }
    assert pragma == {
        "journal_mode": "wal",
        "busy_timeout": 1000,
        "synchronous": 1,
        "foreign_keys": 1,
        "wal_autocheckpoint": 256,
        "journal_size_limit": 1024 * 1024,
    }


async def test_sqlite_settings_async(tmp_path: Path) -> None:
    db = get_database(tmp_path / "p.db")

    def pragmas(conn: Any) -> tuple[str, int]:
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        return mode, conn.exec_driver_sql("PRAGMA busy_timeout").scalar()

    assert await db.arun(pragmas) == ("wal", 1000)


@pytest.mark.parametrize("lane", ["history", "store"])
def test_sqlite_writers_in_one_process_take_turns_without_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: str
) -> None:
    """Writers to one SQLite file wait on a lock of this process, not on SQLite's busy handler
    (which sleeps 1, 2, 5, 10 ... ms between polls). With the busy timeout set to 0, any
    contention that reached SQLite would fail with "database is locked" and be retried."""

    from langmem_sqlite.engine.retry import Attempts

    retries: list[str] = []
    real_pause = Attempts.pause

    def counted(self: Attempts, error: sa.exc.DBAPIError) -> float:
        retries.append(str(error.orig))
        return real_pause(self, error)

    monkeypatch.setattr(Attempts, "pause", counted)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    store = ConversationStore(engine)
    store.add_messages("warm-up", [HumanMessage("x")])
    facts = SQLStore(engine)
    facts.put(("warm-up",), "k", {"v": 0})

    @sa.event.listens_for(engine, "connect")
    def no_busy_wait(dbapi_conn: object, _record: object) -> None:
        dbapi_conn.execute("PRAGMA busy_timeout = 0")  # type: ignore[attr-defined]

    engine.dispose()  # connections made before the listener
    retries.clear()  # creating the schema above may retry by design

    def writer(n: int) -> None:
        for i in range(40):
            if lane == "history":
                store.add_messages(f"s{n}", [HumanMessage(f"{n}-{i}")])
            else:
                facts.put((f"s{n}",), str(i), {"v": i})

    with ThreadPoolExecutor(8) as pool:  # a writer's error is raised here
        list(pool.map(writer, range(8)))
    assert retries == []
    if lane == "history":
        assert [len(store.get_messages(f"s{n}")) for n in range(8)] == [40] * 8
    else:
        assert [len(facts.search((f"s{n}",), limit=100)) for n in range(8)] == [40] * 8


def test_one_sqlite_file_has_one_writer_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engines and spellings that reach the same file share the lock; a write waits for it."""
    import threading

    monkeypatch.chdir(tmp_path)
    by_path = get_database(tmp_path / "l.db")
    by_engine = get_database(sa.create_engine("sqlite:///l.db"))
    assert by_path is not by_engine
    # private: the lock itself, held here so that the other object's write must wait for it
    assert by_path._writers is by_engine._writers
    assert get_database(tmp_path / "other.db")._writers is not by_path._writers
    store = ConversationStore(by_engine)
    store.add_messages("s", [HumanMessage("first")])
    done = threading.Event()

    def write() -> None:
        store.add_messages("s", [HumanMessage("second")])
        done.set()

    with by_path._writers:
        t = threading.Thread(target=write)
        t.start()
        assert not done.wait(0.3)  # held back by the other database object's writer
    assert done.wait(10)
    t.join()
    assert [m.content for m in store.get_messages("s")] == ["first", "second"]


def test_pools_are_reused(db_url: str, prefix: str) -> None:
    stores = [ConversationStore(db_url, table_prefix=prefix) for _ in range(50)]
    assert len({id(s.db) for s in stores}) == 1
    assert len({id(s.db.sync_engine.pool) for s in stores}) == 1


async def test_async_pool_reused_within_a_loop(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    await store.aadd_messages("s", [HumanMessage("x")])
    engine = store.db.async_engine
    for _ in range(20):
        await ConversationStore(db_url, table_prefix=prefix).aget_messages("s")
    assert store.db.async_engine is engine


def test_asyncio_run_twice(db_url: str, prefix: str) -> None:
    """Async pools belong to one loop; a second asyncio.run must not inherit dead connections."""
    store = ConversationStore(db_url, table_prefix=prefix)

    async def turn(i: int) -> int:
        await store.aadd_messages("s", [HumanMessage(str(i))])
        return len(await store.aget_messages("s"))

    assert [asyncio.run(turn(i)) for i in range(3)] == [1, 2, 3]


def test_migrations_recorded_and_idempotent(db_url: str, prefix: str) -> None:
    db = get_database(db_url)
    t = get_tables(prefix)
    ensure_schema(db, t)
    db.ready.discard(t.key)
    ensure_schema(db, t)  # again, from the database's point of view
    with db.sync_engine.connect() as conn:
        versions = conn.execute(sa.select(t.migrations.c.version)).scalars().all()
        names = set(sa.inspect(conn).get_table_names())
    assert sorted(versions) == sorted(m.version for m in MIGRATIONS)
    assert {f"{prefix}sessions", f"{prefix}messages", f"{prefix}migrations"} <= names


def test_schema_too_new_is_refused(db_url: str, prefix: str) -> None:
    db = get_database(db_url)
    t = get_tables(prefix)
    ensure_schema(db, t)
    with db.sync_engine.begin() as conn:
        conn.execute(
            sa.insert(t.migrations).values(
                version=LATEST_VERSION + 1, description="future", applied_at=0
            )
        )
    db.ready.discard(t.key)
    with pytest.raises(SchemaTooNewError, match="upgrade"):
        ConversationStore(db_url, table_prefix=prefix).get_messages("s")


def test_a_missing_migration_is_applied_once(
    db_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database behind this code gets the migrations it lacks on first use, each applied
    once and recorded; readers of an older schema are refused until then."""
    db = get_database(db_url)
    t = get_tables(prefix)
    ConversationStore(db, table_prefix=prefix).add_messages("s", [HumanMessage("before")])
    applied: list[str] = []

    def add_title_index(conn: sa.Connection, tables: Any) -> None:
        applied.append(tables.prefix)
        sa.Index(f"{tables.prefix}test_title_ix", tables.sessions.c.title).create(conn)

    later = migrations.Migration(LATEST_VERSION + 1, "test: sessions by title", add_title_index)
    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, later])
    db.ready.discard(t.key)
    reader = reading_database(db_url)
    try:
        with pytest.raises(migrations.SchemaNotReadyError, match="migrate"):
            ConversationStore(reader, table_prefix=prefix).get_messages("s")
    finally:
        reader.dispose()
    store = ConversationStore(db, table_prefix=prefix)
    store.add_messages("s", [HumanMessage("after")])
    db.ready.discard(t.key)
    assert [m.content for m in store.get_messages("s")] == ["before", "after"]
    assert applied == [prefix]
    with db.sync_engine.connect() as conn:
        versions = conn.execute(sa.select(t.migrations.c.version)).scalars().all()
        indexes = {i["name"] for i in sa.inspect(conn).get_indexes(t.sessions.name)}
    assert sorted(versions) == [*sorted(m.version for m in MIGRATIONS), later.version]
    assert f"{prefix}test_title_ix" in indexes


def _migrate_in_child(url: str, prefix: str, barrier: mp.synchronize.Barrier) -> None:  # type: ignore[name-defined]
    barrier.wait()
    store = ConversationStore(url, table_prefix=prefix)
    store.add_messages(f"s{os.getpid()}", [HumanMessage("hello")])


def test_eight_processes_migrate_at_once(db_url: str, prefix: str) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(8)
    procs = [
        ctx.Process(target=_migrate_in_child, args=(db_url, prefix, barrier)) for _ in range(8)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 8
    store = ConversationStore(db_url, table_prefix=prefix)
    assert len(store.list_sessions()) == 8
    with store.db.sync_engine.connect() as conn:
        versions = conn.execute(sa.select(store.tables.migrations.c.version)).scalars().all()
    assert sorted(versions) == sorted(m.version for m in MIGRATIONS)


def test_postgres_schema_name() -> None:
    url = server_url("postgres")
    schema = f"s{uuid.uuid4().hex[:8]}"
    try:
        store = ConversationStore(url, schema=schema, table_prefix="lm_")
        store.add_messages("s", [HumanMessage("in a schema")])
        with store.db.sync_engine.connect() as conn:
            n = conn.execute(sa.text(f'SELECT count(*) FROM "{schema}".lm_messages')).scalar()
        assert n == 1
    finally:
        with get_database(url).sync_engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


def test_mariadb_column_types() -> None:
    """Long text is LONGTEXT (TEXT stops at 64 KiB), ids are binary (exact comparison)."""
    url = server_url("mariadb")
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    store = ConversationStore(url, table_prefix=prefix)
    try:
        store.add_messages("s", [HumanMessage("x")])
        with store.db.sync_engine.connect() as conn:
            cols = {
                r[0]: r[1].lower()
                for r in conn.execute(
                    sa.text(
                        "SELECT column_name, column_type FROM information_schema.columns "
                        "WHERE table_schema = DATABASE() AND table_name = :t"
                    ),
                    {"t": f"{prefix}messages"},
                )
            }
            charset = conn.execute(
                sa.text(
                    "SELECT table_collation FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name = :t"
                ),
                {"t": f"{prefix}sessions"},
            ).scalar()
        assert cols["body"] == "longtext" and cols["message_id"] == "varbinary(1020)"
        assert str(charset).startswith("utf8mb4")
    finally:
        store.tables.metadata.drop_all(store.db.sync_engine)


async def test_async_engine_only(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    store = ConversationStore(engine)
    await store.aadd_messages("s", [HumanMessage("async engine")])
    assert [m.content for m in store.get_messages("s")] == ["async engine"]
    assert store.db.async_engine is engine
    await engine.dispose()


def _thread_and_connection(conn: object) -> tuple[str, str]:
    return threading.current_thread().name, type(conn).__name__


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "mariadb"])
async def test_async_calls_run_the_sync_path_in_worker_threads(
    tmp_path: Path, backend: str
) -> None:
    """One thread hop per unit of work, on every database (aiosqlite makes one per statement);
    an AsyncEngine the caller gave is used as given."""
    url = backend_url(backend, tmp_path)
    for db in (get_database(url), get_database(sa.create_engine(get_database(url).url))):
        name, kind = await db.arun(_thread_and_connection, schema=True)
        assert name.startswith("langmem-sqlite") and kind == "Connection"
        name, kind = await db.arun(_thread_and_connection, write=True)
        assert name.startswith("langmem-sqlite") and kind == "Unit"
        name, kind = await db.arun(_thread_and_connection)
        assert name.startswith("langmem-sqlite") and kind == "Unit"
        if db.sync_engine is not get_database(url).sync_engine:
            db.dispose()
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    try:
        name, _ = await get_database(engine).arun(_thread_and_connection)
        assert name == threading.current_thread().name  # run_sync, on the loop's thread
    finally:
        await engine.dispose()


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


async def _aput(saver: SQLSaver, thread: str, value: int) -> Any:
    ckpt = empty_checkpoint()
    version = saver.get_next_version(None, None)
    ckpt["channel_values"] = {"x": value}
    ckpt["channel_versions"] = {"x": version}
    return await saver.aput(_config(thread), ckpt, {"step": value}, {"x": version})


async def test_async_reads_go_on_while_async_writes_wait_for_the_file(tmp_path: Path) -> None:
    saver = SQLSaver(tmp_path / "r.db")
    await saver.asetup()
    cfg = await _aput(saver, "t", 1)
    held, release = threading.Event(), threading.Event()

    def hold(conn: object) -> None:  # a sync writer of this process, in a long transaction
        held.set()
        release.wait(20)

    holder = threading.Thread(target=saver.db.run, args=(hold,), kwargs={"write": True})
    holder.start()
    try:
        assert held.wait(10)
        writes = [asyncio.ensure_future(_aput(saver, f"w{i}", i)) for i in range(4)]
        await asyncio.sleep(0.1)
        assert not any(w.done() for w in writes)  # waiting for the file's write lock
        for _ in range(3):  # ... while reads still find worker threads
            got = await asyncio.wait_for(saver.aget_tuple(cfg), 10)
            assert got is not None and got.checkpoint["channel_values"] == {"x": 1}
    finally:
        release.set()
        holder.join(20)
    await asyncio.wait_for(asyncio.gather(*writes), 20)
    assert len([t async for t in saver.alist(None)]) == 5


def _forked_child(saver: SQLSaver, out: Any) -> None:
    async def go() -> Any:
        await _aput(saver, "child", 7)
        return await saver.aget_tuple(_config("child"))

    got = asyncio.run(go())
    out.put(got.checkpoint["channel_values"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_async_calls_in_a_forked_child_get_their_own_worker_threads(tmp_path: Path) -> None:
    saver = SQLSaver(tmp_path / "f.db")
    asyncio.run(_aput(saver, "parent", 1))  # the parent's worker threads exist now
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_forked_child, args=(saver, out))
    child.start()
    child.join(30)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert out.get(timeout=5) == {"x": 7}
    got = saver.get_tuple(_config("child"))
    assert got is not None and got.checkpoint["channel_values"] == {"x": 7}


def test_in_memory_sqlite_works_sync_and_async() -> None:
    store = ConversationStore("sqlite://")
    store.add_messages("s", [HumanMessage("mem")])

    async def read() -> list[str]:
        return [str(m.content) for m in await store.aget_messages("s")]

    assert asyncio.run(read()) == ["mem"]


async def test_sync_engine_given_async_methods_work(db_url: str, prefix: str) -> None:
    engine = sa.create_engine(get_database(db_url).url)
    store = ConversationStore(engine, table_prefix=prefix)
    await store.aadd_messages("s", [HumanMessage("async on a sync Engine")])
    assert [m.content for m in await store.aget_messages("s")] == ["async on a sync Engine"]
    assert store.db.sync_engine is engine
    assert store.db.async_engine is None  # async calls run the sync path in worker threads
    engine.dispose()


def test_store_works_without_langchain_core_chat_history(tmp_path: Path) -> None:
    """langchain-core 2.0 removes chat_history; the store and the package must still import."""
    import subprocess
    import sys

    code = f"""
import sys
sys.modules["langchain_core.chat_history"] = None  # as if removed
from langchain_core.messages import HumanMessage
import langmem_sqlite
store = langmem_sqlite.ConversationStore({str(tmp_path / "x.db")!r})
store.add_messages("s", [HumanMessage("still works")])
print(store.get_messages("s")[0].content)
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "still works"


def test_in_memory_sqlite_with_threads() -> None:
    """One shared connection: transactions from many threads take turns instead of failing."""
    import threading

    store = ConversationStore("sqlite://")
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for j in range(30):
                store.add_messages(f"s{i}", [HumanMessage(f"{i}:{j}")])
                store.get_messages(f"s{i}", limit=2)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    counts = {s.session_id: s.message_count for s in store.list_sessions()}
    assert all(counts[f"s{i}"] == 30 for i in range(8))


def test_autocommit_connection_can_vacuum(tmp_path: Path) -> None:
    db = get_database(tmp_path / "v.db")
    ConversationStore(db).add_messages("s", [HumanMessage("x")])
    with db.sync_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM")


def test_dialect_specific_indexes(db_url: str, prefix: str) -> None:
    """The store's (ns, updated_at, id) index exists on SQLite only; on PostgreSQL its expiry
    index holds only items with a TTL."""
    db = get_database(db_url)
    t = get_tables(prefix)
    ensure_schema(db, t)
    with db.sync_engine.connect() as conn:
        found = {i["name"] for i in sa.inspect(conn).get_indexes(t.store_items.name)}
        if db.backend == "postgresql":
            definition = conn.execute(
                sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"),
                {"n": f"{prefix}store_items_expires_ix"},
            ).scalar()
            assert "WHERE (expires_at IS NOT NULL)" in str(definition)
    assert (f"{prefix}store_items_ns_upd_ix" in found) is (db.backend == "sqlite")
