"""Hostile input to the chat history: fuzzed messages, ids, titles and summaries, huge and deeply
nested messages, and corrupted rows on read, on SQLite, PostgreSQL and MariaDB.

Every input is either stored and read back exactly, or refused with ``TypeError``/``ValueError``
before anything is written. Every corrupted row gives ``ValueError``; nothing in a row is ever
executed (a ``pickle`` payload that would create a file is checked for).
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from support import FUZZ, TEXT, code_running_pickle

from langmem_sqlite import ConversationStore, SQLChatMessageHistory

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
IDS = st.one_of(TEXT, st.integers(), st.uuids())


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


# -- corrupted rows ------------------------------------------------------------------------------


def _corruptions(good_body: str, marker: Path) -> dict[str, tuple[str, str]]:
    # protocol 0 is ASCII: it fits a text column on every database
    payload = code_running_pickle(marker, protocol=0)
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
                type="pickle", body=code_running_pickle(marker, protocol=0).decode()
            )
        )
    with pytest.raises(ValueError):
        await store.aget_messages("c")
    with pytest.raises(ValueError):
        await store.aload_window("c", max_tokens=100)
    assert not marker.exists()
