"""Messages to and from the JSON text of the `body` column: LangChain's `message_to_dict`
shape (readable by langchain-community's `SQLChatMessageHistory`, and the other way round).

Values JSON has no type for (`datetime`, `bytes`, `UUID`, `Decimal`, sets, tuples, big ints,
non-finite floats...) are tagged `{"__lmsql__": KIND, "v": ...}`; anything else is refused:
reviving arbitrary classes from database contents would let whoever writes to it run code.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

TAG = "__lmsql__"

STORABLE_TYPES = frozenset(
    {"human", "ai", "system", "tool", "chat", "function"}
    | {f"{kind}MessageChunk" for kind in ("AI", "Human", "System", "Tool", "Chat", "Function")}
)
"""Message `type` values that can be stored (what `messages_from_dict` can rebuild)."""


def _tag(kind: str, value: Any) -> dict[str, Any]:
    return {TAG: kind, "v": value}


class _Unstorable(TypeError):
    """A value that cannot be stored; `path` is filled in on the way out of the recursion."""

    def __init__(self, value: Any, path: str = "") -> None:
        super().__init__(value, path)
        self.value = value
        self.path = path

    def inside(self, segment: str) -> _Unstorable:
        self.path = segment + self.path
        return self


_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
"""Integers orjson reads back as integers; beyond, it reads floats (so they are tagged)."""


def _prepare(value: Any) -> Any:
    """Return `value` with every non-JSON value replaced by its tagged form."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if _INT_MIN <= value <= _INT_MAX else _tag("int", str(value))
    if isinstance(value, float):
        return value if math.isfinite(value) else _tag("float", repr(value))
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _Unstorable(k).inside(f".<key {k!r}>")
            try:
                out[k] = _prepare(v)
            except _Unstorable as e:
                raise e.inside(f".{k}") from None
        return _tag("dict", out) if TAG in out else out
    if isinstance(value, list | tuple):
        items = []
        for i, v in enumerate(value):
            try:
                items.append(_prepare(v))
            except _Unstorable as e:
                raise e.inside(f"[{i}]") from None
        return items if isinstance(value, list) else _tag("tuple", items)
    if isinstance(value, dt.datetime):
        return _tag("datetime", value.isoformat())
    if isinstance(value, dt.date):
        return _tag("date", value.isoformat())
    if isinstance(value, dt.time):
        return _tag("time", value.isoformat())
    if isinstance(value, dt.timedelta):
        return _tag("timedelta", [value.days, value.seconds, value.microseconds])
    if isinstance(value, bytes | bytearray | memoryview):
        return _tag("bytes", base64.b64encode(bytes(value)).decode("ascii"))
    if isinstance(value, uuid.UUID):
        return _tag("uuid", str(value))
    if isinstance(value, Decimal):
        return _tag("decimal", str(value))
    if isinstance(value, set | frozenset):
        kind = "frozenset" if isinstance(value, frozenset) else "set"
        items = [_prepare(v) for v in value]
        return _tag(kind, sorted(items, key=lambda x: json.dumps(x, sort_keys=True)))
    raise _Unstorable(value)


_REVIVE: dict[str, Callable[[Any], Any]] = {
    "int": int,
    "float": float,
    "dict": lambda v: v,
    "tuple": tuple,
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "bytes": lambda v: base64.b64decode(v),
    "uuid": uuid.UUID,
    "decimal": Decimal,
    "set": set,
    "frozenset": frozenset,
}


def _revive(obj: dict[str, Any]) -> Any:
    kind = obj.get(TAG)
    if kind is None or len(obj) != 2 or "v" not in obj:
        return obj
    try:
        return _REVIVE[kind](obj["v"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"stored message: bad tagged value {kind!r}") from e


def encode_message(message: BaseMessage) -> str:
    """Serialize a message to the JSON text stored in the database.

    Raises:
        TypeError: `message` is not a message, or holds a value that cannot be stored.
        ValueError: the message type cannot be stored (`RemoveMessage`, unknown types).
    """
    if not isinstance(message, BaseMessage):
        raise TypeError(f"messages: expected BaseMessage instances, got {type(message).__name__}")
    if message.type not in STORABLE_TYPES:
        raise ValueError(f"messages: message type {message.type!r} cannot be stored")
    try:
        return _encode(message)
    except RecursionError:
        raise ValueError(
            f"messages: a {message.type} message is nested too deeply to be stored"
        ) from None


def _encode(message: BaseMessage) -> str:
    try:
        data = _prepare(message_to_dict(message))
    except _Unstorable as e:
        what = type(e.value).__name__
        raise TypeError(
            f"messages: value of type {what} at message{e.path} cannot be stored; convert it "
            "to JSON data (dict, list, str, int, float, bool, None), datetime, bytes, UUID, "
            "Decimal or set first"
        ) from None
    try:
        return orjson.dumps(data).decode("utf-8")
    except (orjson.JSONEncodeError, UnicodeDecodeError):
        # lone surrogates cannot be UTF-8: \u escapes keep them (lossless)
        return json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def decode_message(body: str | bytes) -> BaseMessage:
    """Rebuild a message from its stored JSON text.

    Raises:
        ValueError: the text is not a stored message.
    """
    try:
        if TAG in (body if isinstance(body, str) else body.decode("utf-8")):
            data = json.loads(body, object_hook=_revive)
        else:
            try:
                data = orjson.loads(body)
            except orjson.JSONDecodeError:  # lone surrogates as \u escapes: the slow parser
                data = json.loads(body)
        return messages_from_dict([data])[0]
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as e:
        # a hostile or corrupted row: whatever the parser or pydantic tripped on, one error type
        raise ValueError(f"stored message cannot be decoded: {e}") from e


def message_text(message: BaseMessage) -> str:
    """Plain text of a message for the searchable `content_text` column (NUL removed)."""
    try:
        text = str(message.text)
    except Exception:  # a malformed content block must not prevent storing the message
        text = ""
    if message.type in ("ai", "AIMessageChunk") and getattr(message, "tool_calls", None):
        names = " ".join(tc.get("name", "") for tc in message.tool_calls)  # type: ignore[attr-defined]
        text = f"{text} [tool calls: {names}]".strip()
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: the body keeps them, the search text cannot
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text
