"""SQLSaver on an in-memory SQLite database, under a real graph (background writes included)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from langmem_sqlite import SQLSaver


def test_in_memory_saver_with_a_graph() -> None:
    def reply(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(f"seen {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    app = builder.compile(checkpointer=SQLSaver(":memory:", table_prefix="memtest_"))
    cfg = {"configurable": {"thread_id": "t"}}
    for i in range(5):
        out = app.invoke({"messages": [HumanMessage(f"q{i}")]}, cfg)
    assert out["messages"][-1].content == "seen 9"
    assert len(app.get_state(cfg).values["messages"]) == 10
