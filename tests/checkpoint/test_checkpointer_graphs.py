"""SQLSaver under real compiled LangGraph graphs, on SQLite, PostgreSQL and MariaDB.

Each scenario is also run with ``InMemorySaver`` (LangGraph's reference saver) where the
outcome must match it.
"""

from __future__ import annotations

import operator
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint, writes_sort_key
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from langgraph.types import Command, interrupt
from support import graph_cfg
from typing_extensions import TypedDict

from langmem_sqlite import SQLSaver


def chat_graph(checkpointer: BaseCheckpointSaver) -> Any:
    def chat(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"answer {n} " + "x" * 200, id=f"ai-{n}")]}

    g = StateGraph(MessagesState)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    return g.compile(checkpointer=checkpointer)


def texts(messages: list[Any]) -> list[str]:
    return [m.content for m in messages]


# -- sync and async on one object -----------------------------------------------------------


async def test_one_saver_serves_sync_and_async_graphs(saver: SQLSaver) -> None:
    graph = chat_graph(saver)
    c = graph_cfg("both")
    graph.invoke({"messages": [HumanMessage("q1", id="h1")]}, c)
    await graph.ainvoke({"messages": [HumanMessage("q2", id="h2")]}, c)
    graph.invoke({"messages": [HumanMessage("q3", id="h3")]}, c)
    async for _ in graph.astream({"messages": [HumanMessage("q4", id="h4")]}, c):
        pass
    state = graph.get_state(c)
    assert texts(state.values["messages"])[::2] == ["q1", "q2", "q3", "q4"]
    assert len(state.values["messages"]) == 8
    assert (await graph.aget_state(c)).values == state.values
    # Both paths read the same rows.
    assert [t.config for t in saver.list(c)] == [t.config async for t in saver.alist(c)]


# -- pending writes ---------------------------------------------------------------------------


def test_pending_writes_come_back_in_writes_sort_key_order(saver: SQLSaver) -> None:
    c = saver.put(graph_cfg("order", checkpoint_ns=""), empty_checkpoint(), {}, {})
    calls = [
        ("t-b", "~__pregel_pull, b", [("ch", "b0"), ("ch", "b1")]),
        ("t-a", "~__pregel_pull, a", [("ch", "a0")]),
        ("t-z", "", [("ch", "input")]),
        ("t-c", "~__pregel_push, 0", [("ch", "c0")]),
        ("t-a2", "~__pregel_pull, a", [("ch", "a2")]),
    ]
    for task_id, path, writes in calls:
        saver.put_writes(c, writes, task_id, path)
    pending = saver.get_tuple(c).pending_writes
    expected = sorted(
        ((path, task_id, i, v) for task_id, path, ws in calls for i, (_, v) in enumerate(ws)),
        key=lambda w: writes_sort_key(w[0], w[1], w[2]),
    )
    assert [w[2] for w in pending] == [e[3] for e in expected]
    assert pending[0][2] == "input"  # writes without task_path sort first


def fanout_graph(checkpointer: BaseCheckpointSaver, fail: dict[str, bool]) -> Any:
    class S(TypedDict):
        log: Annotated[list, operator.add]

    def node(name: str) -> Callable[[S], dict[str, Any]]:
        def run(state: S) -> dict[str, Any]:
            if fail.get(name):
                time.sleep(0.3)  # let the other tasks finish (else LangGraph cancels them)
                raise RuntimeError(f"{name} failed")
            return {"log": [f"{name}{len(state['log'])}"]}

        return run

    g = StateGraph(S)
    for name in ("a", "b", "c", "d"):
        g.add_node(name, node(name))
        g.add_edge(START, name)
    return g.compile(checkpointer=checkpointer)


def test_failed_superstep_keeps_pending_writes_like_inmemory(saver: SQLSaver) -> None:
    results = []
    for cp in (saver, InMemorySaver()):
        fail = {"c": True}
        graph = fanout_graph(cp, fail)
        c = graph_cfg("fanout")
        with pytest.raises(RuntimeError):
            graph.invoke({"log": []}, c)
        pending = cp.get_tuple(c).pending_writes
        fail["c"] = False
        final = graph.invoke(None, c)
        results.append(([(ch, v) for _, ch, v in pending], final["log"]))
    ours, reference = results
    assert ours == reference
    assert sorted(ours[1]) == ["a0", "b0", "c0", "d0"]


def test_parallel_put_writes_from_threads(saver: SQLSaver) -> None:
    c = saver.put(graph_cfg("par", checkpoint_ns=""), empty_checkpoint(), {}, {})

    def work(i: int) -> None:
        saver.put_writes(c, [("ch", f"v{i}"), ("other", i)], f"task-{i:03d}", f"p{i:03d}")
        saver.put_writes(c, [("ch", "late")], f"task-{i:03d}", f"p{i:03d}")  # first wins
        saver.put_writes(c, [("__error__", f"e{i}")], "errors", "")  # special: last wins

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(64)))
    pending = saver.get_tuple(c).pending_writes
    normal = [(t, ch, v) for t, ch, v in pending if t != "errors"]
    assert len(normal) == 128
    assert [v for t, ch, v in normal if ch == "ch"] == [f"v{i}" for i in range(64)]
    errors = [v for t, ch, v in pending if t == "errors"]
    assert len(errors) == 1 and errors[0].startswith("e")


def test_list_holds_nothing_while_yielding(saver: SQLSaver) -> None:
    graph = chat_graph(saver)
    c = graph_cfg("nested")
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(f"q{i}")]}, c)
    seen = 0
    for tup in SQLSaver(saver.db, table_prefix=saver.tables.prefix, page_size=2).list(c):
        # Reads and writes from inside the loop: SqliteSaver deadlocks here.
        assert saver.get_tuple(tup.config) is not None
        saver.put_writes(tup.config, [("probe", seen)], f"probe-{seen}")
        seen += 1
    assert seen == 9


# -- interrupts, time travel, subgraphs, durability ----------------------------------------------


def approval_graph(checkpointer: BaseCheckpointSaver) -> Any:
    class S(TypedDict):
        steps: Annotated[list, operator.add]

    def draft(state: S) -> dict[str, Any]:
        return {"steps": ["draft"]}

    def review(state: S) -> dict[str, Any]:
        answer = interrupt({"question": "approve?", "seen": list(state["steps"])})
        return {"steps": [f"review:{answer}"]}

    g = StateGraph(S)
    g.add_node("draft", draft)
    g.add_node("review", review)
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    return g.compile(checkpointer=checkpointer)


async def test_interrupt_and_resume_sync_and_async(saver: SQLSaver) -> None:
    graph = approval_graph(saver)
    out = graph.invoke({"steps": []}, graph_cfg("i1"))
    assert out["__interrupt__"][0].value == {"question": "approve?", "seen": ["draft"]}
    assert graph.get_state(graph_cfg("i1")).next == ("review",)
    assert graph.invoke(Command(resume="yes"), graph_cfg("i1"))["steps"] == ["draft", "review:yes"]

    if sys.version_info < (3, 11):
        pytest.skip("LangGraph's interrupt() in an async run needs Python 3.11 (the sync half ran)")
    out = await graph.ainvoke({"steps": []}, graph_cfg("i2"))
    assert "__interrupt__" in out
    final = await graph.ainvoke(Command(resume="no"), graph_cfg("i2"))
    assert final["steps"] == ["draft", "review:no"]
    assert graph.get_state(graph_cfg("i2")).next == ()


def test_time_travel_forks_match_inmemory(saver: SQLSaver) -> None:
    outcomes = []
    for cp in (saver, InMemorySaver()):
        graph = chat_graph(cp)
        c = graph_cfg("tt")
        for i in range(3):
            graph.invoke({"messages": [HumanMessage(f"q{i}", id=f"h{i}")]}, c)
        history = list(graph.get_state_history(c))
        after_first = next(
            s for s in history if len(s.values.get("messages", [])) == 2 and not s.next
        )
        fork = graph.update_state(
            after_first.config, {"messages": [HumanMessage("edited", id="fork")]}
        )
        graph.invoke({"messages": [HumanMessage("q-fork", id="hf")]}, fork)
        latest = texts(graph.get_state(c).values["messages"])
        old_branch = texts(graph.get_state(history[0].config).values["messages"])
        # Replaying from an old checkpoint re-runs the node on that branch.
        replay = graph.invoke(None, history[-3].config)
        outcomes.append((latest, old_branch, texts(replay["messages"]), len(history)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][:3] == ["q0", "answer 1 " + "x" * 200, "edited"]
    assert len(outcomes[0][1]) == 6


def test_subgraph_checkpoints_in_their_namespace(saver: SQLSaver) -> None:
    class S(TypedDict):
        value: Annotated[list, operator.add]

    def ask(state: S) -> dict[str, Any]:
        return {"value": [f"sub:{interrupt('name?')}"]}

    sub = StateGraph(S)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")

    parent = StateGraph(S)
    parent.add_node("pre", lambda s: {"value": ["pre"]})
    parent.add_node("child", sub.compile())
    parent.add_edge(START, "pre")
    parent.add_edge("pre", "child")
    graph = parent.compile(checkpointer=saver)

    c = graph_cfg("sub")
    assert "__interrupt__" in graph.invoke({"value": []}, c)
    state = graph.get_state(c, subgraphs=True)
    child_state = state.tasks[0].state
    assert child_state.values == {"value": ["pre"]}
    ns = child_state.config["configurable"]["checkpoint_ns"]
    assert ns.startswith("child:")
    sub_rows = list(saver.list(graph_cfg("sub", checkpoint_ns=ns)))
    assert sub_rows and all(t.config["configurable"]["checkpoint_ns"] == ns for t in sub_rows)
    all_rows = list(saver.list(graph_cfg("sub")))
    assert len(all_rows) > len(list(saver.list(graph_cfg("sub", checkpoint_ns=""))))
    assert graph.invoke(Command(resume="ada"), c)["value"] == ["pre", "pre", "sub:ada"]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_durability_modes(saver: SQLSaver, durability: str) -> None:
    graph = chat_graph(saver)
    c = graph_cfg(f"dur-{durability}")
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(f"q{i}")]}, c, durability=durability)
    messages = graph.get_state(c).values["messages"]
    assert texts(messages)[::2] == ["q0", "q1", "q2"]
    count = len(list(saver.list(c)))
    assert count == (3 if durability == "exit" else 9)


# -- DeltaChannel ---------------------------------------------------------------------------


class DeltaState(TypedDict):
    messages: Annotated[list, DeltaChannel(_messages_delta_reducer, snapshot_frequency=3)]


def delta_graph(checkpointer: BaseCheckpointSaver) -> Any:
    def chat(state: DeltaState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"a{n}", id=f"a{n}")]}

    g = StateGraph(DeltaState)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    return g.compile(checkpointer=checkpointer)


def run_forked_delta_thread(cp: BaseCheckpointSaver, thread: str) -> Any:
    graph = delta_graph(cp)
    c = graph_cfg(thread)
    for i in range(5):
        graph.invoke({"messages": [HumanMessage(f"q{i}", id=f"q{i}")]}, c)
    history = list(graph.get_state_history(c))
    old = next(s for s in history if len(s.values["messages"]) == 4 and not s.next)
    fork = graph.update_state(old.config, {"messages": [HumanMessage("f", id="f")]})
    graph.invoke({"messages": [HumanMessage("fq0", id="fq0")]}, fork)
    graph.invoke({"messages": [HumanMessage("fq1", id="fq1")]}, c)
    return graph


def _history_view(cp: BaseCheckpointSaver, config: dict[str, Any]) -> Any:
    h = cp.get_delta_channel_history(config=config, channels=["messages"])["messages"]
    seed = h.get("seed")
    seed = [m.content for m in seed.value] if seed is not None else None
    return seed, [
        (ch, [m.content for m in v] if isinstance(v, list) else v) for _, ch, v in h["writes"]
    ]


async def test_delta_channel_history_sync_equals_async(saver: SQLSaver) -> None:
    graph = run_forked_delta_thread(saver, "delta-async")
    for state in list(graph.get_state_history(graph_cfg("delta-async")))[:8]:
        sync = saver.get_delta_channel_history(config=state.config, channels=["messages", "x"])
        asy = await saver.aget_delta_channel_history(
            config=state.config, channels=["messages", "x"]
        )
        assert sync == asy
        assert sync["x"] == {"writes": []}  # a channel the graph does not have


def test_delta_channel_history_equals_inmemory_on_forked_thread(saver: SQLSaver) -> None:
    views = []
    for cp in (saver, InMemorySaver()):
        graph = run_forked_delta_thread(cp, "delta")
        history = list(graph.get_state_history(graph_cfg("delta")))
        views.append(
            [(texts(s.values.get("messages", [])), _history_view(cp, s.config)) for s in history]
        )
    assert len(views[0]) == len(views[1]) > 20
    assert views[0] == views[1]
    # The latest state followed the fork only.
    assert views[0][0][0][:5] == ["q0", "a1", "q1", "a3", "f"]


def test_prune_copy_delete_keep_delta_threads_rebuildable(saver: SQLSaver) -> None:
    graph = run_forked_delta_thread(saver, "d-src")
    expected = texts(graph.get_state(graph_cfg("d-src")).values["messages"])

    saver.copy_thread("d-src", "d-copy")
    assert texts(graph.get_state(graph_cfg("d-copy")).values["messages"]) == expected
    assert len(list(saver.list(graph_cfg("d-copy")))) == len(list(saver.list(graph_cfg("d-src"))))

    before = len(list(saver.list(graph_cfg("d-src"))))
    saver.prune(["d-src"], strategy="keep_latest")
    kept = list(saver.list(graph_cfg("d-src")))
    assert 1 < len(kept) < before  # the chain back to the snapshot, not the whole thread
    assert texts(graph.get_state(graph_cfg("d-src")).values["messages"]) == expected
    graph.invoke({"messages": [HumanMessage("after prune", id="ap")]}, graph_cfg("d-src"))
    after = texts(graph.get_state(graph_cfg("d-src")).values["messages"])
    assert after[: len(expected)] == expected and after[-2] == "after prune"

    # delete_for_runs: drop the last run of the copy; the thread falls back to the run before.
    run_ids = []
    for i in range(2):
        rid = str(uuid.uuid4())
        run_ids.append(rid)
        graph.invoke(
            {"messages": [HumanMessage(f"r{i}", id=f"r{i}")]}, graph_cfg("d-copy", run_id=rid)
        )
    state_after_first = texts(graph.get_state(graph_cfg("d-copy")).values["messages"])[:-2]
    saver.delete_for_runs([run_ids[1]])
    assert texts(graph.get_state(graph_cfg("d-copy")).values["messages"]) == state_after_first
    assert all(t.metadata.get("run_id") != run_ids[1] for t in saver.list(graph_cfg("d-copy")))

    saver.delete_thread("d-copy")
    assert saver.get_tuple(graph_cfg("d-copy")) is None
    assert list(saver.list(graph_cfg("d-copy"))) == []


def test_concurrent_threads_on_one_saver(saver: SQLSaver) -> None:
    graph = chat_graph(saver)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            for j in range(3):
                graph.invoke({"messages": [HumanMessage(f"t{i}q{j}")]}, graph_cfg(f"conc-{i}"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(6):
        assert len(graph.get_state(graph_cfg(f"conc-{i}")).values["messages"]) == 6
