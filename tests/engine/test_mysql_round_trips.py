"""MariaDB/MySQL: what a unit of work costs in statements, and what the pool's reset still does.

Engines this package makes turn SQLAlchemy's unconditional ``ROLLBACK`` on check-in off; the
dialect's ``reset`` listener rolls back only a connection whose server reports an open
transaction. Counted with the server's own statement counters of the session
(``SHOW SESSION STATUS``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from support import server_url

from langmem_sqlite import SQLChatMessageHistory, SQLSaver, SQLStore
from langmem_sqlite.engine import Database, get_database
from langmem_sqlite.engine.schema import get_tables

pytestmark = pytest.mark.mysql

_COUNTERS = ("Questions", "Com_select", "Com_commit", "Com_rollback")


def _status(db: Database) -> dict[str, int]:
    """The statement counters of the database's one pooled connection (its session)."""
    raw: Any = db.sync_engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("SHOW SESSION STATUS")
        rows = {name: value for name, value in cur.fetchall() if name in _COUNTERS}
        return {name: int(value) for name, value in rows.items()}
    finally:
        raw.close()


def _per_call(db: Database, fn: Any, n: int = 10) -> dict[str, float]:
    """Statements the server ran per call of ``fn`` (the counters' own reads taken out)."""
    fn()
    first, second = _status(db), _status(db)
    idle = {k: second[k] - first[k] for k in _COUNTERS}  # what one reading of them costs
    for _ in range(n):
        fn()
    after = _status(db)
    return {k: (after[k] - second[k] - idle[k]) / n for k in _COUNTERS}


@pytest.fixture
def url() -> str:
    """The MariaDB server."""
    return server_url("mariadb")


@pytest.fixture
def prefix(url: str) -> Iterator[str]:
    """A table prefix of this test's own; its tables are dropped afterwards."""
    name = f"rt{uuid.uuid4().hex[:8]}_"
    yield name
    get_tables(name).metadata.drop_all(get_database(url).sync_engine)


@pytest.fixture
def db(url: str) -> Iterator[Database]:
    """A database of one pooled connection: every call below runs on the same session."""
    database = get_database(url, engine_args={"pool_size": 1, "max_overflow": 0})
    yield database
    database.dispose()


def test_reads_and_one_statement_writes_send_no_rollback(db: Database, prefix: str) -> None:
    store = SQLStore(db, table_prefix=prefix)
    store.put(("u",), "k", {"a": 1})
    saver = SQLSaver(db, table_prefix=prefix)
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(cfg, empty_checkpoint(), {"source": "input", "step": -1}, {})
    history = SQLChatMessageHistory("s", db, table_prefix=prefix)
    history.add_messages([HumanMessage("hi")])

    # a read: its SELECT and its COMMIT, and no ROLLBACK when the connection goes back
    for read in (
        lambda: store.get(("u",), "k"),
        lambda: saver.get_tuple(cfg),
        lambda: history.messages,
    ):
        counts = _per_call(db, read)
        assert counts == {"Questions": 2, "Com_select": 1, "Com_commit": 1, "Com_rollback": 0}
    put = _per_call(db, lambda: store.put(("u",), "k", {"a": 2}))
    assert put["Questions"] == 2 and put["Com_rollback"] == 0
    assert store.get(("u",), "k").value == {"a": 2}  # type: ignore[union-attr]


def test_a_connection_left_in_a_transaction_is_rolled_back_on_check_in(
    url: str, prefix: str
) -> None:
    store = SQLStore(url, table_prefix=prefix)
    store.setup()
    engine = store.db.sync_engine
    items = get_tables(prefix).store_items
    raw: Any = engine.raw_connection()
    dbapi = raw.dbapi_connection
    insert = items.insert().compile(dialect=engine.dialect)
    row = {"ns": "u", "key": "left-open", "value": "{}", "created_at": 0, "updated_at": 0}
    raw.cursor().execute(str(insert), {c: row.get(c) for c in insert.params})
    assert dbapi.server_status & 1  # in a transaction, never committed
    raw.close()  # back to the pool: the reset listener rolls it back
    assert not dbapi.server_status & 1
    assert store.get(("u",), "left-open") is None
    # the same connection serves the next unit of work without an old snapshot
    store.put(("u",), "after", {"ok": True})
    assert store.get(("u",), "after").value == {"ok": True}  # type: ignore[union-attr]


def test_a_failed_write_leaves_no_transaction_open(url: str, prefix: str) -> None:
    store = SQLStore(url, table_prefix=prefix)
    store.setup()
    engine = store.db.sync_engine
    items = get_tables(prefix).store_items
    row = {"ns": "u", "key": "half", "value": "{}", "created_at": 0, "updated_at": 0}

    def insert_then_fail(session: Any) -> None:
        session.execute(items.insert(), row)
        raise RuntimeError("after the insert")

    with pytest.raises(RuntimeError):
        store.db.run(insert_then_fail, write=True)
    assert store.get(("u",), "half") is None
    store.put(("u",), "k", {"ok": 1})
    pool: Any = engine.pool
    conns = [engine.raw_connection() for _ in range(pool.checkedin())]
    try:
        assert all(not c.dbapi_connection.server_status & 1 for c in conns)
    finally:
        for c in conns:
            c.close()


def test_a_callers_engine_keeps_its_own_reset(url: str, prefix: str) -> None:
    """An Engine the caller made keeps SQLAlchemy's ROLLBACK on check-in; the listener adds
    nothing to a connection with no transaction open."""
    engine = sa.create_engine(get_database(url).url)
    try:
        store = SQLStore(engine, table_prefix=prefix)
        store.put(("u",), "k", {"a": 1})
        assert store.get(("u",), "k").value == {"a": 1}  # type: ignore[union-attr]
        raw: Any = engine.raw_connection()
        raw.cursor().execute("SELECT 1")
        raw.close()
        raw = engine.raw_connection()
        assert not raw.dbapi_connection.server_status & 1
        raw.close()
    finally:
        engine.dispose()
