"""Hostile input to the checkpointer: fuzzed thread ids, channel values and metadata, NUL in
metadata and lone surrogates in channel values, on SQLite, PostgreSQL and MariaDB.

Every input is either stored and read back exactly, or refused with ``TypeError``/``ValueError``
before anything is written.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph
from support import FUZZ, STORE_JSON, STORE_TEXT, TEXT

from langmem_sqlite import SQLSaver

# checkpoint metadata: NUL kept out too (see test_nul_in_checkpoint_metadata)
META_TEXT = STORE_TEXT.filter(lambda t: "\x00" not in t)


class _State(TypedDict):
    note: Any
    notes: Annotated[list[Any], operator.add]


def _echo_graph(saver: SQLSaver) -> Any:
    def step(state: _State) -> dict[str, Any]:
        return {"notes": [state["note"]]}

    g = StateGraph(_State)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_edge("step", END)
    return g.compile(checkpointer=saver)


@FUZZ
@given(thread=TEXT, note=STORE_JSON, meta=st.dictionaries(META_TEXT, STORE_JSON, max_size=3))
def test_fuzzed_checkpoints(
    db_url: str, prefix: str, thread: str, note: Any, meta: dict[str, Any]
) -> None:
    saver = SQLSaver(db_url, table_prefix=prefix)
    app = _echo_graph(saver)
    config: Any = {"configurable": {"thread_id": thread}, "metadata": meta}
    with contextlib.suppress(TypeError, ValueError):  # examples are independent, even shrunk
        saver.delete_thread(thread)
    try:
        app.invoke({"note": note}, config)
    except (TypeError, ValueError):
        # refused before anything was written
        with contextlib.suppress(TypeError, ValueError):
            assert saver.get_tuple({"configurable": {"thread_id": thread}}) is None
        return
    state = app.get_state({"configurable": {"thread_id": thread}}).values
    assert state["note"] == note and state["notes"] == [note]
    saver.delete_thread(thread)


def test_nul_in_checkpoint_metadata(db_url: str, prefix: str, backend: str) -> None:
    saver = SQLSaver(db_url, table_prefix=prefix)
    app = _echo_graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}, "metadata": {"k\x00": "v\x00"}}
    app.invoke({"note": 1}, config)
    assert app.get_state(config).values["note"] == 1
    # the key is kept in the (serialized) metadata and a filter on it still finds the thread
    found = list(saver.list(None, filter={"k\x00": "v"}))
    assert found and all(c.metadata["k\x00"] == "v" for c in found)


@pytest.mark.parametrize("encrypted", [False, True])
def test_lone_surrogate_in_a_channel_value(db_url: str, prefix: str, encrypted: bool) -> None:
    """LangGraph's serializer would store "a\\ud800b" as "a?b": the saver refuses it instead,
    with a ValueError naming the channel, and nothing of the step is stored."""
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16) if encrypted else None
    saver = SQLSaver(db_url, table_prefix=prefix, serde=serde)
    app = _echo_graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"note": "fine?"}, config)  # a '?' of its own is no lone surrogate
    before = len(list(saver.list(config)))
    with pytest.raises(ValueError, match=r"channel '__start__': .*lone surrogate"):
        app.invoke({"note": "a\ud800b"}, config)
    assert app.get_state(config).values["note"] == "fine?"
    assert len(list(saver.list(config))) == before  # the refused input left no checkpoint
    # a write to a channel of a running step is refused the same way
    with pytest.raises(ValueError, match="lone surrogate"):
        saver.put_writes(app.get_state(config).config, [("note", "x\udfff")], "task")
