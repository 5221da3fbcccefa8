"""Encryption at rest of the checkpointer, verified by reading the raw rows of every table: with an
encrypting serializer, no checkpoint value (str channel values included) or metadata is stored
in plaintext. Also corrupted and hostile checkpoint rows: typed errors, no code execution.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph
from support import ENCRYPTION_KEY, SECRET, code_running_pickle, raw_dump

from langmem_sqlite import SQLSaver


class State(TypedDict):
    messages: Annotated[list[BaseMessage], operator.add]
    note: str
    notes: Annotated[list[str], operator.add]


def _graph(saver: SQLSaver) -> Any:
    def step(state: State) -> dict[str, Any]:
        return {
            "messages": [AIMessage(f"echo {state['note']}")],
            "notes": [state["note"]],
        }

    g = StateGraph(State)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_edge("step", END)
    return g.compile(checkpointer=saver)


def test_encrypted_checkpoints_have_no_plaintext(db_url: str, prefix: str) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=ENCRYPTION_KEY)
    saver = SQLSaver(db_url, table_prefix=prefix, serde=serde)
    app = _graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    for i in range(3):  # several steps: list channels are stored as deltas too
        app.invoke({"messages": [HumanMessage(f"{SECRET} {i}")], "note": f"{SECRET}-{i}"}, config)
    state = app.get_state(config).values
    assert state["note"] == f"{SECRET}-2" and len(state["notes"]) == 3
    t = saver.tables
    tables = [t.checkpoints, t.checkpoint_blobs, t.checkpoint_writes, t.checkpoint_threads]
    raw = raw_dump(saver.db.sync_engine, tables)
    assert raw, "nothing was stored"
    assert SECRET.encode() not in raw and b"echo" not in raw
    # without the key, the values cannot be read
    plain = SQLSaver(db_url, table_prefix=prefix)
    with pytest.raises((ValueError, TypeError, NotImplementedError)):
        plain.get_tuple(config)


def test_encrypted_checkpoint_metadata_has_no_plaintext(db_url: str, prefix: str) -> None:
    saver = SQLSaver(
        db_url,
        table_prefix=prefix,
        serde=EncryptedSerializer.from_pycryptodome_aes(key=ENCRYPTION_KEY),
    )
    app = _graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}, "metadata": {"topic": SECRET}}
    app.invoke({"messages": [HumanMessage("x")], "note": "n"}, config)
    t = saver.tables
    raw = raw_dump(saver.db.sync_engine, [t.checkpoints, t.checkpoint_threads])
    assert SECRET.encode() not in raw
    # filtering by metadata still works, on the decrypted metadata
    assert [c.metadata["topic"] for c in saver.list(None, filter={"topic": SECRET})]
    assert not list(saver.list(None, filter={"topic": "other"}))
    with pytest.raises(ValueError, match="searchable_metadata"):
        saver.list_threads(metadata={"topic": SECRET})


def test_corrupted_checkpoint_rows_give_typed_errors_and_run_nothing(
    db_url: str, prefix: str, tmp_path: Path
) -> None:
    saver = SQLSaver(db_url, table_prefix=prefix)
    app = _graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [HumanMessage("hi")], "note": "n"}, config)
    payload = code_running_pickle(tmp_path / "executed")
    t = saver.tables
    engine = saver.db.sync_engine
    with engine.connect() as conn:
        good = conn.execute(sa.select(t.checkpoints.c.type, t.checkpoints.c.checkpoint)).first()
    assert good is not None
    corruptions = {
        "pickle": ("pickle", payload),
        "truncated": (good[0], bytes(good[1])[: len(bytes(good[1])) // 2]),
        "wrong type tag": ("json", bytes(good[1])),
        "unknown type": ("evil", b"{}"),
        "empty": (good[0], b""),
    }
    for name, (type_, value) in corruptions.items():
        with engine.begin() as conn:
            conn.execute(sa.update(t.checkpoints).values(type=type_, checkpoint=value))
        with pytest.raises((ValueError, TypeError, NotImplementedError)):
            saver.get_tuple(config)
            pytest.fail(f"corruption {name!r} was read without error")
        assert not (tmp_path / "executed").exists(), f"{name!r} executed code"
    with engine.begin() as conn:  # blobs (channel values) too
        conn.execute(sa.update(t.checkpoint_blobs).values(type="pickle", value=payload))
        conn.execute(sa.update(t.checkpoints).values(type=good[0], checkpoint=good[1]))
    # a fresh saver reads the lists from their rows (this one has them cached; the short
    # "note" is kept in the checkpoint's record)
    fresh = _graph(SQLSaver(db_url, table_prefix=prefix, list_cache_size=0))
    with pytest.raises((ValueError, TypeError, NotImplementedError)):
        fresh.get_state(config)
    assert not (tmp_path / "executed").exists()
