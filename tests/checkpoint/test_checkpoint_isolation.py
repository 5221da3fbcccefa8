"""Isolation and injection in the checkpointer, on SQLite, PostgreSQL and MariaDB.

An injection attempt goes into every public string input of the checkpointer: it is stored and
read back verbatim, and no table, row or other user is touched. User A never reads user B's
threads through any public API, including ids that are LIKE patterns, differ in case or
trailing space.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from support import INJECTIONS, LOOKALIKES, add_canary, assert_intact

from langmem_sqlite import SQLSaver


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


def test_injection_into_every_checkpointer_input(db_url: str, prefix: str) -> None:
    canary = add_canary(db_url, prefix)
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
        assert_intact(saver.db.sync_engine, prefix, canary)
        safe = app.get_state({"configurable": {"thread_id": "safe"}}).values
        assert [m.content for m in safe["messages"]] == ["hi", "re: hi"]


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
