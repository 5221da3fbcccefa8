"""Token counting for messages (placeholder interface; the context-window work fills it in).

``resolve_message_counter(spec)`` turns a counter spec into a function ``message -> int``.
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.messages import BaseMessage

__all__ = ["MessageCounter", "count_approximately", "resolve_message_counter"]

MessageCounter = Callable[[BaseMessage], int]


def count_approximately(message: BaseMessage) -> int:
    """About four characters per token, plus a small per-message overhead."""
    return 3 + (len(str(message.content)) + 3) // 4


def resolve_message_counter(spec: str | MessageCounter | None) -> MessageCounter:
    """Return a per-message counter for ``spec`` (``None`` or ``"approximate"``, or a callable)."""
    if spec is None or spec == "approximate":
        return count_approximately
    if callable(spec):
        return spec
    raise ValueError(f"token_counter: unknown counter {spec!r}")
