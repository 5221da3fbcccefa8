"""Forgetting a user: every kind of data goes, nothing of it stays in a SQLite file's bytes,
other users keep theirs. Written through the real APIs: history, a LangGraph graph on SQLSaver,
SQLStore and UserFacts."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from sqlalchemy import event

from langmem_sqlite import (
    ConversationStore,
    Memory,
    SQLSaver,
    SQLStore,
    get_database,
)
from langmem_sqlite.cli import cli as cli_group
from langmem_sqlite.engine.schema import get_tables
from langmem_sqlite.operations.erasure import aforget_user, forget_user
from langmem_sqlite.store import UserFacts

ALICE = "quokka-saffron"  # in every text of alice's; bob's texts have "wombat-indigo"
BOB = "wombat-indigo"


class State(TypedDict):
    messages: Annotated[list[BaseMessage], operator.add]


def _graph(saver: SQLSaver) -> Any:
    def reply(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(f"re: {state['messages'][-1].content}")]}

    g = StateGraph(State)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def _write_user(memory: Memory, user: str, mark: str, turns: int = 6) -> None:
    """A user's data of every kind, with updates and deletes that leave older copies."""
    history = memory.history(f"{user}-chat", user_id=user)
    conversations = memory.conversations
    for i in range(turns):
        history.add_messages(
            [HumanMessage(f"{mark} question {i}"), AIMessage(f"{mark} answer {i}")]
        )
        conversations.set_summary(
            f"{user}-chat", json.dumps({"text": f"{mark} sum {i}"}), user_id=user
        )
        conversations.rename_session(f"{user}-chat", f"{mark} title {i}", user_id=user)
    conversations.add_messages(f"{user}-old", [HumanMessage(f"{mark} cleared")], user_id=user)
    conversations.clear(f"{user}-old", user_id=user)
    conversations.add_messages(
        f"{user}-graph",
        [HumanMessage(f"{mark} node", id=f"{user}-n")],
        user_id=user,
        skip_existing=True,
    )
    graph = _graph(memory.checkpointer)
    for i in range(turns):
        config = {"configurable": {"thread_id": f"{user}-t1", "user_id": user}}
        graph.invoke({"messages": [HumanMessage(f"{mark} graph {i}")]}, config)
    # a thread whose later runs do not name the user: its earlier checkpoints do
    graph.invoke(
        {"messages": [HumanMessage(f"{mark} early")]},
        {"configurable": {"thread_id": f"{user}-t2", "user_id": user}},
    )
    graph.invoke(
        {"messages": [HumanMessage(f"{mark} late")]}, {"configurable": {"thread_id": f"{user}-t2"}}
    )
    facts = UserFacts(memory.store, user)
    key = facts.remember(f"{mark} likes tea")
    for i in range(3):
        facts.update(key, f"{mark} likes tea, version {i}")
    facts.propose([f"{mark} maybe likes coffee"])
    memory.store.put(("users", user, "prefs"), "theme", {"text": f"{mark} dark theme"})
    memory.store.put(("users", user, "prefs"), "brief", {"text": f"{mark} lapses"}, ttl=0.0001)


def _hits(path: Path, mark: str) -> dict[str, int]:
    needle = mark.encode()
    return {
        f.name: f.read_bytes().count(needle)
        for f in sorted(path.parent.glob(path.name + "*"))
        if f.read_bytes().count(needle)
    }


def _sqlite_memory(path: Path) -> Memory:
    """A SQLite file on an engine whose connections have ``secure_delete`` off, as SQLite builds
    without ``SQLITE_SECURE_DELETE`` have it (Debian's build turns it on by default)."""
    engine = sa.create_engine(f"sqlite:///{path}")

    @event.listens_for(engine, "connect")
    def _off(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA secure_delete = OFF")

    return Memory(engine)


def _bob_intact(memory: Memory) -> None:
    msgs = memory.conversations.get_messages("bob-chat", user_id="bob")
    assert [m.content for m in msgs][:2] == [f"{BOB} question 0", f"{BOB} answer 0"]
    assert len(msgs) == 12
    assert BOB in (memory.conversations.get_summary("bob-chat", user_id="bob") or "")
    state = _graph(memory.checkpointer).get_state({"configurable": {"thread_id": "bob-t1"}})
    assert state.values["messages"][0].content == f"{BOB} graph 0"
    assert [i.value["fact"] for i in UserFacts(memory.store, "bob").list_facts()] == [
        f"{BOB} likes tea, version 2"
    ]


def test_forget_user_leaves_no_byte_in_the_sqlite_files(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    memory = _sqlite_memory(path)
    _write_user(memory, "alice", ALICE)
    _write_user(memory, "bob", BOB)
    assert sum(_hits(path, ALICE).values()) > 50

    dry = forget_user(memory, "alice", dry_run=True)
    assert (dry.sessions, dry.messages, dry.summaries) == (3, 13, 1)
    assert dry.thread_ids == ["alice-t1", "alice-t2"]
    assert dry.checkpoints == 6 * 3 + 2 * 3  # input, loop and node checkpoints per run
    assert (dry.facts, dry.store_items) == (2, 2)
    assert dry.wal_emptied is None and not dry.vacuumed
    assert memory.conversations.count_messages("alice-chat", user_id="alice") == 12
    assert sum(_hits(path, ALICE).values()) > 50

    done = forget_user(memory, "alice")
    assert done.as_dict() == {
        **dry.as_dict(),
        "dry_run": False,
        "vacuumed": True,
        "wal_emptied": True,
    }
    assert _hits(path, ALICE) == {}
    assert _hits(path, BOB)  # bob's data is where it was
    _bob_intact(memory)
    assert memory.conversations.list_sessions("alice") == []
    assert memory.checkpointer.get_tuple({"configurable": {"thread_id": "alice-t2"}}) is None
    assert memory.store.search(("users", "alice")) == []
    again = forget_user(memory, "alice")
    assert (again.sessions, again.threads, again.facts, again.store_items) == (0, 0, 0, 0)


def test_without_vacuum_older_copies_stay_in_free_pages(tmp_path: Path) -> None:
    """What ``vacuum=False`` trades: on a build without ``secure_delete`` the rows deleted by the
    checkpointer and the store, and copies left by earlier updates, stay in free space (the
    grep above would find them); the WAL is emptied all the same."""
    path = tmp_path / "memory.db"
    memory = _sqlite_memory(path)
    _write_user(memory, "alice", ALICE)
    report = forget_user(memory, "alice", vacuum=False)
    assert report.wal_emptied is True and not report.vacuumed
    assert (path.parent / (path.name + "-wal")).stat().st_size == 0
    # the sessions were deleted with secure_delete on: no message is left; store rows are
    assert _hits(path, f"{ALICE} question") == _hits(path, f"{ALICE} answer") == {}
    assert sum(_hits(path, f"{ALICE} dark theme").values()) > 0
    assert forget_user(memory, "alice").vacuumed
    assert _hits(path, ALICE) == {}


def test_forget_user_removes_every_row_on_each_database(db_url: str, prefix: str) -> None:
    memory = Memory(db_url, table_prefix=prefix)
    _write_user(memory, "alice", ALICE, turns=2)
    _write_user(memory, "bob", BOB, turns=6)
    t = get_tables(prefix)
    engine = get_database(db_url).sync_engine

    def rows(user: str) -> dict[str, int]:
        s, m = t.sessions.c, t.messages.c
        with engine.connect() as conn:
            pks = list(conn.execute(sa.select(s.id).where(s.user_id == user)).scalars())
            out = {
                "sessions": len(pks),
                "messages": _count(conn, t.messages, m.session_pk.in_(pks or [-1])),
                "all store items": _count(conn, t.store_items, sa.true()),
            }
            for table in (
                t.checkpoints,
                t.checkpoint_blobs,
                t.checkpoint_writes,
                t.checkpoint_threads,
            ):
                out[table.name] = _count(conn, table, table.c.thread_id.like(f"{user}-%"))
            return out

    before = rows("alice")
    assert all(before.values()) and all(rows("bob").values())
    report = forget_user(memory, "alice")
    assert (report.sessions, report.messages, report.summaries) == (3, 5, 1)
    assert (report.threads, report.facts, report.store_items) == (2, 2, 2)  # a lapsed item too
    assert report.wal_emptied is (True if memory.db.backend == "sqlite" else None)
    after = rows("alice")
    assert after == {**dict.fromkeys(before, 0), "all store items": before["all store items"] - 4}
    _bob_intact(memory)
    memory.close()


def _count(conn: sa.Connection, table: sa.Table, where: Any) -> int:
    query = sa.select(sa.func.count()).select_from(table).where(where)
    return int(conn.execute(query).scalar_one())


async def test_aforget_user(db_url: str, prefix: str) -> None:
    memory = Memory(db_url, table_prefix=prefix)
    await memory.conversations.aadd_messages("s", [HumanMessage(f"{ALICE} hi")], user_id="alice")
    config = {"configurable": {"thread_id": "alice-async", "user_id": "alice"}}
    await _graph(memory.checkpointer).ainvoke({"messages": [HumanMessage(f"{ALICE} g")]}, config)
    await UserFacts(memory.store, "alice").aremember(f"{ALICE} fact")
    dry = await aforget_user(memory, "alice", dry_run=True)
    assert (dry.sessions, dry.messages, dry.threads, dry.facts) == (1, 1, 1, 1)
    done = await aforget_user(memory, "alice")
    assert (done.sessions, done.messages, done.threads, done.facts) == (1, 1, 1, 1)
    assert await memory.conversations.alist_sessions("alice") == []
    assert await memory.checkpointer.aget_tuple(config) is None
    assert await memory.store.asearch(("users", "alice")) == []


def test_threads_by_numeric_and_authenticated_user_ids(db_url: str, prefix: str) -> None:
    """LangGraph copies an int ``user_id`` into metadata as an int, and the LangGraph API
    server names its authenticated user ``langgraph_auth_user_id``; other users' threads and
    threads without a user stay."""
    saver = SQLSaver(db_url, table_prefix=prefix)
    graph = _graph(saver)
    for thread, extra in (
        ("int-id", {"user_id": 42}),
        ("str-id", {"user_id": "42"}),
        ("auth", {"langgraph_auth_user_id": "42"}),
        ("other", {"user_id": 420}),
        ("anonymous", {}),
    ):
        graph.invoke(
            {"messages": [HumanMessage("x")]}, {"configurable": {"thread_id": thread, **extra}}
        )
    report = forget_user(get_database(db_url), 42, table_prefix=prefix, thread_ids=["anonymous"])
    assert report.thread_ids == ["anonymous", "auth", "int-id", "str-id"]
    assert [t.thread_id for t in saver.list_threads()] == ["other"]


def test_store_prefixes_and_other_namespaces(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    store.put(("users", "alice", "facts"), "f", {"fact": "x"})
    store.put(("memories", "alice"), "m", {"x": 1})
    store.put(("memories", "alice", "deep"), "m", {"x": 1})
    store.put(("docs", "alice-guide"), "d", {"x": 1})  # not the label "alice"
    store.put(("memories", "bob"), "m", {"x": 1})
    report = forget_user(get_database(db_url), "alice", table_prefix=prefix)
    assert (report.facts, report.store_items) == (1, 0)
    assert report.other_namespaces == [("memories", "alice"), ("memories", "alice", "deep")]
    report = forget_user(
        get_database(db_url),
        "alice",
        table_prefix=prefix,
        store_prefixes=[("memories", "{user_id}")],
    )
    assert (report.store_items, report.other_namespaces) == (2, [])
    assert sorted(ns for ns in store.list_namespaces()) == [
        ("docs", "alice-guide"),
        ("memories", "bob"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"user_id": ""}, ValueError, "user_id"),
        ({"user_id": None}, ValueError, "user_id"),
        ({"user_id": "a", "store_prefixes": "users"}, TypeError, "store_prefixes"),
        ({"user_id": "a", "store_prefixes": [()]}, TypeError, "store_prefixes"),
        ({"user_id": "a", "store_prefixes": [("users", "")]}, ValueError, "store_prefixes"),
        ({"user_id": "a", "thread_ids": "t1"}, TypeError, "thread_ids"),
        ({"user_id": "a", "thread_ids": [""]}, ValueError, "thread_ids"),
        ({"user_id": "a", "thread_keys": "user_id"}, TypeError, "thread_keys"),
    ],
)
def test_bad_arguments_delete_nothing(
    tmp_path: Path, kwargs: dict[str, Any], error: type, match: str
) -> None:
    store = ConversationStore(tmp_path / "x.db")
    store.add_messages("s", [HumanMessage("keep")], user_id="a")
    with pytest.raises(error, match=match):
        forget_user(store.db, **kwargs)
    assert store.count_messages("s", user_id="a") == 1


def test_encrypted_checkpoint_metadata_is_searched_with_the_apps_saver(
    db_url: str, prefix: str
) -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 32)
    saver = SQLSaver(db_url, table_prefix=prefix, serde=serde)
    config = {"configurable": {"thread_id": "secret-thread", "user_id": "alice"}}
    _graph(saver).invoke({"messages": [HumanMessage("x")]}, config)
    db = get_database(db_url)
    blind = forget_user(db, "alice", table_prefix=prefix, dry_run=True)
    assert (blind.threads, blind.unreadable_threads) == (0, 1)
    report = forget_user(db, "alice", table_prefix=prefix, saver=saver)
    assert report.thread_ids == ["secret-thread"]
    assert saver.get_tuple(config) is None


def test_cli_forget_user(db_url: str, prefix: str) -> None:
    """The package's own chat (thread, facts, mirrored session) of user ada, removed by the
    command; user u's session stays."""
    from langmem_sqlite.chat import open_chat, run_lines

    session, _ = open_chat(db_url, user="ada", offline=True, prefix=prefix)
    run_lines(session, ["My name is Ada.", "Hello there"], lambda _: None, show_input=False)
    ConversationStore(db_url, table_prefix=prefix).add_messages(
        "s1", [HumanMessage("hi")], user_id="u"
    )
    common = ["--db", db_url, "--prefix", prefix]

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli_group, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    dry = json.loads(run("forget-user", "ada", "--dry-run", "--json", *common))
    assert dry["dry_run"] and dry["sessions"] == 1 and dry["threads"] == 1 and dry["messages"] > 0
    assert dry["facts"] >= 1
    text = run("forget-user", "ada", "--yes", *common)
    assert "deleted for user 'ada'" in text and "sessions" in text
    assert json.loads(run("forget-user", "ada", "--dry-run", "--json", *common))["sessions"] == 0
    users = {r["user_id"] for r in json.loads(run("users", "--json", *common))}
    assert users == {"u"}


async def test_aforget_user_on_an_aiosqlite_engine(tmp_path: Path) -> None:
    """Given an AsyncEngine, the steps (VACUUM included) run on it through ``run_sync``."""
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/a.db")
    memory = Memory(engine)
    await memory.conversations.aadd_messages("s", [HumanMessage(f"{ALICE} hi")], user_id="alice")
    await UserFacts(memory.store, "alice").aremember(f"{ALICE} fact")
    report = await aforget_user(memory, "alice")
    assert (report.sessions, report.facts, report.vacuumed, report.wal_emptied) == (
        1,
        1,
        True,
        True,
    )
    await engine.dispose()
    assert _hits(tmp_path / "a.db", ALICE) == {}


def test_the_connections_secure_delete_mode_is_restored(tmp_path: Path) -> None:
    """The pooled connection that deleted the sessions goes back with the mode it had."""
    engine = sa.create_engine(
        f"sqlite:///{tmp_path}/one.db",
        poolclass=sa.pool.StaticPool,
        connect_args={"check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _fast(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA secure_delete = FAST")

    store = ConversationStore(engine)
    store.add_messages("s", [HumanMessage(f"{ALICE} hi")], user_id="alice")
    assert forget_user(store.db, "alice").sessions == 1
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA secure_delete").scalar() == 2
