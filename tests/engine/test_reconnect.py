"""A server dropping pooled connections: the next operation reconnects instead of failing."""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from support import server_url

from langmem_sqlite import ConversationStore
from langmem_sqlite.engine import Unit
from langmem_sqlite.engine.schema import get_tables


def _connection_id(unit: Unit) -> int:
    sql = "SELECT pg_backend_pid()" if unit.rules.name == "postgresql" else "SELECT CONNECTION_ID()"
    return int(unit.execute(sa.text(sql)).scalar_one())


def _kill(url: str, pids: set[int]) -> None:
    admin = sa.create_engine(ConversationStore(url).db.url, poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        for pid in pids:
            if conn.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            else:
                conn.execute(sa.text(f"KILL CONNECTION {int(pid)}"))
    admin.dispose()


def _check_reconnects(backend: str) -> None:
    url = server_url(backend)
    prefix = f"r{uuid.uuid4().hex[:8]}_"
    # a store with its own pool (distinct engine arguments), so only its connections are killed
    store = ConversationStore(url, table_prefix=prefix, engine_args={"pool_size": 2})
    try:
        store.add_messages("s", [HumanMessage("before")])
        pids = {store.db.run(_connection_id) for _ in range(4)}
        _kill(url, pids)
        store.add_messages("s", [HumanMessage("after")])  # stale pooled connection: retried
        assert [m.content for m in store.get_messages("s")] == ["before", "after"]
        assert store.db.run(_connection_id) not in pids
    finally:
        get_tables(prefix).metadata.drop_all(store.db.sync_engine)


def test_postgres_terminated_connections_reconnect() -> None:
    _check_reconnects("postgres")


def test_mariadb_killed_connections_reconnect() -> None:
    _check_reconnects("mariadb")
