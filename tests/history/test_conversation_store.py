"""Conversation store behaviour on every database: order, windows, isolation, sessions, input."""

from __future__ import annotations

import time
import uuid

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langmem_sqlite import ConversationStore, clock


def turns(n: int, tag: str = "") -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(n):
        out.append(HumanMessage(f"q{i}{tag}", id=f"h{i}{tag}"))
        out.append(AIMessage(f"a{i}{tag}", id=f"a{i}{tag}"))
    return out


@pytest.fixture
def store(db_url: str, prefix: str) -> ConversationStore:
    return ConversationStore(db_url, table_prefix=prefix)


def test_order_within_one_millisecond(store: ConversationStore) -> None:
    # one batch of 200 shares one created_at; 100 single adds follow in quick succession
    store.add_messages("s", [HumanMessage(str(i)) for i in range(200)])
    for i in range(200, 300):
        store.add_messages("s", [HumanMessage(str(i))])
    assert [m.content for m in store.get_messages("s")] == [str(i) for i in range(300)]
    assert [m.content for m in store.get_messages("s", limit=250)][:2] == ["50", "51"]
    with store.db.sync_engine.connect() as conn:
        stamps = conn.execute(sa.select(store.tables.messages.c.created_at)).scalars().all()
    assert len(set(stamps)) <= 101  # order did not come from the timestamps


def test_last_n_in_sql(store: ConversationStore) -> None:
    store.add_messages("s", turns(50))
    last = store.get_messages("s", limit=5)
    assert [m.content for m in last] == ["a47", "q48", "a48", "q49", "a49"]
    assert len(store.get_messages("s", limit=1000)) == 100
    assert store.get_messages("missing", limit=3) == []


async def test_last_n_async(store: ConversationStore) -> None:
    await store.aadd_messages("s", turns(10))
    assert [m.content for m in await store.aget_messages("s", limit=2)] == ["q9", "a9"]


def test_token_window_from_stored_counts(db_url: str, prefix: str) -> None:
    store = ConversationStore(
        db_url, table_prefix=prefix, token_counter=lambda m: len(m.content) + 1
    )
    msgs = [
        HumanMessage("aaaa"),  # 5
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),  # 1
        ToolMessage("tttttt", tool_call_id="c1"),  # 7
        AIMessage("bbb"),  # 4
        HumanMessage("cc"),  # 3
    ]
    store.add_messages("s", msgs)
    assert store.get_session("s").token_total == 20  # type: ignore[union-attr]
    assert [m.content for m in store.get_token_window("s", 6)] == ["cc"]
    assert [m.content for m in store.get_token_window("s", 7)] == ["bbb", "cc"]
    # 14 tokens would start on the tool result: the orphan is dropped
    assert [m.content for m in store.get_token_window("s", 14)] == ["bbb", "cc"]
    assert len(store.get_token_window("s", 15)) == 4
    assert len(store.get_token_window("s", 100)) == 5
    assert store.get_token_window("s", 0) == []
    # a second batch keeps the running sums right
    store.add_messages("s", [AIMessage("dddddddddd")])  # 11
    assert [m.content for m in store.get_token_window("s", 14)] == ["cc", "dddddddddd"]


async def test_token_window_async(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix, token_counter=lambda m: 10)
    await store.aadd_messages("s", turns(5))
    assert len(await store.aget_token_window("s", 35)) == 3


def test_load_window_never_starts_on_orphan(store: ConversationStore) -> None:
    msgs = [
        HumanMessage("q"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "f", "args": {}, "id": "c1"},
                {"name": "g", "args": {}, "id": "c2"},
            ],
        ),
        ToolMessage("r1", tool_call_id="c1"),
        ToolMessage("r2", tool_call_id="c2"),
        AIMessage("done"),
    ]
    store.add_messages("s", msgs)
    assert [m.content for m in store.load_window("s", limit=3)] == ["done"]
    assert [m.type for m in store.load_window("s", limit=4)] == ["ai", "tool", "tool", "ai"]


def test_isolation_between_users(store: ConversationStore) -> None:
    store.add_messages("shared-id", [HumanMessage("alice's secret")], user_id="alice")
    store.add_messages("shared-id", [HumanMessage("bob's note")], user_id="bob")
    store.add_messages("shared-id", [HumanMessage("anonymous")])
    assert [m.content for m in store.get_messages("shared-id", user_id="alice")] == [
        "alice's secret"
    ]
    assert [m.content for m in store.get_messages("shared-id", user_id="bob")] == ["bob's note"]
    assert [m.content for m in store.get_messages("shared-id")] == ["anonymous"]
    assert [s.session_id for s in store.list_sessions("alice")] == ["shared-id"]
    store.clear("shared-id", user_id="bob")
    assert store.get_messages("shared-id", user_id="alice")
    assert store.delete_session("shared-id", user_id="alice")
    assert store.get_messages("shared-id", user_id="alice") == []
    assert [m.content for m in store.get_messages("shared-id")] == ["anonymous"]


def test_ids_are_exact(store: ConversationStore) -> None:
    """Case and trailing spaces matter on every dialect (MariaDB collations ignore both)."""
    for sid in ["UserA", "usera", "usera ", "ü", "u\u0308"]:
        store.add_messages(sid, [HumanMessage(f"in {sid!r}")], user_id=sid)
    for sid in ["UserA", "usera", "usera ", "ü", "u\u0308"]:
        assert [m.content for m in store.get_messages(sid, user_id=sid)] == [f"in {sid!r}"]


def test_id_types_str_int_uuid(store: ConversationStore) -> None:
    u = uuid.UUID("00000000-0000-0000-0000-000000000042")
    store.add_messages(42, [HumanMessage("int")], user_id=u)
    store.add_messages(u, [HumanMessage("uuid")], user_id=7)
    assert [m.content for m in store.get_messages("42", user_id=str(u))] == ["int"]
    assert [m.content for m in store.get_messages(str(u), user_id="7")] == ["uuid"]
    assert store.list_sessions(u)[0].session_id == "42"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"session_id": ""}, ValueError, "session_id"),
        ({"session_id": "   "}, ValueError, "session_id"),
        ({"session_id": None}, ValueError, "session_id"),
        ({"session_id": 1.5}, TypeError, "session_id"),
        ({"session_id": True}, TypeError, "session_id"),
        ({"session_id": "x" * 256}, ValueError, "session_id"),
        ({"session_id": "a\x00b"}, ValueError, "session_id"),
        ({"session_id": "s", "user_id": ""}, ValueError, "user_id"),
        ({"session_id": "s", "user_id": b"bytes"}, TypeError, "user_id"),
    ],
)
def test_bad_ids(store: ConversationStore, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        store.add_messages(messages=[HumanMessage("x")], **kwargs)
    assert store.list_sessions() == []


def test_bad_arguments(store: ConversationStore) -> None:
    store.add_messages("s", [HumanMessage("x")])
    for bad in (0, -1):
        with pytest.raises(ValueError, match="limit"):
            store.get_messages("s", limit=bad)
    with pytest.raises(TypeError, match="limit"):
        store.get_messages("s", limit="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        store.get_token_window("s", -5)
    with pytest.raises(ValueError, match="days"):
        store.delete_sessions_older_than(-1)
    with pytest.raises(TypeError, match="messages"):
        store.add_messages("s", HumanMessage("not a list"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="table_prefix"):
        ConversationStore(store.db, table_prefix="x; DROP TABLE y")
    with pytest.raises(ValueError, match="max_message_bytes"):
        ConversationStore(store.db, max_message_bytes=0)


def test_sql_looking_strings_are_data(store: ConversationStore) -> None:
    evil = "x' OR '1'='1"
    store.add_messages(evil, [HumanMessage("'); DROP TABLE users; --")], user_id=evil)
    store.add_messages("other", [HumanMessage("other")], user_id="victim")
    assert [m.content for m in store.get_messages(evil, user_id=evil)] == [
        "'); DROP TABLE users; --"
    ]
    assert store.list_sessions(evil)[0].session_id == evil
    assert [s.user_id for s in store.list_sessions("x' OR '1'='1")] == [evil]


def test_session_api(store: ConversationStore) -> None:
    store.add_messages("old", turns(1), user_id="u")
    time.sleep(0.01)
    store.add_messages("new", turns(2), user_id="u")
    store.add_messages("else", turns(1), user_id="v")
    sessions = store.list_sessions("u")
    assert [s.session_id for s in sessions] == ["new", "old"]
    assert sessions[0].message_count == 4 and sessions[1].message_count == 2
    assert sessions[0].updated_at >= sessions[0].created_at > 0
    assert len(store.list_sessions()) == 3
    assert [s.session_id for s in store.list_sessions("u", limit=1, offset=1)] == ["old"]
    assert store.rename_session("old", "Trip to Lyon", user_id="u")
    assert not store.rename_session("nope", "x", user_id="u")
    assert store.get_session("old", user_id="u").title == "Trip to Lyon"  # type: ignore[union-attr]
    assert store.get_session("old", user_id="v") is None
    assert store.delete_session("old", user_id="u")
    assert not store.delete_session("old", user_id="u")
    assert store.count_messages("old", user_id="u") == 0


async def test_session_api_async(store: ConversationStore) -> None:
    await store.aadd_messages("a", turns(1), user_id="u")
    assert await store.arename_session("a", "T", user_id="u")
    assert [s.title for s in await store.alist_sessions("u")] == ["T"]
    assert await store.aclear("a", user_id="u") == 2
    assert await store.acount_messages("a", user_id="u") == 0
    await store.aset_summary("a", '{"text": "s"}', user_id="u")
    assert await store.aget_summary("a", user_id="u") == '{"text": "s"}'
    assert await store.adelete_session("a", user_id="u")


def test_retention(store: ConversationStore) -> None:
    store.add_messages("stale", turns(3), user_id="u")
    store.add_messages("stale2", turns(1), user_id="w")
    store.add_messages("fresh", turns(1), user_id="u")
    day = 86_400_000
    with store.db.sync_engine.begin() as conn:
        s = store.tables.sessions
        conn.execute(
            sa.update(s)
            .where(s.c.session_id.in_(["stale", "stale2"]))
            .values(updated_at=s.c.updated_at - 40 * day)
        )
    assert store.delete_sessions_older_than(30, user_id="w") == 1
    assert store.delete_sessions_older_than(30) == 1
    assert store.delete_sessions_older_than(30) == 0
    assert [s.session_id for s in store.list_sessions()] == ["fresh"]
    with store.db.sync_engine.connect() as conn:
        n = conn.execute(sa.select(sa.func.count()).select_from(store.tables.messages)).scalar()
    assert n == 2  # the stale sessions' messages are gone too


def test_retention_reads_the_package_clock(
    store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add_messages("s", turns(1))
    later = clock.now_us() + 40 * 86_400_000_000
    monkeypatch.setattr(clock, "now_us", lambda: later)
    assert store.delete_sessions_older_than(30) == 1  # 40 days later by the one clock
    assert store.list_sessions() == []


def test_skip_existing_dedupes_by_id(store: ConversationStore) -> None:
    first = [HumanMessage("q", id="1"), AIMessage("a", id="2")]
    assert store.add_messages("s", first, skip_existing=True) == 2
    # a graph sees the whole state again, plus new messages (one without id)
    again = [*first, HumanMessage("q2", id="3"), AIMessage("no id"), HumanMessage("q2", id="3")]
    assert store.add_messages("s", again, skip_existing=True) == 2
    assert [m.content for m in store.get_messages("s")] == ["q", "a", "q2", "no id"]


def test_clear_then_add_restarts_positions(store: ConversationStore) -> None:
    store.add_messages("s", [SystemMessage("x"), HumanMessage("y")])
    assert store.clear("s") == 2
    store.add_messages("s", [HumanMessage("z")])
    assert [m.content for m in store.get_messages("s")] == ["z"]
    assert store.get_session("s").message_count == 1  # type: ignore[union-attr]


def test_an_append_retried_after_its_commit_landed_is_not_written_twice(
    store: ConversationStore,
) -> None:
    """Database.run re-runs a transaction whose connection died; if that happened while COMMIT
    was in flight, the first attempt may have committed. The append's token prevents a second
    copy (tests/engine/test_engine_faults.py hits this on MariaDB by killing connections)."""
    from langmem_sqlite.history import sql
    from langmem_sqlite.history.sql import Append, SessionKey

    store.add_messages("s", [HumanMessage("before")])
    key = SessionKey("", "s")
    # private: the rows of an append, to run its SQL twice as a retry after a landed COMMIT would
    rows = store._rows([HumanMessage("once"), AIMessage("only once")], key)
    append = Append()
    # the first attempt commits, then (as far as the caller knows) fails: Database.run retries
    done = store.db.run(sql.add_messages, store.tables, key, rows, 1, append, write=True)
    assert done == (2, 3)
    again = store.db.run(sql.add_messages, store.tables, key, rows, 2, append, write=True)
    assert again == (2, 3)  # what the attempt that committed wrote
    assert store.get_session("s").message_count == 3  # type: ignore[union-attr]
    assert [m.content for m in store.get_messages("s")] == ["before", "once", "only once"]
    # a different append of the same messages is written again, as asked
    store.db.run(sql.add_messages, store.tables, key, rows, 3, Append(), write=True)
    assert store.count_messages("s") == 5


def _id_column(store: ConversationStore) -> list[tuple[int, str | None]]:
    m = store.tables.messages.c
    with store.db.sync_engine.connect() as conn:
        return [(r[0], r[1]) for r in conn.execute(sa.select(m.seq, m.message_id).order_by(m.seq))]


def test_without_skip_existing_a_repeated_id_is_appended(store: ConversationStore) -> None:
    """``skip_existing=False`` appends every message (langchain-community's behaviour, which
    ``SQLChatMessageHistory`` keeps); the first message stored with an id is the one a later
    ``skip_existing=True`` finds."""
    q = HumanMessage("q", id="1")
    assert store.add_messages("s", [q, AIMessage("a", id="2")]) == 2
    assert store.add_messages("s", [q, HumanMessage("q again", id="1")]) == 2
    got = store.get_messages("s")
    assert [(m.content, m.id) for m in got] == [
        ("q", "1"),
        ("a", "2"),
        ("q", "1"),
        ("q again", "1"),
    ]
    assert _id_column(store) == [(0, "1"), (1, "2"), (2, None), (3, None)]
    assert store.add_messages("s", [q, AIMessage("new", id="3")], skip_existing=True) == 1
    assert [m.content for m in store.get_messages("s")][-1] == "new"
    assert store.count_messages("s") == 5
    # repeated within one call, in a new session: both stored, the first one found
    assert store.add_messages("t", [q, q]) == 2
    assert [(m.content, m.id) for m in store.get_messages("t")] == [("q", "1"), ("q", "1")]
    assert store.add_messages("t", [q], skip_existing=True) == 0


def test_one_id_names_one_row_per_session(store: ConversationStore) -> None:
    """The unique key holds in the database itself, whoever writes; other sessions and users
    may hold the same id."""
    store.add_messages("s", [HumanMessage("q", id="1")])
    store.add_messages("s", [HumanMessage("q", id="1")], user_id="other")
    store.add_messages("t", [HumanMessage("q", id="1")])
    m = store.tables.messages
    with store.db.sync_engine.connect() as conn:
        row = conn.execute(sa.select(m).where(m.c.seq == 0).limit(1)).mappings().one()
    with (
        pytest.raises(sa.exc.IntegrityError, match=r"(?i)unique|duplicate"),
        store.db.sync_engine.begin() as conn,
    ):
        copy = {k: v for k, v in row.items() if k != "id"}
        conn.execute(sa.insert(m).values({**copy, "seq": 1}))


def test_skip_existing_rechecks_under_the_lock(db_url: str, prefix: str) -> None:
    """Ids stored by another writer between the read and the append are left out by the
    append itself: positions, counts and the running token sums stay exact."""
    from langmem_sqlite.history import sql
    from langmem_sqlite.history.sql import Append, SessionKey

    store = ConversationStore(db_url, table_prefix=prefix, token_counter=lambda m: 10)
    key = SessionKey("u", "s")
    # private: the rows of an append, to run its SQL after another writer stored one of them
    rows = store._rows([HumanMessage("x", id="x"), AIMessage("y"), HumanMessage("z", id="z")], key)
    store.add_messages("s", [HumanMessage("x", id="x")], user_id="u")  # the other writer
    run = store.db.run
    done = run(sql.add_messages, store.tables, key, rows, 1, Append(), True, write=True)
    assert done == (2, 3)
    assert [m.content for m in store.get_messages("s", user_id="u")] == ["x", "y", "z"]
    info = store.get_session("s", user_id="u")
    assert info is not None and (info.message_count, info.token_total) == (3, 30)
    assert [m.content for m in store.get_token_window("s", 20, user_id="u")] == ["y", "z"]
    m = store.tables.messages.c
    with store.db.sync_engine.connect() as conn:
        sums = conn.execute(sa.select(m.seq, m.tokens_before).order_by(m.seq)).all()
    assert [tuple(r) for r in sums] == [(0, 0), (1, 10), (2, 20)]


def test_a_retried_skip_existing_append_reports_what_it_wrote(store: ConversationStore) -> None:
    from langmem_sqlite.history import sql
    from langmem_sqlite.history.sql import Append, SessionKey

    key = SessionKey("", "s")
    # private: the rows of an append, to run its SQL twice as a retry after a landed COMMIT would
    rows = store._rows([HumanMessage("a", id="a"), HumanMessage("b", id="b")], key)
    store.add_messages("s", [HumanMessage("a", id="a")])
    append = Append()
    run = store.db.run
    assert run(sql.add_messages, store.tables, key, rows, 1, append, True, write=True) == (
        1,
        2,
    )
    assert run(sql.add_messages, store.tables, key, rows, 2, append, True, write=True) == (
        1,
        2,
    )
    assert [m.content for m in store.get_messages("s")] == ["a", "b"]
    assert store.count_messages("s") == 2


def test_skip_existing_with_a_state_of_70_000_messages(db_url: str, prefix: str) -> None:
    """More ids than one statement binds (PostgreSQL: 65,535; some SQLite builds: 32,766):
    the ids are read in chunks."""
    store = ConversationStore(db_url, table_prefix=prefix, token_counter=lambda m: 1)
    state = [HumanMessage("m", id=f"m{i}") for i in range(70_000)]
    assert store.add_messages("s", state, skip_existing=True) == 70_000
    assert store.add_messages("s", [*state, AIMessage("new", id="n")], skip_existing=True) == 1
    assert store.count_messages("s") == 70_001
