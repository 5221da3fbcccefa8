"""Encryption at rest, verified by reading the raw rows of every table: with a key, no message
text, title, summary or checkpoint value (str channel values included) is stored in plaintext.
Also corrupted and hostile checkpoint rows: typed errors, no code execution.
"""

from __future__ import annotations

import operator
import pickle
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph

from langmem_sqlite import ConversationStore, SQLChatMessageHistory, SQLSaver
from langmem_sqlite.crypto import MessageCipher

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "tr0ub4dor-SECRET-plaintext"


def _raw_dump(engine: sa.Engine, tables: list[sa.Table]) -> bytes:
    """Every value of every row of ``tables``, as bytes (text as UTF-8)."""
    out = []
    with engine.connect() as conn:
        for table in tables:
            # read the raw column values, not through the types' result processing
            cols = ", ".join(c.name for c in table.columns)
            name = table.name
            for row in conn.exec_driver_sql(f"SELECT {cols} FROM {name}"):
                for v in row:
                    if isinstance(v, bytes | bytearray | memoryview):
                        out.append(bytes(v))
                    elif v is not None:
                        out.append(str(v).encode("utf-8", "surrogatepass"))
    return b"\x00".join(out)


def test_encrypted_history_has_no_plaintext(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix, encryption_key=KEY)
    messages: list[BaseMessage] = [
        HumanMessage(f"my password is {SECRET}", id="m1"),
        AIMessage(
            [{"type": "text", "text": f"noted {SECRET}"}],
            tool_calls=[{"name": "save", "args": {"p": SECRET}, "id": "c1"}],
        ),
        ToolMessage(SECRET, tool_call_id="c1"),
    ]
    store.add_messages("s", messages, user_id="u")
    store.rename_session("s", f"title {SECRET}", user_id="u")
    store.set_summary("s", f"summary {SECRET}", user_id="u")
    assert store.get_messages("s", user_id="u") == messages
    assert store.get_token_window("s", 100_000, user_id="u") == messages
    info = store.get_session("s", user_id="u")
    assert info is not None and info.title == f"title {SECRET}"
    assert store.get_summary("s", user_id="u") == f"summary {SECRET}"
    assert [i.title for i in store.list_sessions("u")] == [f"title {SECRET}"]
    t = store.tables
    raw = _raw_dump(store.db.sync_engine, [t.sessions, t.messages])
    assert SECRET.encode() not in raw and b"password" not in raw and b"noted" not in raw
    with store.db.sync_engine.connect() as conn:
        texts = conn.execute(sa.select(t.messages.c.content_text)).scalars().all()
    assert texts == ["", "", ""]  # the searchable column holds nothing


async def test_encrypted_history_async_and_history_adapter(db_url: str, prefix: str) -> None:
    history = SQLChatMessageHistory("s", db_url, table_prefix=prefix, encryption_key=KEY)
    await history.aadd_messages([HumanMessage(SECRET)])
    history.add_message(AIMessage(SECRET + "!"))
    assert [m.content for m in await history.aget_messages()] == [SECRET, SECRET + "!"]
    t = history.store.tables
    assert SECRET.encode() not in _raw_dump(history.store.db.sync_engine, [t.messages])


def test_wrong_key_missing_key_and_moved_rows_are_refused(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix, encryption_key=KEY)
    store.add_messages("s", [HumanMessage(SECRET)], user_id="alice")
    store.add_messages("s", [HumanMessage("bob's")], user_id="bob")
    with pytest.raises(ValueError, match="decrypted"):
        ConversationStore(db_url, table_prefix=prefix, encryption_key=b"x" * 32).get_messages(
            "s", user_id="alice"
        )
    with pytest.raises(ValueError, match="encrypted"):
        ConversationStore(db_url, table_prefix=prefix).get_messages("s", user_id="alice")
    # an attacker with write access moves alice's encrypted row into bob's session
    t = store.tables
    with store.db.sync_engine.begin() as conn:
        pks = dict(conn.execute(sa.select(t.sessions.c.user_id, t.sessions.c.id)).all())
        body = conn.execute(
            sa.select(t.messages.c.body).where(t.messages.c.session_pk == pks["alice"])
        ).scalar_one()
        conn.execute(
            sa.update(t.messages).where(t.messages.c.session_pk == pks["bob"]).values(body=body)
        )
    with pytest.raises(ValueError, match="another session"):
        store.get_messages("s", user_id="bob")
    assert [m.content for m in store.get_messages("s", user_id="alice")] == [SECRET]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"encryption_key": b"short"}, ValueError),
        ({"encryption_key": 12345}, TypeError),
        ({"cipher": "aes"}, TypeError),
        ({"encryption_key": KEY, "cipher": MessageCipher(KEY)}, ValueError),
    ],
)
def test_bad_encryption_options(tmp_path: Path, kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ConversationStore(tmp_path / "x.db", **kwargs)


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
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    saver = SQLSaver(db_url, table_prefix=prefix, serde=serde)
    app = _graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    for i in range(3):  # several steps: list channels are stored as deltas too
        app.invoke({"messages": [HumanMessage(f"{SECRET} {i}")], "note": f"{SECRET}-{i}"}, config)
    state = app.get_state(config).values
    assert state["note"] == f"{SECRET}-2" and len(state["notes"]) == 3
    t = saver.tables
    tables = [t.checkpoints, t.checkpoint_blobs, t.checkpoint_writes, t.checkpoint_threads]
    raw = _raw_dump(saver.db.sync_engine, tables)
    assert raw, "nothing was stored"
    assert SECRET.encode() not in raw and b"echo" not in raw
    # without the key, the values cannot be read
    plain = SQLSaver(db_url, table_prefix=prefix)
    with pytest.raises((ValueError, TypeError, NotImplementedError)):
        plain.get_tuple(config)


def test_encrypted_checkpoint_metadata_has_no_plaintext(db_url: str, prefix: str) -> None:
    saver = SQLSaver(
        db_url, table_prefix=prefix, serde=EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    )
    app = _graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}, "metadata": {"topic": SECRET}}
    app.invoke({"messages": [HumanMessage("x")], "note": "n"}, config)
    t = saver.tables
    raw = _raw_dump(saver.db.sync_engine, [t.checkpoints, t.checkpoint_threads])
    assert SECRET.encode() not in raw
    # filtering by metadata still works, on the decrypted metadata
    assert [c.metadata["topic"] for c in saver.list(None, filter={"topic": SECRET})]
    assert not list(saver.list(None, filter={"topic": "other"}))
    with pytest.raises(ValueError, match="searchable_metadata"):
        saver.list_threads(metadata={"topic": SECRET})


class _Boom:
    path = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_corrupted_checkpoint_rows_give_typed_errors_and_run_nothing(
    db_url: str, prefix: str, tmp_path: Path
) -> None:
    saver = SQLSaver(db_url, table_prefix=prefix)
    app = _graph(saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [HumanMessage("hi")], "note": "n"}, config)
    boom = _Boom()
    boom.path = str(tmp_path / "executed")
    payload = pickle.dumps(boom)
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
