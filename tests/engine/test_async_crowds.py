"""Many async callers at once, on every backend (PgBouncer in transaction mode included): 20
LangGraph threads run concurrently on one saver, with the store and the chat history beside it,
and every thread ends with exactly its own turns."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from langmem_sqlite import ConversationStore, SQLSaver, SQLStore

THREADS = 20
TURNS = 3


async def test_twenty_async_threads_at_once(db_url: str, prefix: str) -> None:
    saver = SQLSaver(db_url, table_prefix=prefix)
    store = SQLStore(db_url, table_prefix=prefix)
    history = ConversationStore(db_url, table_prefix=prefix)

    async def bot(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("bot", bot)
    graph.add_edge(START, "bot")
    app = graph.compile(checkpointer=saver)

    async def conversation(n: int) -> None:
        config = {"configurable": {"thread_id": f"t{n}"}}
        for turn in range(TURNS):
            text = f"{n}.{turn}"
            await app.ainvoke({"messages": [HumanMessage(text)]}, config)
            await store.aput(("users", str(n)), str(turn), {"text": text})
            await history.aadd_messages(f"s{n}", [HumanMessage(text)])

    await asyncio.gather(*(conversation(n) for n in range(THREADS)))

    for n in range(THREADS):
        state = await app.aget_state({"configurable": {"thread_id": f"t{n}"}})
        got = [m.content for m in state.values["messages"]]
        assert got == [x for t in range(TURNS) for x in (f"{n}.{t}", f"echo {n}.{t}")]
        items = await store.asearch(("users", str(n)), limit=10)
        assert sorted(i.value["text"] for i in items) == [f"{n}.{t}" for t in range(TURNS)]
        messages = await history.aget_messages(f"s{n}")
        assert [m.content for m in messages] == [f"{n}.{t}" for t in range(TURNS)]
