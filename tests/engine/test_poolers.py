"""PostgreSQL behind a transaction pooler: server-side prepared statements are used on direct
connections only, and nothing of a unit of work outlives its transaction."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from sqlalchemy.engine import make_url
from support import PGBOUNCER_URL, POSTGRES_URL, server_url

from langmem_sqlite import SQLSaver
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.dialects import PostgreSQLRules
from langmem_sqlite.engine.schema import get_tables


@pytest.mark.parametrize(
    ("url", "threshold"),
    [
        ("postgresql+psycopg://u@db.example:5432/x", "default"),
        ("postgresql+psycopg://u@db.example:6432/x", None),  # PgBouncer's port
        ("postgresql+psycopg://u@db.example:6543/x", None),  # Supabase's transaction pooler
        ("postgresql+psycopg://u@ep-1-pooler.region.example/x", None),  # a pooler's host name
        ("postgresql+psycopg://u@db.example:6432/x?prepare_threshold=5", 5),  # explicit wins
        ("postgresql+psycopg://u@db.example:5432/x?prepare_threshold=none", None),
        ("postgresql+psycopg://u@db.example:5432/x?prepare_threshold=0", None),
    ],
)
def test_prepared_statements_unless_a_pooler(url: str, threshold: Any) -> None:
    parsed = make_url(url)
    connect = PostgreSQLRules.engine_kwargs(parsed)["connect_args"]
    if threshold == "default":
        assert "prepare_threshold" not in connect  # psycopg's own default (5)
    else:
        assert connect["prepare_threshold"] == threshold
    assert "prepare_threshold" not in PostgreSQLRules.driver_url(parsed).query


def test_a_bad_prepare_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="prepare_threshold"):
        PostgreSQLRules.engine_kwargs(make_url("postgresql://u@h/x?prepare_threshold=-2"))
    with pytest.raises(ValueError, match="prepare_threshold"):
        get_database("postgresql://u@127.0.0.1:1/x?prepare_threshold=soon")


def test_connections_say_whether_they_prepare() -> None:
    direct = get_database(server_url("postgres"))
    pooled = get_database(server_url("pgbouncer"))
    option = get_database(POSTGRES_URL + "?prepare_threshold=none")
    for db, prepares in ((direct, True), (pooled, False), (option, False)):
        threshold = db.run(lambda c: c.connection.connection.dbapi_connection.prepare_threshold)
        assert (threshold is not None) is prepares, db.safe_url()


def _chat(url: str, prefix: str) -> int:
    """Turns of a small chat graph, several threads: how many failed."""
    saver = SQLSaver(url, table_prefix=prefix)
    graph = StateGraph(MessagesState)
    graph.add_node("bot", lambda s: {"messages": [AIMessage("hi")]})
    graph.add_edge(START, "bot")
    app = graph.compile(checkpointer=saver)
    failed = 0
    for i in range(30):
        try:
            app.invoke(
                {"messages": [HumanMessage(f"q{i}")]}, {"configurable": {"thread_id": f"t{i % 3}"}}
            )
        except Exception:
            failed += 1
    get_tables(prefix).metadata.drop_all(get_database(POSTGRES_URL).sync_engine)
    saver.db.dispose()
    return failed


def test_through_pgbouncer_prepared_statements_would_break_and_are_not_used(prefix: str) -> None:
    """PgBouncer in transaction mode hands a prepared statement's server connection to other
    clients: with them forced on, turns fail ('prepared statement "_pg3_0" does not exist');
    with the package's rule (PgBouncer's port), none does."""
    server_url("pgbouncer")
    assert _chat(PGBOUNCER_URL + "?prepare_threshold=1", prefix) > 0
    assert _chat(PGBOUNCER_URL, prefix + "b") == 0


@pytest.fixture
def prefix() -> str:
    import uuid

    return f"pb{uuid.uuid4().hex[:8]}_"
