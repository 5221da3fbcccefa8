"""A write whose COMMIT landed just before the connection dropped is re-run by the retry rule:
it must not be applied twice. Here every unit of work that writes commits, then "loses" its
connection once before the caller hears back, so that each write is retried after it was
stored; what the public APIs read back must be what one application of each write stores."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, MessagesState, StateGraph

from langmem_sqlite import ConversationStore, SQLSaver, SQLStore
from langmem_sqlite.engine.database import Database, Step


class _Dropped(Exception):
    """Stands for the driver's error of a connection that died after the COMMIT."""


@pytest.fixture
def drops_after_commit(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every writing unit of work commits, then fails once as if the connection dropped before
    its result arrived (a lost connection, which the retry rule re-runs)."""
    original = Database._once
    seen: dict[int, Step] = {}  # holds each step, so that its id is never reused
    retried: list[str] = []

    # private: the one place where a unit of work has committed and its result not yet returned
    def once(self: Database, step: Step, attempts: Any) -> Any:
        result = original(self, step, attempts)
        if step.write and id(step) not in seen:
            seen[id(step)] = step
            retried.append(getattr(step.fn, "__name__", repr(step.fn)))
            raise sa.exc.OperationalError(
                "COMMIT", None, _Dropped("connection lost"), connection_invalidated=True
            )
        return result

    monkeypatch.setattr(Database, "_once", once)
    yield retried


def test_every_write_survives_being_run_twice(
    db_url: str, prefix: str, drops_after_commit: list[str]
) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    facts = SQLStore(db_url, table_prefix=prefix)
    saver = SQLSaver(db_url, table_prefix=prefix)

    store.add_messages("s", [HumanMessage("one"), AIMessage("two")])
    store.add_messages("s", [HumanMessage("three")])
    assert [m.content for m in store.get_messages("s")] == ["one", "two", "three"]

    facts.put(("ns",), "k", {"v": 1})
    facts.put(("ns",), "k", {"v": 2})
    facts.put(("ns",), "gone", {"v": 0})
    facts.delete(("ns",), "gone")
    assert facts.get(("ns",), "k").value == {"v": 2}  # type: ignore[union-attr]
    assert [i.key for i in facts.search(("ns",))] == ["k"]

    def bot(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("bot", bot)
    graph.add_edge(START, "bot")
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    for text in ("a", "b"):
        app.invoke({"messages": [HumanMessage(text)]}, config)
    got = [m.content for m in app.get_state(config).values["messages"]]
    assert got == ["a", "echo a", "b", "echo b"]
    history = list(app.get_state_history(config))
    assert len(history) == len({s.config["configurable"]["checkpoint_id"] for s in history})

    ckpt = empty_checkpoint()
    version = saver.get_next_version(None, None)
    ckpt["channel_values"] = {"x": 1}
    ckpt["channel_versions"] = {"x": version}
    cfg = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
    stored = saver.put(cfg, ckpt, {"step": 1}, {"x": version})
    saver.put_writes(stored, [("x", 1), ("y", 2)], "task-1")
    saver.put_writes(stored, [("x", 3)], "task-2")
    pending = saver.get_tuple(stored).pending_writes  # type: ignore[union-attr]
    assert sorted(pending) == [("task-1", "x", 1), ("task-1", "y", 2), ("task-2", "x", 3)]

    assert len(drops_after_commit) >= 10, drops_after_commit  # the writes were retried
