"""Nothing lost on the round trip, on every database, sync and async."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from langmem_sqlite import ConversationStore

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode()


def corpus() -> list[BaseMessage]:
    """Every message kind with every field LangChain carries."""
    return [
        SystemMessage("You are terse.", id="sys-1"),
        HumanMessage(
            content=[
                {"type": "text", "text": "what is in this picture? é 🚀"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                {"type": "image", "source_type": "base64", "data": PNG, "mime_type": "image/png"},
            ],
            name="alice",
            id="h-1",
            additional_kwargs={"lang": "fr", "nested": {"a": [1, 2.5, None, True]}},
        ),
        AIMessage(
            content="",
            id="run-abc",
            name="bot",
            tool_calls=[
                {"name": "search", "args": {"q": "weather", "n": 3}, "id": "call_1"},
                {"name": "lookup", "args": {"ids": [1, 2]}, "id": "call_2"},
            ],
            invalid_tool_calls=[
                {"name": "bad", "args": "{not json", "id": "call_3", "error": "parse"}
            ],
            additional_kwargs={"refusal": None},
            response_metadata={"model_name": "gpt-4o", "finish_reason": "tool_calls"},
            usage_metadata={
                "input_tokens": 10,
                "output_tokens": 20,
                "total_tokens": 30,
                "input_token_details": {"cache_read": 2},
            },
        ),
        ToolMessage(
            "sunny", tool_call_id="call_1", name="search", id="t-1", artifact={"raw": [1, 2]}
        ),
        ToolMessage("boom", tool_call_id="call_2", name="lookup", status="error", id="t-2"),
        AIMessage(
            content=[
                {"type": "reasoning", "reasoning": "thinking..."},
                {"type": "text", "text": "It is sunny."},
            ],
            id="run-def",
        ),
        AIMessageChunk(
            content="partial",
            id="run-chunk",
            tool_call_chunks=[{"name": "f", "args": '{"a": 1}', "id": "c9", "index": 0}],
        ),
        ChatMessage(role="critic", content="meh", id="c-1"),
    ]


def assert_same(got: list[BaseMessage], want: list[BaseMessage]) -> None:
    assert [type(m) for m in got] == [type(m) for m in want]
    assert [m.model_dump() for m in got] == [m.model_dump() for m in want]


def test_round_trip_every_field(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    msgs = corpus()
    store.add_messages("s", msgs, user_id="u")
    assert_same(store.get_messages("s", user_id="u"), msgs)


async def test_round_trip_every_field_async(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    msgs = corpus()
    await store.aadd_messages("s", msgs, user_id="u")
    assert_same(await store.aget_messages("s", user_id="u"), msgs)
    # and the sync side of the same object sees the same rows
    assert_same(store.get_messages("s", user_id="u"), msgs)


def test_large_and_unusual_content(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    cjk = "漢字かなカナ한국어" * 2223  # ~20k CJK characters
    msgs = [
        HumanMessage(cjk[:20_000]),
        AIMessage("emoji 👩‍👩‍👧‍👦🏳️‍🌈 and NUL \x00 inside \x00"),
        HumanMessage(
            content=[
                {"type": "text", "text": "big image"},
                {
                    "type": "image",
                    "source_type": "base64",
                    "data": base64.b64encode(b"x" * 750_000).decode(),
                    "mime_type": "image/png",
                },
            ]
        ),
        ToolMessage("o" * 100_000, tool_call_id="c1"),
        HumanMessage("'; DROP TABLE langmem_messages; --", id="x'); DELETE FROM t; --"),
        HumanMessage("lone surrogate \ud800 kept"),
    ]
    store.add_messages("s", msgs)
    got = store.get_messages("s")
    assert_same(got, msgs)
    assert len(got[2].content[1]["data"]) >= 1_000_000


def test_non_ascii_stored_as_utf8_not_escaped(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    text = "你好世界" * 1000
    store.add_messages("s", [HumanMessage(text)])
    with store.db.sync_engine.connect() as conn:
        body = conn.execute(sa.select(store.tables.messages.c.body)).scalar_one()
    assert text in body
    assert len(body.encode("utf-8")) < 2 * len(text.encode("utf-8"))


def test_values_plain_json_rejects_are_lossless(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    meta = {
        "when": dt.datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=dt.timezone.utc),
        "day": dt.date(2026, 1, 2),
        "raw": b"\x00\xffbytes",
        "price": Decimal("12.3400"),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "tags": {"a", "b"},
        "frozen": frozenset({1}),
        "pair": (1, "x"),
        "nan": float("nan"),
        "inf": float("-inf"),
        "__lmsql__": "a user key that looks like our tag",
        "span": dt.timedelta(days=1, seconds=2),
    }
    msg = AIMessage("x", response_metadata=meta, id="m1")
    store.add_messages("s", [msg])
    (got,) = store.get_messages("s")
    out = got.response_metadata
    for k in meta:
        if k == "nan":
            assert out[k] != out[k]
        else:
            assert out[k] == meta[k] and type(out[k]) is type(meta[k]), k


def test_unstorable_values_rejected_before_any_write(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    store.add_messages("s", [HumanMessage("first")])

    class Opaque:
        pass

    good = HumanMessage("would be written")
    bad = AIMessage("x", response_metadata={"obj": Opaque()})
    with pytest.raises(TypeError, match="Opaque"):
        store.add_messages("s", [good, bad])
    with pytest.raises(ValueError, match="remove"):
        store.add_messages("s", [good, RemoveMessage(id="x")])
    with pytest.raises(TypeError, match="BaseMessage"):
        store.add_messages("s", [good, {"role": "user", "content": "dict"}])  # type: ignore[list-item]
    assert [m.content for m in store.get_messages("s")] == ["first"]
    assert store.count_messages("s") == 1


def test_size_cap(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix, max_message_bytes=10_000)
    with pytest.raises(ValueError, match="max_message_bytes"):
        store.add_messages("s", [HumanMessage("ok"), HumanMessage("x" * 20_000)])
    assert store.get_messages("s") == []


@pytest.mark.parametrize("number", [-(2**63) - 1, 2**64, 2**64 - 1, -(2**63), 10**40])
def test_integers_beyond_64_bits_stay_integers(db_url: str, prefix: str, number: int) -> None:
    """orjson reads integers outside [-2**63, 2**64 - 1] back as floats: such integers are
    stored tagged (found by the full hypothesis run on MariaDB)."""
    store = ConversationStore(db_url, table_prefix=prefix)
    msg = HumanMessage("n", response_metadata={"n": [number], "m": {"k": number}})
    store.add_messages("big-int", [msg])
    got = store.get_messages("big-int")[0]
    assert got == msg
    assert type(got.response_metadata["n"][0]) is int and got.response_metadata["m"]["k"] == number
