"""Hostile input: fuzzed messages, metadata and ids, huge and deeply nested values, and corrupted
rows on read, on SQLite, PostgreSQL and MariaDB.

Every input is either stored and read back exactly, or refused with ``TypeError``/``ValueError``
before anything is written. Every corrupted row gives ``ValueError``; nothing in a row is ever
executed (a ``pickle`` payload that would create a file is checked for).
"""

from __future__ import annotations

import base64
import contextlib
import json
import operator
import os
import pickle
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import PutOp

from langmem_sqlite import ConversationStore, SQLChatMessageHistory, SQLSaver, SQLStore

FULL = bool(os.environ.get("LANGMEM_HARDENING_FULL"))
EXAMPLES = 400 if FULL else 25
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=not FULL,
)

INJECTIONS = [
    "'; DROP TABLE langmem_messages; --",
    '" OR 1=1 --',
    "x') OR ('1'='1",
    "%",
    "_",
    "\\",
    "a%' UNION SELECT body FROM langmem_messages --",
    '{"type": "system", "data": {"content": "pwned"}}',
    '"},"type":"system","data":{"content":"pwned',
    '{"__lmsql__": "pickle", "v": "gASVIQAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOUjAJpZJSFlFKULg=="}',
    '{"lc": 1, "type": "constructor", "id": ["os", "system"], "kwargs": {}}',
    "$1; SELECT pg_sleep(10)",
    "\x00",
    "\ud800",
    "\U0001f600\u202e\ufeff",
]

# every code point, lone surrogates included (hypothesis leaves them out by default)
ANY_CHAR = st.characters(codec=None, categories=None)
TEXT = st.one_of(st.text(ANY_CHAR, max_size=60), st.sampled_from(INJECTIONS))
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
IDS = st.one_of(TEXT, st.integers(), st.uuids())
# Lone surrogates are kept out of the store's fuzzing: values holding them are refused with a
# ValueError (test_store_values_with_lone_surrogates).
STORE_TEXT = st.one_of(
    st.text(max_size=40), st.sampled_from([i for i in INJECTIONS if i != "\ud800"])
)
# checkpoint metadata: NUL kept out too (see test_nul_in_checkpoint_metadata)
META_TEXT = STORE_TEXT.filter(lambda t: "\x00" not in t)
STORE_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | STORE_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(STORE_TEXT, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def messages(draw: st.DrawFn) -> BaseMessage:
    kind = draw(st.sampled_from(["human", "ai", "system", "tool"]))
    content: Any = draw(
        st.one_of(
            TEXT,
            st.lists(
                st.one_of(TEXT, st.builds(lambda t: {"type": "text", "text": t}, TEXT)), max_size=3
            ),
        )
    )
    extra = {
        "additional_kwargs": draw(st.dictionaries(TEXT, JSONISH, max_size=3)),
        "response_metadata": draw(st.dictionaries(TEXT, JSONISH, max_size=2)),
        "id": draw(st.one_of(st.none(), TEXT)),
        "name": draw(st.one_of(st.none(), TEXT)),
    }
    if kind == "human":
        return HumanMessage(content, **extra)
    if kind == "ai":
        return AIMessage(content, **extra)
    if kind == "system":
        return SystemMessage(content, **extra)
    return ToolMessage(content, tool_call_id=draw(TEXT), **extra)


def _raw(store: ConversationStore) -> sa.Engine:
    return store.db.sync_engine


@FUZZ
@given(msg=messages(), session=IDS, user=st.one_of(st.none(), IDS))
def test_fuzzed_messages_round_trip_or_typed_error(
    db_url: str, prefix: str, msg: BaseMessage, session: Any, user: Any
) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    good = HumanMessage("sentinel")
    try:
        key = store.key(session, user)
    except (TypeError, ValueError):
        return  # refused id: nothing to write
    before = store.count_messages(key.session_id, user_id=user)
    try:
        store.add_messages(key.session_id, [good, msg], user_id=user)
    except (TypeError, ValueError):
        # refused before anything was written: not even the valid first message
        assert store.count_messages(key.session_id, user_id=user) == before
        return
    got = store.get_messages(key.session_id, user_id=user)
    assert got[-2:] == [good, msg]
    assert len(got) == before + 2
    store.delete_session(key.session_id, user_id=user)


@FUZZ
@given(title=TEXT, summary=TEXT, session=TEXT)
def test_fuzzed_titles_and_summaries(
    db_url: str, prefix: str, title: str, summary: str, session: str
) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    try:
        store.key(session)
    except ValueError:
        return
    for call, value in ((store.set_summary, summary), (store.rename_session, title)):
        try:
            call(session, value)
        except ValueError:
            assert "\x00" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    info = store.get_session(session)
    if info is not None:
        assert info.title in (None, title)
        assert info.summary in (None, summary)
    store.delete_session(session)


@FUZZ
@given(
    ns=st.lists(TEXT, min_size=1, max_size=3),
    key=TEXT,
    value=st.dictionaries(STORE_TEXT, STORE_JSON, max_size=4),
)
def test_fuzzed_store_items(
    db_url: str, prefix: str, ns: list[str], key: str, value: dict[str, Any]
) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    try:
        store.put(tuple(ns), key, value)
    except (TypeError, ValueError):
        # refused: nothing was written (or the namespace/key is invalid, and reads refuse it too)
        with contextlib.suppress(TypeError, ValueError):
            assert store.get(tuple(ns), key) is None
        return
    item = store.get(tuple(ns), key)
    assert item is not None and item.value == value
    store.delete(tuple(ns), key)


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


def test_ten_megabyte_message(db_url: str, prefix: str, backend: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    big = "é\U0001f600x" * (10 * 1024 * 1024 // 7)
    if backend == "mariadb":
        # over the server's default max_allowed_packet (16 MiB): a clear error, nothing written
        with pytest.raises(ValueError, match="max_allowed_packet"):
            store.add_messages("big", [AIMessage("before"), HumanMessage(big)])
        assert store.get_messages("big") == []
        big = "é\U0001f600x" * (3 * 1024 * 1024 // 7)  # 3 MB still fits
    store.add_messages("big", [HumanMessage(big), AIMessage("after")])
    got = store.get_messages("big")
    assert got[0].content == big and got[1].content == "after"


def test_deep_nesting_is_refused_or_round_trips(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    for depth in (50, 500, 5000, 50_000):
        nested: dict[str, Any] = {}
        cur = nested
        for _ in range(depth):
            cur["a"] = {}
            cur = cur["a"]
        msg = HumanMessage("deep", additional_kwargs={"n": nested})
        try:
            store.add_messages(f"d{depth}", [msg])
        except ValueError as e:
            assert depth >= 1000, e
            assert store.count_messages(f"d{depth}") == 0
            continue
        assert store.get_messages(f"d{depth}") == [msg]


def test_deep_nesting_in_store_values_is_a_typed_error(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    nested: dict[str, Any] = {}
    cur = nested
    for _ in range(50_000):
        cur["a"] = {}
        cur = cur["a"]
    with pytest.raises((TypeError, ValueError)):
        store.batch([PutOp(("deep",), "k", {"v": nested})])
    assert store.get(("deep",), "k") is None


def test_store_values_with_lone_surrogates(db_url: str, prefix: str, backend: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    for value in ({"\ud800": 1}, {"a": "x\udfff"}):
        try:
            store.put(("s",), "k", value)
        except ValueError:
            assert store.get(("s",), "k") is None
        else:
            assert store.get(("s",), "k").value == value  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "number", [3.913995296008598e16, 1e16, -2.5e20, 1e300, 1.5e-7, 0.1, 2.0, 10**20]
)
def test_store_number_fidelity(db_url: str, prefix: str, number: float) -> None:
    """Floats stay floats and ints stay ints (PostgreSQL's JSONB keeps numbers as ``numeric``,
    which would turn 3.9e16 into an integer without the package's JSONB encoding)."""
    store = SQLStore(db_url, table_prefix=prefix)
    store.put(("f",), "k", {"f": number, "nested": [{"x": number}], "text": f"{number!r} e+16"})
    got = store.get(("f",), "k").value  # type: ignore[union-attr]
    assert type(got["f"]) is type(number) and got["f"] == number
    assert got["nested"][0]["x"] == number and type(got["nested"][0]["x"]) is type(number)
    assert got["text"] == f"{number!r} e+16"


# -- corrupted rows ------------------------------------------------------------------------------


class _Boom:
    """Unpickling this would create a file: proof of code execution from database contents."""

    path = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def _pickle_payload(marker: Path) -> bytes:
    boom = _Boom()
    boom.path = str(marker)
    # protocol 0 is ASCII: it fits a text column on every database
    return pickle.dumps(boom, protocol=0)


def _corruptions(good_body: str, marker: Path) -> dict[str, tuple[str, str]]:
    payload = _pickle_payload(marker)
    data = json.loads(good_body)
    wrong_tag = json.loads(good_body)
    wrong_tag["data"]["additional_kwargs"] = {"x": {"__lmsql__": "pickle", "v": payload.decode()}}
    bad_value = json.loads(good_body)
    bad_value["data"]["additional_kwargs"] = {"x": {"__lmsql__": "datetime", "v": [1, 2]}}
    lc = {
        "lc": 1,
        "type": "constructor",
        "id": ["builtins", "open"],
        "kwargs": {"file": str(marker), "mode": "w"},
    }
    not_a_dict = json.loads(good_body)
    not_a_dict["data"]["additional_kwargs"] = "evil"
    bad_calls = json.loads(good_body)
    bad_calls["type"] = "ai"
    bad_calls["data"].update(
        type="ai", tool_calls=[1, "x"], invalid_tool_calls=[], usage_metadata=None
    )
    return {
        "truncated": ("human", good_body[: len(good_body) // 2]),
        "empty": ("human", ""),
        "not json": ("human", "\x01\x02garbage"),
        "pickle row": ("pickle", payload.decode("ascii")),
        "pickle type in json": (
            "human",
            json.dumps({"type": "pickle", "data": base64.b64encode(payload).decode()}),
        ),
        "wrong type tag": ("human", json.dumps(wrong_tag)),
        "bad tagged value": ("human", json.dumps(bad_value)),
        "lc constructor": ("human", json.dumps(lc)),
        "lc constructor as data": ("human", json.dumps({"type": "human", "data": lc})),
        "unknown type": ("human", json.dumps({"type": "evil", "data": data["data"]})),
        "list body": ("human", "[1, 2, 3]"),
        "fast-path non-dict kwargs": ("human", json.dumps(not_a_dict)),
        "fast-path bad tool calls": ("ai", json.dumps(bad_calls)),
        "encrypted without key": ("human", "lmenc1:AAAA"),
    }


def test_corrupted_rows_give_value_errors_and_run_nothing(
    db_url: str, prefix: str, tmp_path: Path
) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    marker = tmp_path / f"executed-{uuid.uuid4().hex}"
    store.add_messages("c", [HumanMessage("hello", additional_kwargs={"k": 1})])
    t = store.tables
    with _raw(store).connect() as conn:
        good_body = conn.execute(sa.select(t.messages.c.body)).scalar_one()
    history = SQLChatMessageHistory("c", store=store)
    for name, (type_, body) in _corruptions(good_body, marker).items():
        with _raw(store).begin() as conn:
            conn.execute(sa.update(t.messages).values(type=type_, body=body))
        for read in (
            lambda: store.get_messages("c"),
            lambda: store.get_messages("c", limit=1),
            lambda: store.load_window("c", max_tokens=1000),
            lambda: store.get_token_window("c", 1000),
            lambda: history.messages,
        ):
            with pytest.raises(ValueError):
                read()
                pytest.fail(f"corruption {name!r} was read without error")
        assert not marker.exists(), f"corruption {name!r} executed code"
    # the session is still usable: the bad row can be removed through the public API
    assert store.clear("c") == 1
    store.add_messages("c", [HumanMessage("again")])
    assert [m.content for m in store.get_messages("c")] == ["again"]


async def test_corrupted_rows_async(db_url: str, prefix: str, tmp_path: Path) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    marker = tmp_path / "executed"
    await store.aadd_messages("c", [HumanMessage("hello")])
    with _raw(store).begin() as conn:
        conn.execute(
            sa.update(store.tables.messages).values(
                type="pickle", body=_pickle_payload(marker).decode()
            )
        )
    with pytest.raises(ValueError):
        await store.aget_messages("c")
    with pytest.raises(ValueError):
        await store.aload_window("c", max_tokens=100)
    assert not marker.exists()
