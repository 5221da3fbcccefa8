"""The running summary: its record, the summarizer prompt and the size cap.

The record is a `dict` of JSON primitives (`summary`, `upto_index`: the position among
non-system messages of the last summarized one, `upto_id`: its id, and counts); it survives
`LANGGRAPH_STRICT_MSGPACK=true` and a JSON column.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    get_buffer_string,
)

from ..messages.counting import TokenCounter
from ..validation import INT64_MAX, check_int
from .trimming import largest

SUMMARY_VERSION = 1

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You maintain the running summary of a conversation between a user and an AI assistant "
    "(with tool calls). Merge the new messages into the previous summary and return only the "
    "updated summary: facts, decisions, the user's goals and preferences, open questions, and "
    "tool results still needed later. Keep what matters from the previous summary. Write plain "
    "text, at most {max_tokens} tokens."
)

COMPACTION_INSTRUCTIONS = (
    "You maintain the running summary of a conversation between a user and an AI assistant. "
    "The summary below has grown past its size limit. Rewrite it shorter, at most {max_tokens} "
    "tokens: keep the newest information, the decisions, the user's goals and preferences and "
    "the open questions; condense or drop what is oldest and least needed later. Return only "
    "the summary, as plain text."
)

SUMMARY_SHORTENED_MARKER = (
    "[...the oldest part of this summary is left out of this call to fit the context window]\n"
)
"""Starts a summary sent shortened for one model call (its newest part is kept)."""

SUMMARY_DROPPED_MARKER = "[...the oldest part of the summary was dropped to keep it in its size]\n"
"""Starts a stored summary whose oldest part was dropped (no summarizer could shorten it)."""

_SUMMARY_HEADER = "Summary of the earlier conversation:"


def new_record(
    summary: str,
    upto_index: int,
    upto_id: str | None,
    summary_tokens: int,
    previous: dict[str, Any] | None,
    newly_summarized: int,
) -> dict[str, Any]:
    """A summary record (JSON primitives only)."""
    prev = previous or {}
    return {
        "version": SUMMARY_VERSION,
        "summary": summary,
        "upto_id": upto_id,
        "upto_index": upto_index,
        "summary_tokens": summary_tokens,
        "messages_summarized": int(prev.get("messages_summarized", 0)) + newly_summarized,
        "updates": int(prev.get("updates", 0)) + 1,
        "compactions": int(prev.get("compactions", 0)),
    }


def compacted_record(
    record: dict[str, Any], summary: str, summary_tokens: int, by_summarizer: bool
) -> dict[str, Any]:
    """`record` with its summary shortened (same watermark); `by_summarizer` counts an update."""
    return {
        **record,
        "summary": summary,
        "summary_tokens": summary_tokens,
        "updates": int(record.get("updates", 0)) + int(by_summarizer),
        "compactions": int(record.get("compactions", 0)) + 1,
    }


_COUNTS = ("summary_tokens", "messages_summarized", "updates", "compactions", "upto_seq")


def load_record(value: Any, name: str = "summary") -> dict[str, Any] | None:
    """Validate a record (a dict, its JSON text, or `None`).

    Raises:
        TypeError: not a dict (nor JSON text of one).
        ValueError: no `summary` text, or a position or count that is not an int in its
            range (`upto_index` from -1, the counts from 0, both to `INT64_MAX`; `bool`,
            NaN and infinities refused); the message names the field.
    """
    if value is None:
        return None
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise ValueError(f"{name}: not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise TypeError(f"{name}: expected a summary record dict, got {type(value).__name__}")
    if not isinstance(value.get("summary"), str):
        raise ValueError(f"{name}: the record has no 'summary' text")
    _field(value.get("upto_index"), f"{name}['upto_index']", -1)
    for key in _COUNTS:
        if value.get(key) is not None:
            _field(value[key], f"{name}[{key!r}]", 0)
    if value.get("upto_id") is not None and not isinstance(value["upto_id"], str):
        raise ValueError(f"{name}: 'upto_id' must be a string or null")
    return value


def _field(value: Any, name: str, low: int) -> None:
    try:
        check_int(value, name, low=low, high=INT64_MAX)
    except TypeError as e:  # a str or null where a number belongs: bad data, not a bad call
        raise ValueError(str(e)) from None


def dump_record(record: dict[str, Any] | None) -> str | None:
    """The record as compact JSON text (for a database column)."""
    return None if record is None else json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def find_watermark(conv: Sequence[BaseMessage], record: dict[str, Any] | None) -> int | None:
    """Index of the last summarized message in `conv` (-1 before any), or `None` if the
    watermark is not in `conv` (a stale record). `upto_index` is checked against `upto_id`."""
    if record is None:
        return -1
    index, mid = int(record["upto_index"]), record.get("upto_id")
    if index >= len(conv):
        index = len(conv) - 1 if mid is not None else -2
    if index < -1:
        return None
    if mid is None or (index >= 0 and conv[index].id == mid):
        return index
    for i in range(len(conv) - 1, -1, -1):
        if conv[i].id == mid:
            return i
    return None


def render_summary(
    system: SystemMessage | None, summary: str | None, placement: str
) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """Append the summary to the system message, or (`"message"`) make it a tagged note."""
    if not summary:
        return system, []
    if placement == "message":
        note = HumanMessage(
            f"{_SUMMARY_HEADER}\n{summary}", additional_kwargs={"lc_source": "summarization"}
        )
        return system, [note]
    block = f"<conversation_summary>\n{_SUMMARY_HEADER}\n{summary}\n</conversation_summary>"
    if system is None:
        return SystemMessage(block), []
    if isinstance(system.content, str):
        text = f"{system.content}\n\n{block}" if system.content else block
        return system.model_copy(update={"content": text}), []
    content = [*system.content, {"type": "text", "text": block}]
    return system.model_copy(update={"content": content}), []


def render_messages(messages: Sequence[BaseMessage]) -> str:
    """New material as text for the summarizer (tool traffic as XML, never raw tool blocks)."""
    return get_buffer_string(messages, format="xml")


def summarizer_prompt(
    previous: str | None, new_text: str, instructions: str, max_tokens: int
) -> list[BaseMessage]:
    """Messages for one summarizer call; the previous summary is passed whole."""
    body = (
        f"<previous_summary>\n{previous or '(none yet)'}\n</previous_summary>\n\n"
        f"<new_messages>\n{new_text}\n</new_messages>\n\n"
        "Return the updated summary."
    )
    return [
        SystemMessage(instructions.replace("{max_tokens}", str(max_tokens))),
        HumanMessage(body),
    ]


def text_tokens(counter: TokenCounter, text: str, *, cache: bool = True) -> int:
    """Tokens of `text` alone (message overhead removed); `cache=False` for one-off texts."""
    count = counter if cache else counter.uncached
    return max(0, count(HumanMessage(text)) - counter(HumanMessage("")))


_LEAST_KEPT = 24  # fewest characters of a summary worth sending shortened

_BREAKS = ("\n", "。", ". ", "！", "？", "; ", "；")


def _snap(text: str, start: int) -> int:
    """`start` moved just past a nearby line or sentence break (within a quarter of the rest)."""
    reach = start + max(0, (len(text) - start) // 4)
    best = None
    for sep in _BREAKS:
        i = text.find(sep, start, reach)
        if i != -1 and (best is None or i + len(sep) < best):
            best = i + len(sep)
            if sep == "\n":
                return best
    return start if best is None else best


def newest_part(text: str, marker: str, fits: Callable[[str], bool]) -> str | None:
    """`text` if it fits, else `marker` and the longest end of `text` that fits (a summary's
    end is its newest part); `None` if less than `_LEAST_KEPT` characters fit."""
    if fits(text):
        return text
    body = text[len(marker) :] if text.startswith(marker) else text
    if not fits(marker):
        return None
    lo = len(body) - largest(len(body), lambda k: fits(marker + body[len(body) - k :]))
    least = min(len(body), _LEAST_KEPT)
    if len(body) - lo < least:
        return None  # not even a sentence's worth of the text fits beside the marker
    snapped = _snap(body, lo)
    if snapped != lo and (len(body) - snapped < least or not fits(marker + body[snapped:])):
        snapped = lo
    return marker + body[snapped:]


def cap_text(counter: TokenCounter, text: str, max_tokens: int, marker: str) -> str:
    """`text` cut to `max_tokens` tokens with `marker` appended, if it is longer."""
    if text_tokens(counter, text) <= max_tokens:
        return text
    kept = largest(len(text), lambda k: text_tokens(counter, text[:k] + marker) <= max_tokens)
    return text[:kept] + marker
