"""Concurrency beyond tests/history/test_history_concurrency.py: 8 processes, each with threads,
writing histories AND LangGraph checkpoints to one SQLite file; 100 concurrent async sessions
(history, checkpointer and long-term store) on each of SQLite, PostgreSQL and MariaDB.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import operator
import sqlite3
import threading
import traceback
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from support import HARDENING_FULL

from langmem_sqlite import ConversationStore, SQLSaver, SQLStore

PROCESSES = 8
THREADS = 4 if HARDENING_FULL else 2
TURNS = 40 if HARDENING_FULL else 8
SESSIONS = 100


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    steps: int


def _step(state: State) -> dict[str, Any]:
    return {"items": [f"done:{state['items'][-1]}"], "steps": state.get("steps", 0) + 1}


def _graph(saver: SQLSaver) -> Any:
    graph = StateGraph(State)
    graph.add_node("step", _step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=saver)


def _thread_work(url: str, worker: str, errors: list[str]) -> None:
    try:
        store = ConversationStore(url)
        app = _graph(SQLSaver(url))
        for i in range(TURNS):
            shared = f"shared{i % 3}"  # sessions every writer appends to
            store.add_messages(
                shared, [HumanMessage(f"{worker}:{i}:q"), AIMessage(f"{worker}:{i}:a")]
            )
            store.add_messages(worker, [HumanMessage(f"{i}")])  # one session per writer
            app.invoke({"items": [f"{i}"]}, {"configurable": {"thread_id": worker}})
            store.get_messages(shared, limit=4)
    except Exception:
        errors.append(traceback.format_exc())


def _process_work(url: str, proc: int, queue: Any) -> None:
    errors: list[str] = []
    threads = [
        threading.Thread(target=_thread_work, args=(url, f"p{proc}t{t}", errors))
        for t in range(THREADS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(errors)


@pytest.mark.timeout(600)
def test_eight_processes_with_threads_write_histories_and_checkpoints(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    # a new file: the 8 processes also race to create the schema
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_process_work, args=(url, p, queue)) for p in range(PROCESSES)]
    for p in procs:
        p.start()
    errors = [e for _ in procs for e in queue.get(timeout=550)]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert not errors, errors[0]  # e.g. no "database is locked" reached a caller
    workers = [f"p{p}t{t}" for p in range(PROCESSES) for t in range(THREADS)]
    store = ConversationStore(url)
    seen: Counter[str] = Counter()
    for s in range(3):
        contents = [str(m.content) for m in store.get_messages(f"shared{s}")]
        for q, a in zip(contents[::2], contents[1::2], strict=True):
            assert q.endswith(":q") and a == q[:-1] + "a", "a turn was split"
        seen.update(contents)
    expected = {f"{w}:{i}:{k}" for w in workers for i in range(TURNS) for k in "qa"}
    assert set(seen) == expected and all(n == 1 for n in seen.values())
    app = _graph(SQLSaver(url))
    for w in workers:
        assert [m.content for m in store.get_messages(w)] == [str(i) for i in range(TURNS)]
        state = app.get_state({"configurable": {"thread_id": w}}).values
        assert state["steps"] == TURNS
        assert state["items"] == [x for i in range(TURNS) for x in (f"{i}", f"done:{i}")]
        history = list(app.get_state_history({"configurable": {"thread_id": w}}))
        assert len(history) == 3 * TURNS  # per invoke: input, loop start, step
    with sqlite3.connect(tmp_path / "shared.db") as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


async def _session(store: ConversationStore, app: Any, facts: SQLStore, i: int) -> None:
    sid = f"s{i}"
    for turn in range(3):
        await store.aadd_messages(sid, [HumanMessage(f"{i}:{turn}")], user_id=f"u{i}")
        await app.ainvoke({"items": [f"{turn}"]}, {"configurable": {"thread_id": sid}})
        await facts.aput(("users", f"u{i}"), f"k{turn}", {"turn": turn})
        got = await store.aget_messages(sid, user_id=f"u{i}")
        assert [m.content for m in got] == [f"{i}:{t}" for t in range(turn + 1)]


async def _hundred_sessions(db_url: str, prefix: str, *, warm: bool) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    saver = SQLSaver(db_url, table_prefix=prefix)
    facts = SQLStore(db_url, table_prefix=prefix)
    app = _graph(saver)
    if warm:  # each component's first-use setup done before the crowd arrives
        await store.acount_messages("warmup")
        await saver.aget_tuple({"configurable": {"thread_id": "warmup"}})
        await facts.aget(("warmup",), "k")
    await asyncio.gather(*(_session(store, app, facts, i) for i in range(SESSIONS)))
    for i in range(SESSIONS):
        assert await store.acount_messages(f"s{i}", user_id=f"u{i}") == 3
        state = await app.aget_state({"configurable": {"thread_id": f"s{i}"}})
        assert state.values["steps"] == 3
        items = await facts.asearch(("users", f"u{i}"))
        assert sorted(it.key for it in items) == ["k0", "k1", "k2"]
    assert len(await store.alist_sessions()) == SESSIONS


@pytest.mark.timeout(300)
async def test_hundred_concurrent_async_sessions(db_url: str, prefix: str) -> None:
    await _hundred_sessions(db_url, prefix, warm=True)


# The saver's first use of a new SQLite file switches it to incremental auto-vacuum; that step
# once ran a sync VACUUM on the event loop and stalled every async writer for the busy timeout.
@pytest.mark.timeout(300)
async def test_hundred_async_sessions_on_a_cold_sqlite_file(tmp_path: Path) -> None:
    await _hundred_sessions(f"sqlite:///{tmp_path}/cold.db", "cold_", warm=False)
