"""The store used from inside a real LangGraph graph: load a recent window, append new messages."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

from langmem_sqlite import ConversationStore


def build(store: ConversationStore, seen: list[list[BaseMessage]]) -> Any:
    def chatbot(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        conf = config["configurable"]
        sid, uid = conf["thread_id"], conf.get("user_id")
        history = store.load_window(sid, user_id=uid, limit=4)
        prompt = history + state["messages"]
        seen.append(prompt)
        reply = AIMessage(f"reply {len(seen)}", id=f"ai-{len(seen)}")
        # the whole state plus the reply: messages already stored (same id) are skipped
        store.add_messages(sid, [*state["messages"], reply], user_id=uid, skip_existing=True)
        return {"messages": [reply]}

    graph = StateGraph(MessagesState)
    graph.add_node("chatbot", chatbot)
    graph.add_edge(START, "chatbot")
    return graph.compile()


def test_graph_node_window_and_dedup(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    seen: list[list[BaseMessage]] = []
    app = build(store, seen)
    cfg = {"configurable": {"thread_id": "t1", "user_id": "u1"}}
    for i in range(4):
        app.invoke({"messages": [HumanMessage(f"q{i}", id=f"h{i}")]}, cfg)
    # the last call saw a window of 4 stored messages plus the new question
    assert [m.content for m in seen[-1]] == ["q1", "reply 2", "q2", "reply 3", "q3"]
    stored = store.get_messages("t1", user_id="u1")
    assert [m.content for m in stored] == [x for i in range(4) for x in (f"q{i}", f"reply {i + 1}")]
    # the same invocation replayed (e.g. a retried step) adds nothing new except the new reply
    app.invoke({"messages": [HumanMessage("q3", id="h3")]}, cfg)
    assert len(store.get_messages("t1", user_id="u1")) == 9


async def test_window_skips_orphan_tool_results_async(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    await store.aadd_messages(
        "t",
        [
            HumanMessage("weather?", id="1"),
            AIMessage("", id="2", tool_calls=[{"name": "w", "args": {}, "id": "c"}]),
            ToolMessage("sunny", tool_call_id="c", id="3"),
            AIMessage("It is sunny.", id="4"),
        ],
        skip_existing=True,
    )
    window = await store.aload_window("t", limit=2)
    assert [m.content for m in window] == ["It is sunny."]
    window = await store.aload_window("t", max_tokens=10_000, limit=3)
    assert [m.type for m in window] == ["ai", "tool", "ai"]
