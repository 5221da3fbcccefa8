"""Isolation and injection in the chat history, on SQLite, PostgreSQL and MariaDB.

An injection attempt goes into every public string input of the history: it is stored and read
back verbatim (or refused with a typed error), and no table, row or other user is touched. User
A never reads user B's sessions through any public API, including ids that are LIKE patterns,
differ in case or trailing space.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from support import INJECTIONS, LOOKALIKES, assert_intact

from langmem_sqlite import ConversationStore, SQLChatMessageHistory


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
        assert_intact(engine, prefix, store)
        assert store.delete_session(s, user_id=s)
        assert store.delete_sessions_older_than(0, user_id=s) == 0
        assert_intact(engine, prefix, store)
    for bad in ("x; DROP TABLE t", "a-b", "1abc' --", "p\x00"):
        with pytest.raises(ValueError, match="table_prefix"):
            ConversationStore(db_url, table_prefix=bad)
        with pytest.raises(ValueError, match="schema"):
            ConversationStore(db_url, schema=bad)
        with pytest.raises(ValueError, match="table_prefix"):
            SQLChatMessageHistory("s", db_url, table_name=bad)


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
