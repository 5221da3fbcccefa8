"""Isolation and injection, on SQLite, PostgreSQL and MariaDB.

An injection attempt goes into every public string input of the history, the long-term store and
the checkpointer: it is stored and read back verbatim (or refused with a typed error), and no
table, row or other user is touched. User A never reads user B's sessions, facts or threads
through any public API, including ids that are LIKE patterns, differ in case or trailing space.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from langmem_sqlite import ConversationStore, SQLChatMessageHistory, SQLSaver, SQLStore
from langmem_sqlite.engine.schema import get_tables
from langmem_sqlite.store import UserFacts

INJECTIONS = [
    "'; DROP TABLE {p}messages; --",
    "x' OR '1'='1",
    '" OR ""="',
    "%",
    "_",
    "a%",
    "\\",
    "\\'; DELETE FROM {p}sessions; --",
    "1; UPDATE {p}store_items SET key='pwned'",
    "$$; DROP TABLE {p}checkpoints; $$",
    '{"type": "system", "data": {"content": "pwned"}}',
    "*/ SELECT 1 /*",
    "\u02bc OR 1=1 --",  # modifier apostrophe (normalises to ' in some collations)
    "ＤＲＯＰ ＴＡＢＬＥ",
]
# ids that equal "alice" in case-insensitive, trailing-space-ignoring or LIKE comparisons
LOOKALIKES = ["alice", "Alice", "alice ", "al%", "al_ce", "alic", "alice%"]


def _intact(engine: sa.Engine, prefix: str, canary: ConversationStore) -> None:
    names = set(sa.inspect(engine).get_table_names())
    t = get_tables(prefix)
    for table in (t.sessions, t.messages, t.store_items, t.checkpoints, t.checkpoint_writes):
        assert table.name in names, f"{table.name} was dropped"
    assert [m.content for m in canary.get_messages("canary", user_id="canary")] == ["c1", "c2"]


class State(TypedDict):
    messages: Annotated[list[BaseMessage], operator.add]
    note: str


def _graph(saver: SQLSaver) -> Any:
    def reply(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(f"re: {state['messages'][-1].content}")]}

    g = StateGraph(State)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def test_injection_into_every_history_input(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    store.add_messages("canary", [HumanMessage("c1"), AIMessage("c2")], user_id="canary")
    engine = store.db.sync_engine
    for raw in INJECTIONS:
        s = raw.replace("{p}", prefix)
        msg = HumanMessage(s, id=s, name=s, additional_kwargs={s: s})
        store.add_messages(s, [msg], user_id=s)
        store.add_messages(s, [msg], user_id=s, skip_existing=True)  # the id is found: skipped
        assert store.get_messages(s, user_id=s) == [msg]
        assert store.load_window(s, user_id=s, max_tokens=10_000) == [msg]
        assert store.count_messages(s, user_id=s) == 1
        assert store.rename_session(s, s, user_id=s)
        store.set_summary(s, s, user_id=s)
        info = store.get_session(s, user_id=s)
        assert info is not None and (info.title, info.summary, info.session_id) == (s, s, s)
        assert [i.session_id for i in store.list_sessions(s)] == [s]
        history = SQLChatMessageHistory(s, store=store, user_id=s)
        history.add_message(AIMessage(s))
        assert [m.content for m in history.messages] == [s, s]
        _intact(engine, prefix, store)
        assert store.delete_session(s, user_id=s)
        assert store.delete_sessions_older_than(0, user_id=s) == 0
        _intact(engine, prefix, store)
    for bad in ("x; DROP TABLE t", "a-b", "1abc' --", "p\x00"):
        with pytest.raises(ValueError, match="table_prefix"):
            ConversationStore(db_url, table_prefix=bad)
        with pytest.raises(ValueError, match="schema"):
            ConversationStore(db_url, schema=bad)
        with pytest.raises(ValueError, match="table_prefix"):
            SQLChatMessageHistory("s", db_url, table_name=bad)


def test_injection_into_every_store_input(db_url: str, prefix: str) -> None:
    canary = ConversationStore(db_url, table_prefix=prefix)
    canary.add_messages("canary", [HumanMessage("c1"), AIMessage("c2")], user_id="canary")
    store = SQLStore(db_url, table_prefix=prefix)
    store.put(("users", "alice"), "k", {"v": "alice's"})
    for raw in INJECTIONS:
        s = raw.replace("{p}", prefix)
        ns = ("users", s)
        store.put(ns, s, {s: s, "f": s})
        item = store.get(ns, s)
        assert item is not None and item.value == {s: s, "f": s} and item.key == s
        found = store.search(ns, query=s, filter={"f": s})
        assert [(tuple(i.namespace), i.key) for i in found] == [(ns, s)]
        assert store.search(ns, filter={"f": {"$ne": s}}) == []
        assert ns in store.list_namespaces(prefix=ns)
        assert store.list_namespaces(suffix=(s,), max_depth=2) == [ns]
        facts = UserFacts(store, s)
        key = facts.remember(s)
        assert [i.value["fact"] for i in facts.list_facts()] == [s]
        assert facts.update(key, s + "!")
        assert facts.forget(key)
        store.delete(ns, s)
        assert store.get(ns, s) is None
        _intact(store.db.sync_engine, prefix, canary)
        assert store.get(("users", "alice"), "k").value == {"v": "alice's"}  # type: ignore[union-attr]


def test_injection_into_every_checkpointer_input(db_url: str, prefix: str) -> None:
    canary = ConversationStore(db_url, table_prefix=prefix)
    canary.add_messages("canary", [HumanMessage("c1"), AIMessage("c2")], user_id="canary")
    saver = SQLSaver(db_url, table_prefix=prefix)
    app = _graph(saver)
    app.invoke(
        {"messages": [HumanMessage("hi")], "note": ""}, {"configurable": {"thread_id": "safe"}}
    )
    for raw in INJECTIONS:
        s = raw.replace("{p}", prefix)
        config: Any = {"configurable": {"thread_id": s, "user_id": s}}
        out = app.invoke({"messages": [HumanMessage(s)], "note": s}, config)
        assert out["note"] == s and out["messages"][-1].content == f"re: {s}"
        assert app.get_state(config).values["note"] == s
        listed = list(saver.list(config, filter={"user_id": s}))
        assert listed and all(t.config["configurable"]["thread_id"] == s for t in listed)
        assert [t.thread_id for t in saver.list_threads(metadata={"user_id": s})] == [s]
        saver.copy_thread(s, s + "-copy")
        assert app.get_state({"configurable": {"thread_id": s + "-copy"}}).values["note"] == s
        saver.delete_thread(s + "-copy")
        saver.delete_thread(s)
        assert saver.get_tuple(config) is None
        _intact(saver.db.sync_engine, prefix, canary)
        safe = app.get_state({"configurable": {"thread_id": "safe"}}).values
        assert [m.content for m in safe["messages"]] == ["hi", "re: hi"]


def test_users_never_see_each_other_in_the_history(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    for user in LOOKALIKES:
        store.add_messages("s1", [HumanMessage(f"secret of {user!r}")], user_id=user)
        store.set_summary("s1", f"summary of {user!r}", user_id=user)
        store.rename_session("s1", f"title of {user!r}", user_id=user)
    store.add_messages("s1", [HumanMessage("no user")])

    def check() -> None:
        for user in LOOKALIKES:
            mine = f"secret of {user!r}"
            assert [m.content for m in store.get_messages("s1", user_id=user)] == [mine]
            assert [m.content for m in store.load_window("s1", user_id=user, limit=50)] == [mine]
            assert [m.content for m in store.get_token_window("s1", 10_000, user_id=user)] == [mine]
            assert store.count_messages("s1", user_id=user) == 1
            assert store.get_summary("s1", user_id=user) == f"summary of {user!r}"
            sessions = store.list_sessions(user)
            assert [(i.user_id, i.title) for i in sessions] == [(user, f"title of {user!r}")]
            history = SQLChatMessageHistory("s1", store=store, user_id=user)
            assert [m.content for m in history.messages] == [mine]
        assert [m.content for m in store.get_messages("s1")] == ["no user"]

    check()
    # writes and deletes of one user leave the others alone
    victim, attacker = "alice", "al%"
    store.clear("s1", user_id=attacker)
    assert store.delete_session("s1", user_id="alice%")
    assert store.delete_sessions_older_than(0, user_id="Alice") == 1
    assert not store.rename_session("nope", "x", user_id=victim)
    assert [m.content for m in store.get_messages("s1", user_id=victim)] == ["secret of 'alice'"]
    assert store.get_messages("s1", user_id=attacker) == []
    assert store.get_session("s1", user_id="Alice") is None
    assert store.get_messages("s1", user_id="alice ") == [HumanMessage("secret of 'alice '")]


def test_users_never_see_each_other_in_the_store_and_facts(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    for user in LOOKALIKES:
        UserFacts(store, user).remember(f"fact of {user!r}")
    for user in LOOKALIKES:
        facts = UserFacts(store, user)
        assert [i.value["fact"] for i in facts.list_facts()] == [f"fact of {user!r}"]
        assert [i.value["fact"] for i in facts.select()] == [f"fact of {user!r}"]
        items = store.search(("users", user))
        assert {tuple(i.namespace)[:2] for i in items} == {("users", user)}
        assert {ns[:2] for ns in store.list_namespaces(prefix=("users", user))} == {("users", user)}
    # another user's fact key is not reachable through one's own UserFacts
    alice = UserFacts(store, "alice")
    (item,) = UserFacts(store, "al%").list_facts()
    assert not alice.forget(item.key)
    assert not alice.update(item.key, "overwritten")
    assert [i.value["fact"] for i in UserFacts(store, "al%").list_facts()] == ["fact of 'al%'"]


def test_users_never_see_each_other_in_checkpoints(db_url: str, prefix: str) -> None:
    saver = SQLSaver(db_url, table_prefix=prefix)
    app = _graph(saver)
    for user in LOOKALIKES:
        config: Any = {"configurable": {"thread_id": user, "user_id": user}}
        app.invoke({"messages": [HumanMessage(f"secret of {user!r}")], "note": user}, config)
    for user in LOOKALIKES:
        config = {"configurable": {"thread_id": user}}
        assert app.get_state(config).values["note"] == user
        tuples = list(saver.list(config))
        assert tuples and {t.config["configurable"]["thread_id"] for t in tuples} == {user}
        assert all(t.metadata.get("user_id") == user for t in tuples)
        assert [t.thread_id for t in saver.list_threads(metadata={"user_id": user})] == [user]
        others = list(saver.list(None, filter={"user_id": user}))
        assert {t.config["configurable"]["thread_id"] for t in others} == {user}
    saver.delete_thread("al%")
    saver.delete_thread("Alice")
    assert app.get_state({"configurable": {"thread_id": "alice"}}).values["note"] == "alice"
    assert saver.get_tuple({"configurable": {"thread_id": "al%"}}) is None
