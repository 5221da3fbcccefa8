"""Where a window of recent messages may start without breaking a tool call."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from .checks import check_messages

TOOL_RESULT_TYPES = frozenset({"tool", "function", "ToolMessageChunk", "FunctionMessageChunk"})
"""Message `type` values that answer a tool (or legacy function) call."""


def orphan_prefix_length(types: Sequence[str]) -> int:
    """How many leading entries of `types` are tool results (to drop from a window's start).

    Raises:
        TypeError: `types` is a single `str` (pass a list of message types).
    """
    if isinstance(types, str):
        raise TypeError("types: expected a list of message types, got str")
    n = 0
    while n < len(types) and types[n] in TOOL_RESULT_TYPES:
        n += 1
    return n


def drop_leading_orphans(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Drop tool results at the start of a window whose tool call was cut off (a suffix of a
    conversation can only break a tool-call pair at its start).

    Raises:
        TypeError: `messages` is not a list of messages (a `str` is refused, not split).
    """
    items = check_messages(messages)
    return items[orphan_prefix_length([m.type for m in items]) :]
