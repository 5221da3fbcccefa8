"""The check of a list of messages: a `str` is refused, not split into one message per
character (as `convert_to_messages("hi")` does), and every item is a `BaseMessage`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage


def check_message_list(value: Any, name: str = "messages") -> None:
    """Refuse what is not a list of messages at all, without looking at the items."""
    if isinstance(value, str | bytes | bytearray | Mapping | BaseMessage) or not isinstance(
        value, Iterable
    ):
        hint = " (for a single one, pass [message])" if isinstance(value, str | BaseMessage) else ""
        raise TypeError(f"{name}: expected a list of messages, got {type(value).__name__}{hint}")


def check_messages(value: Any, name: str = "messages") -> list[BaseMessage]:
    """`value` as a new list of messages.

    Raises:
        TypeError: a `str`, `bytes`, mapping, single message or non-iterable, or an item
            that is not a `BaseMessage` (the message names its index and type).
    """
    check_message_list(value, name)
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, BaseMessage):
            raise TypeError(f"{name}[{i}]: expected a BaseMessage, got {type(item).__name__}")
    return items
