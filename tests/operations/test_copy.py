"""`copy_database` / `langmem-sqlite copy`: SQLite -> PostgreSQL -> MariaDB -> SQLite with real
data (chat history, a LangGraph graph's checkpoints, store items with vectors and facts),
compared through the public APIs at every hop; idempotent, resumable, per user, pgvector."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from support import server_url

from langmem_sqlite import ConversationStore, SQLSaver, SQLStore, acopy_database, copy_database
from langmem_sqlite.cli import cli
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables
from langmem_sqlite.operations.copy import CopyMismatchError
from langmem_sqlite.store import UserFacts
from langmem_sqlite.store.pgvector_schema import pgvector_table

INDEX: Any = {"dims": 8, "embed": DeterministicFakeEmbedding(size=8), "fields": ["text"]}
USERS = ("ada", "bob")


@pytest.fixture
def copy_prefix() -> Iterator[str]:
    """A table prefix used on both servers (and SQLite files); dropped from the servers after."""
    name = f"c{uuid.uuid4().hex[:10]}_"
    yield name
    tables = get_tables(name)
    for backend in ("postgres", "mariadb"):
        engine = get_database(server_url(backend)).sync_engine
        if engine.dialect.name == "postgresql":
            pgvector_table(tables).drop(engine, checkfirst=True)
        tables.metadata.drop_all(engine)


def _graph(checkpointer: Any) -> Any:
    """A chat graph with a subgraph that interrupts: namespaces and pending writes too."""

    def ask(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"confirmed {interrupt('sure?')}")]}

    sub = StateGraph(MessagesState)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")

    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo [/] {state['messages'][-1].text}")]}

    g = StateGraph(MessagesState)
    g.add_node("bot", bot)
    g.add_node("sub", sub.compile())
    g.add_edge(START, "bot")
    g.add_edge("bot", "sub")
    return g.compile(checkpointer=checkpointer)


def _fill(url: str, prefix: str) -> None:
    """What an application leaves in a database: sessions, a graph's threads, store, facts."""
    store = ConversationStore(url, table_prefix=prefix)
    saver = SQLSaver(url, table_prefix=prefix)
    kv = SQLStore(url, table_prefix=prefix, index=INDEX)
    graph = _graph(saver)
    for user in USERS:
        store.add_messages(
            "s1",
            [
                HumanMessage("héllo [bold]x[/bold]", id=f"{user}-h1"),
                AIMessage("", tool_calls=[{"name": "f", "args": {"x": [1, 2]}, "id": "c1"}]),
                ToolMessage("42", tool_call_id="c1", artifact={"k": b"\x00\x01".hex()}),
                AIMessage("done", response_metadata={"model": "m"}, usage_metadata=None),
            ],
            user_id=user,
        )
        store.set_summary("s1", f"{user} greeted", user_id=user)
        store.rename_session("s1", f"Title of {user}", user_id=user)
        config = {"configurable": {"thread_id": f"t-{user}", "user_id": user}}
        graph.invoke({"messages": [HumanMessage(f"hi from {user}")]}, config)
        graph.invoke(Command(resume="yes"), config)
        graph.invoke({"messages": [HumanMessage("again")]}, config)  # left at the interrupt
        facts = UserFacts(kv, user)
        facts.remember(f"{user} lives in Lyon")
        facts.propose([f"{user} likes tea"])
        for i in range(6):
            kv.put((user, "notes"), f"n{i}", {"text": f"note {i} of {user}", "i": i})
    store.add_messages("anon", [HumanMessage("no user")])


def _snapshot(url: str, prefix: str) -> dict[str, Any]:
    """Everything the public APIs read back, comparable across databases."""
    store = ConversationStore(url, table_prefix=prefix)
    saver = SQLSaver(url, table_prefix=prefix)
    kv = SQLStore(url, table_prefix=prefix, index=INDEX)
    sessions = sorted(
        (s.user_id or "", s.session_id, s.title, s.message_count, s.token_total, s.created_at)
        for s in store.list_sessions()
    )
    messages = {(u, sid): store.get_messages(sid, user_id=u or None) for u, sid, *_ in sessions}
    summaries = {(u, sid): store.get_summary(sid, user_id=u or None) for u, sid, *_ in sessions}
    threads = sorted((t.thread_id, t.checkpoint_count, t.metadata) for t in saver.list_threads())
    checkpoints = {
        t: [
            (c.config, c.checkpoint, c.metadata, c.parent_config, c.pending_writes)
            for c in saver.list({"configurable": {"thread_id": t}})
        ]
        for t, *_ in threads
    }
    store_items = {
        user: [
            (i.key, i.value, i.score) for i in kv.search((user, "notes"), query="note 3", limit=10)
        ]
        for user in USERS
    }
    facts = {
        user: sorted(
            (f.key, f.value["fact"]) for f in UserFacts(kv, user).list_facts(pending=pending)
        )
        for user in USERS
        for pending in (False, True)
    }
    return {
        "sessions": sessions,
        "messages": messages,
        "summaries": summaries,
        "threads": threads,
        "checkpoints": checkpoints,
        "store": store_items,
        "facts": facts,
    }


def _resumes(url: str, prefix: str, user: str) -> None:
    """The graph of ``user`` resumes on the copied thread, and the app keeps writing there."""
    config = {"configurable": {"thread_id": f"t-{user}", "user_id": user}}
    graph = _graph(SQLSaver(url, table_prefix=prefix))
    out = graph.invoke(Command(resume="ok"), config)
    assert out["messages"][-1].text == "confirmed ok"
    store = ConversationStore(url, table_prefix=prefix)
    store.add_messages("new-after-copy", [HumanMessage("a new session")], user_id=user)
    kv = SQLStore(url, table_prefix=prefix, index=INDEX)
    kv.put((user, "notes"), "fresh", {"text": "fresh note"})  # new ids past the copied ones
    assert kv.get((user, "notes"), "fresh") is not None


def test_round_trip_sqlite_postgres_mariadb_sqlite(tmp_path: Path, copy_prefix: str) -> None:
    first = f"sqlite:///{tmp_path}/first.db"
    last = f"sqlite:///{tmp_path}/last.db"
    pg, maria = server_url("postgres"), server_url("mariadb")
    _fill(first, copy_prefix)
    expected = _snapshot(first, copy_prefix)
    assert len(expected["threads"]) == 2 and all(expected["store"].values())
    hops = [(first, pg), (pg, maria), (maria, last)]
    for source, target in hops:
        report = copy_database(source, target, table_prefix=copy_prefix, batch_size=7)
        assert report.verified and report.copied == report.rows > 50, report.as_dict()
        assert report.present == 0
        assert _snapshot(target, copy_prefix) == expected, (source, target)
        again = copy_database(source, target, table_prefix=copy_prefix)  # idempotent
        assert (again.copied, again.present) == (0, report.rows)
    for _, target in hops:
        _resumes(target, copy_prefix, "ada")


def test_per_user_then_everything_resumes(tmp_path: Path, copy_prefix: str) -> None:
    source = f"sqlite:///{tmp_path}/source.db"
    target = server_url("postgres")
    _fill(source, copy_prefix)
    expected = _snapshot(source, copy_prefix)
    ada = copy_database(source, target, table_prefix=copy_prefix, user_id="ada")
    by_table = {t.table.removeprefix(copy_prefix): t for t in ada.tables}
    assert by_table["sessions"].copied == 1 and by_table["messages"].copied == 4
    assert by_table["checkpoint_threads"].copied == 1
    assert by_table["store_items"].copied == 2  # her fact and her pending fact
    assert ada.verified
    store = ConversationStore(target, table_prefix=copy_prefix)
    assert [(s.user_id, s.session_id) for s in store.list_sessions()] == [("ada", "s1")]
    assert [t.thread_id for t in SQLSaver(target, table_prefix=copy_prefix).list_threads()] == [
        "t-ada"
    ]
    kv = SQLStore(target, table_prefix=copy_prefix, index=INDEX)
    assert [f.value["fact"] for f in UserFacts(kv, "ada").list_facts()] == ["ada lives in Lyon"]
    assert UserFacts(kv, "bob").list_facts() == []
    # the whole copy afterwards: what the first one wrote is found there, the rest is copied
    full = copy_database(source, target, table_prefix=copy_prefix)
    assert full.present == ada.copied and full.copied == full.rows - ada.copied
    assert _snapshot(target, copy_prefix) == expected


async def test_acopy_database_copies_while_the_event_loop_runs(
    tmp_path: Path, copy_prefix: str
) -> None:
    source = f"sqlite:///{tmp_path}/source.db"
    target = server_url("mariadb")
    _fill(source, copy_prefix)
    expected = _snapshot(source, copy_prefix)
    ticks = 0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    ticker = asyncio.create_task(tick())
    try:
        report = await acopy_database(source, target, table_prefix=copy_prefix, batch_size=7)
    finally:
        done.set()
        await ticker
    assert report.verified and report.copied == report.rows > 50, report.as_dict()
    assert ticks >= 5  # the loop went on during the copy (a blocking call leaves it at 1)
    assert _snapshot(target, copy_prefix) == expected
    again = await acopy_database(source, target, table_prefix=copy_prefix)
    assert (again.copied, again.present) == (0, report.rows)
    with pytest.raises(ValueError, match="batch_size"):  # the errors of copy_database
        await acopy_database(source, target, table_prefix=copy_prefix, batch_size=0)


def test_a_different_row_under_the_same_key_is_refused(tmp_path: Path) -> None:
    source, target = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    ConversationStore(source).add_messages("s", [HumanMessage("from a")], user_id="u")
    ConversationStore(target).add_messages("s", [HumanMessage("from b")], user_id="u")
    with pytest.raises(CopyMismatchError, match="sessions"):
        copy_database(source, target)
    assert [m.text for m in ConversationStore(target).get_messages("s", user_id="u")] == ["from b"]


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        copy_database(str(tmp_path / "none.db"), str(tmp_path / "t.db"))
    assert not (tmp_path / "none.db").exists()
    sqlite = tmp_path / "other.db"
    with sa.create_engine(f"sqlite:///{sqlite}").begin() as conn:
        conn.execute(sa.text("CREATE TABLE x (a INT)"))
    with pytest.raises(ValueError, match="no langmem-sqlite tables"):
        copy_database(str(sqlite), str(tmp_path / "t.db"))
    ConversationStore(str(tmp_path / "s.db")).add_messages("s", [HumanMessage("x")])
    with pytest.raises(ValueError, match="batch_size"):
        copy_database(str(tmp_path / "s.db"), str(tmp_path / "t.db"), batch_size=0)
    with pytest.raises(ValueError, match="user_id"):
        copy_database(str(tmp_path / "s.db"), str(tmp_path / "t.db"), user_id=" ")


@pytest.mark.parametrize("distance", ["cosine", "inner_product", "l2"])
def test_copies_into_a_pgvector_database(tmp_path: Path, pgvector_url: str, distance: str) -> None:
    """The copied vectors rank as the source's do, for every distance (the pgvector table holds
    each vector at its own length, not the unit vector)."""
    prefix = f"v{uuid.uuid4().hex[:8]}_"
    source = f"sqlite:///{tmp_path}/source.db"
    index = {**INDEX, "distance_type": distance}
    kv = SQLStore(source, table_prefix=prefix, index=index)
    for i in range(20):
        kv.put(("users", "ada", "notes"), f"k{i}", {"text": f"note {i}"})
    expected = [(i.key, i.score) for i in kv.search(("users",), query="note 7", limit=5)]
    # a store on the target made the pgvector table before the copy: the copy fills it
    target = SQLStore(pgvector_url, table_prefix=prefix, index=index)
    assert target.search(("users",), query="x") == []
    report = copy_database(source, pgvector_url, table_prefix=prefix)
    names = {t.table: t for t in report.tables}
    assert names[f"{prefix}store_pgvectors"].copied == 20 and report.verified
    with get_database(pgvector_url).sync_engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(pgvector_table(target.tables)))
        assert count.scalar_one() == 20
    got = [(i.key, i.score) for i in target.search(("users",), query="note 7", limit=5)]
    assert [k for k, _ in got] == [k for k, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-5)


def test_cli_copy(tmp_path: Path) -> None:
    source, target = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    ConversationStore(source).add_messages("s", [HumanMessage("hi")], user_id="u")
    runner = CliRunner()
    result = runner.invoke(cli, ["copy", "--from", source, "--to", target, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["verified"] and doc["copied"] == 2 and doc["present"] == 0
    result = runner.invoke(cli, ["copy", "--from", source, "--to", target])
    assert result.exit_code == 0, result.output
    assert "copied 0 rows (2 already there) of 2" in result.output
    assert "verified by reading back" in result.output
    assert [m.text for m in ConversationStore(target).get_messages("s", user_id="u")] == ["hi"]
    missing = runner.invoke(cli, ["copy", "--from", str(tmp_path / "no.db"), "--to", target])
    assert missing.exit_code != 0 and "--from: no SQLite database" in missing.output
    assert not (tmp_path / "no.db").exists()
