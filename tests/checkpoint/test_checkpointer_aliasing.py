"""What SQLSaver hands out is the caller's own, as with LangGraph's serializing savers.

Nothing ``get_tuple``, ``list``, ``get_state``, ``get_state_history`` (or their async twins)
return shares a mutable object with what is stored, with what ``put`` was given, or with what
another call (or another item of the same call) returned; ``put`` and ``put_writes`` keep no
reference to the caller's objects; the saver's cache holds immutable data only. On SQLite,
PostgreSQL and MariaDB, with and without ``EncryptedSerializer``.
"""

from __future__ import annotations

import copy
import gc
import weakref
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import START, MessagesState, StateGraph
from support import graph_cfg

from langmem_sqlite import SQLSaver
from langmem_sqlite.checkpoint.storage import ListState


@pytest.fixture(params=["plain", "encrypted"])
def serde(request: pytest.FixtureRequest) -> Any:
    if request.param == "plain":
        return None
    return EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")


@pytest.fixture
def saver(db_url: str, prefix: str, serde: Any) -> Iterator[SQLSaver]:
    yield SQLSaver(db_url, table_prefix=prefix, serde=serde)


def proto() -> AIMessage:
    return AIMessage(
        "", id="ai1", tool_calls=[{"name": "search", "args": {"query": "query"}, "id": "c1"}]
    )


def tool_graph(checkpointer: BaseCheckpointSaver, message: AIMessage) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("bot", lambda s: {"messages": [message]})
    g.add_edge(START, "bot")
    return g.compile(checkpointer=checkpointer)


def args_of(values: dict[str, Any]) -> list[Any]:
    return [m.tool_calls[0]["args"] for m in values.get("messages", []) if m.type == "ai"]


MUTATED = "__mutated__"


def mutate(obj: Any, seen: set[int] | None = None) -> None:
    """Change every mutable object reachable from ``obj`` in place (messages, their dicts and
    lists, metadata, configs, pending writes)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, dict):
        for v in list(obj.values()):
            mutate(v, seen)
        obj[MUTATED] = 1
    elif isinstance(obj, list):
        for v in list(obj):
            mutate(v, seen)
        obj.append(MUTATED)
    elif isinstance(obj, tuple):
        for v in obj:
            mutate(v, seen)
    elif isinstance(obj, BaseMessage):
        for v in list(vars(obj).values()):
            mutate(v, seen)
        obj.content = MUTATED
        obj.id = MUTATED
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for v in list(vars(obj).values()):
            mutate(v, seen)


# -- the reproduction of the issue -------------------------------------------------------------


def test_edit_of_get_state_changes_neither_node_nor_stored_state(saver: SQLSaver) -> None:
    message = proto()
    app = tool_graph(saver, message)
    c1 = graph_cfg("1")
    app.invoke({"messages": [HumanMessage("hi")]}, c1)
    app.get_state(c1).values["messages"][-1].tool_calls[0]["args"]["query"] = "edited"
    assert message.tool_calls[0]["args"]["query"] == "query"  # the node's own object
    assert app.get_state(c1).values["messages"][-1].tool_calls[0]["args"] == {"query": "query"}
    for state in app.get_state_history(c1):  # time travel: no checkpoint shows the edit
        assert all(a == {"query": "query"} for a in args_of(state.values))
    app.invoke({"messages": [HumanMessage("hi")]}, graph_cfg("2"))  # nor does another thread
    assert args_of(app.get_state(graph_cfg("2")).values) == [{"query": "query"}]


async def test_edit_of_aget_state_changes_neither_node_nor_stored_state(saver: SQLSaver) -> None:
    message = proto()
    app = tool_graph(saver, message)
    c1 = graph_cfg("1")
    await app.ainvoke({"messages": [HumanMessage("hi")]}, c1)
    (await app.aget_state(c1)).values["messages"][-1].tool_calls[0]["args"]["query"] = "edited"
    assert message.tool_calls[0]["args"]["query"] == "query"
    assert args_of((await app.aget_state(c1)).values) == [{"query": "query"}]
    async for state in app.aget_state_history(c1):
        assert all(a == {"query": "query"} for a in args_of(state.values))


def test_human_in_the_loop_edit_matches_inmemory(saver: SQLSaver) -> None:
    """LangGraph's documented pattern: read the state, edit the AI message, update_state. The
    edit shows in the new checkpoint only, as with InMemorySaver."""
    views = []
    for cp in (saver, InMemorySaver()):
        app = tool_graph(cp, proto())
        c = graph_cfg("hitl")
        app.invoke({"messages": [HumanMessage("hi", id="h1")]}, c)
        edited = app.get_state(c).values["messages"][-1]
        edited.tool_calls[0]["args"]["query"] = "edited"
        app.update_state(c, {"messages": [edited]})
        app.invoke({"messages": [HumanMessage("again", id="h2")]}, c)
        views.append([args_of(s.values) for s in app.get_state_history(c)])
    assert views[0] == views[1]
    # newest first: the bot's next message replaced the edited one (same id); the update's
    # checkpoint and the two after it show the edit, the checkpoints before it do not
    assert views[0] == [[{"query": "query"}]] + [[{"query": "edited"}]] * 3 + [
        [{"query": "query"}],
        [],
        [],
    ]


# -- every kind of returned value, every read ----------------------------------------------------


def rich_checkpoint(saver: SQLSaver, n: int, version: str | None) -> tuple[Any, Any, Any]:
    """A checkpoint of ``n`` messages (tool calls, nested kwargs), a dict and a list of dicts."""
    ckpt = empty_checkpoint()
    messages: list[Any] = []
    for i in range(n):
        messages.append(HumanMessage(f"question {i}", id=f"h{i}", additional_kwargs={"k": [i]}))
        messages.append(
            AIMessage(
                "",
                id=f"a{i}",
                tool_calls=[
                    {"name": "search", "args": {"q": f"q{i}", "deep": {"n": [i]}}, "id": f"c{i}"}
                ],
            )
        )
        messages.append(ToolMessage(f"result {i}", tool_call_id=f"c{i}", id=f"t{i}"))
    v = saver.get_next_version(version, None)
    ckpt["channel_values"] = {
        "messages": messages,
        "profile": {"name": "Ada", "tags": ["a", "b"], "nested": {"x": [1, 2]}},
        "rows": [{"i": i, "sub": [i]} for i in range(3)],
    }
    ckpt["channel_versions"] = {"messages": v, "profile": v, "rows": v}
    metadata = {"source": "loop", "step": n, "nested": {"a": [1, {"b": 2}]}, "writes": {"x": [1]}}
    return ckpt, metadata, {"messages": v, "profile": v, "rows": v}


def store_rich(saver: SQLSaver, thread: str) -> list[Any]:
    """Three checkpoints of one thread (the messages list growing), with pending writes."""
    config: Any = graph_cfg(thread, checkpoint_ns="")
    version = None
    configs = []
    for n in (1, 2, 3):
        ckpt, metadata, versions = rich_checkpoint(saver, n, version)
        version = versions["messages"]
        config = saver.put(config, ckpt, metadata, versions)
        saver.put_writes(
            config,
            [("messages", [AIMessage("w", id=f"w{n}")]), ("profile", {"k": [n]})],
            f"task-{n}",
        )
        configs.append(config)
    return configs


def test_get_tuple_and_list_results_are_the_callers_own(saver: SQLSaver) -> None:
    configs = store_rich(saver, "rich")
    for config in (configs[-1], graph_cfg("rich"), configs[0]):
        first = saver.get_tuple(config)
        assert first is not None
        pristine = copy.deepcopy(first)
        mutate(first)
        assert saver.get_tuple(config) == pristine
    items = list(saver.list(graph_cfg("rich")))
    assert len(items) == 3
    pristine_items = copy.deepcopy(items)
    mutate(items[0])  # the newest: its messages extend the older ones'
    assert items[1:] == pristine_items[1:]  # the other items of the same call
    assert list(saver.list(graph_cfg("rich"))) == pristine_items
    mutate(items[2])
    assert saver.get_tuple(configs[0]) == pristine_items[2]
    # a read made before the mutation, another after: they share nothing either
    a, b = saver.get_tuple(configs[-1]), saver.get_tuple(configs[-1])
    assert a == b
    mutate(a)
    assert b == pristine_items[0]


async def test_aget_tuple_and_alist_results_are_the_callers_own(saver: SQLSaver) -> None:
    configs = store_rich(saver, "arich")
    first = await saver.aget_tuple(configs[-1])
    pristine = copy.deepcopy(first)
    first.checkpoint["channel_values"]["messages"][1].tool_calls[0]["args"]["deep"]["n"].append(9)
    assert await saver.aget_tuple(configs[-1]) == pristine  # a change deep inside a message
    mutate(first)
    assert await saver.aget_tuple(configs[-1]) == pristine
    items = [t async for t in saver.alist(graph_cfg("arich"))]
    pristine_items = copy.deepcopy(items)
    mutate(items[0])
    assert items[1:] == pristine_items[1:]
    assert [t async for t in saver.alist(graph_cfg("arich"))] == pristine_items
    history = await saver.aget_delta_channel_history(config=configs[-1], channels=["messages"])
    kept = copy.deepcopy(history)
    mutate(history)
    again = await saver.aget_delta_channel_history(config=configs[-1], channels=["messages"])
    assert again == kept


def test_put_and_put_writes_keep_no_reference(saver: SQLSaver) -> None:
    ckpt, metadata, versions = rich_checkpoint(saver, 2, None)
    writes = [("messages", [AIMessage("w", id="w")]), ("profile", {"k": [1]})]
    expected = copy.deepcopy((ckpt["channel_values"], metadata, writes))
    refs = [weakref.ref(m) for m in ckpt["channel_values"]["messages"]]
    refs.append(weakref.ref(writes[0][1][0]))
    config = saver.put(graph_cfg("refs", checkpoint_ns=""), ckpt, metadata, versions)
    saver.put_writes(config, writes, "task")
    mutate(ckpt)  # the caller changes what it passed: nothing stored changes
    mutate(metadata)
    mutate(writes)
    got = saver.get_tuple(config)
    assert got is not None
    assert got.checkpoint["channel_values"] == expected[0]
    assert {k: got.metadata[k] for k in expected[1]} == expected[1]
    assert [(ch, v) for _, ch, v in got.pending_writes] == expected[2]
    del ckpt, writes, got
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)  # the saver holds none of them


def test_the_list_cache_holds_immutable_data_only(saver: SQLSaver) -> None:
    store_rich(saver, "cache")
    saver.get_tuple(graph_cfg("cache"))
    fresh = SQLSaver(saver.db, table_prefix=saver.tables.prefix, serde=saver.serde)
    fresh.get_tuple(graph_cfg("cache"))  # a state made from a read, not a put
    for s in (saver, fresh):
        # private: what the list cache holds is the subject (it must be immutable data only)
        states = list(s.lists._data.values())
        assert states and all(isinstance(e, ListState) for e in states)
        for state in states:
            assert_immutable(state)


def assert_immutable(obj: Any) -> None:
    if isinstance(obj, str | bytes | int | float | bool | type(None)):
        return
    if isinstance(obj, tuple):
        for v in obj:
            assert_immutable(v)
        return
    assert is_dataclass(obj) and type(obj).__dataclass_params__.frozen, type(obj)  # type: ignore[attr-defined]
    for f in fields(obj):
        assert_immutable(getattr(obj, f.name))


# -- state changed in place is stored as a serializing saver stores it ---------------------------


def mutating_graph(checkpointer: BaseCheckpointSaver) -> Any:
    def node(state: MessagesState) -> dict[str, Any]:
        first = state["messages"][0]  # bad practice: an earlier message changed in place
        first.additional_kwargs.setdefault("seen", {"n": []})["n"].append(len(state["messages"]))
        return {
            "messages": [
                AIMessage(f"reply {len(state['messages'])}", id=f"a{len(state['messages'])}")
            ]
        }

    g = StateGraph(MessagesState)
    g.add_node("n", node)
    g.add_edge(START, "n")
    return g.compile(checkpointer=checkpointer)


def test_deep_in_place_changes_are_stored_as_inmemory_stores_them(saver: SQLSaver) -> None:
    views = []
    for cp in (saver, InMemorySaver()):
        app = mutating_graph(cp)
        for i in range(4):  # "sync": each checkpoint is stored before the next step runs
            message = HumanMessage(f"q{i}", id=f"h{i}")
            app.invoke({"messages": [message]}, graph_cfg("deep"), durability="sync")
        views.append(
            [s.values.get("messages", []) for s in app.get_state_history(graph_cfg("deep"))]
        )
    assert views[0] == views[1]
    assert views[0][0][0].additional_kwargs == {"seen": {"n": [1, 3, 5, 7]}}
    cold = SQLSaver(saver.db, table_prefix=saver.tables.prefix, serde=saver.serde)
    assert mutating_graph(cold).get_state(graph_cfg("deep")).values["messages"] == views[1][0]
