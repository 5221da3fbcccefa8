"""The structural rules of a model input: not empty, at most one system message (first), no
leading tool result, no orphan tool result, no dangling tool call."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from ..messages.checks import check_messages
from ..messages.windows import TOOL_RESULT_TYPES


class ContextBudgetError(ValueError):
    """The budget cannot be met without breaking a rule; the message says which part is too
    large and by how much.

    Attributes:
        part: `"system message"`, `"latest human message"` or `"turn in progress"`.
        needed: what the input needs at least (in `unit`), with the parts that must be sent.
        limit: the budget (`max_tokens`, `max_messages` or `max_chars` value).
        unit: `"tokens"`, `"messages"` or `"characters"`.
    """

    def __init__(
        self,
        message: str,
        *,
        part: str | None = None,
        needed: int | None = None,
        limit: int | None = None,
        unit: str | None = None,
    ) -> None:
        super().__init__(message)
        self.part = part
        self.needed = needed
        self.limit = limit
        self.unit = unit

    @property
    def over(self) -> int | None:
        """By how much the smallest possible input exceeds the budget."""
        return None if self.needed is None or self.limit is None else self.needed - self.limit


class ContextStructureError(ValueError):
    """The messages break the structure a model input needs (orphan or dangling tool call)."""


def is_tool_result(message: BaseMessage) -> bool:
    """A `ToolMessage` (or legacy `FunctionMessage`), chunks included."""
    return message.type in TOOL_RESULT_TYPES


def call_ids(message: BaseMessage) -> list[str]:
    """Ids of the tool calls an AI message makes (structured or legacy raw ones)."""
    if not isinstance(message, AIMessage):
        return []
    ids = [str(tc["id"]) for tc in message.tool_calls if tc.get("id")]
    ids += [str(tc["id"]) for tc in message.invalid_tool_calls if tc.get("id")]
    if not ids:
        raw = message.additional_kwargs.get("tool_calls")
        if isinstance(raw, list):
            ids = [str(tc["id"]) for tc in raw if isinstance(tc, dict) and tc.get("id")]
    return ids


def result_id(message: BaseMessage) -> str | None:
    """The call id a tool result answers (`None` for legacy function results)."""
    return getattr(message, "tool_call_id", None)


def plain_text(message: BaseMessage) -> str:
    """The message's text: its content if a `str`, else the text of its blocks."""
    return message.content if isinstance(message.content, str) else message.text


def merge_system(
    messages: Sequence[BaseMessage], system: SystemMessage | str | None = None
) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """Split `messages` into one system message and the conversation.

    The system message holds `system` (the configured prompt), then the text of every
    `SystemMessage` in `messages`, joined by blank lines; a single one is returned as is.

    Raises:
        TypeError: `messages` is not a list of messages (a `str` is refused, not split).
    """
    if isinstance(system, str):
        system = SystemMessage(system)
    if system is not None and not isinstance(system, SystemMessage):
        raise TypeError(f"system_prompt: expected str or SystemMessage, got {type(system)}")
    items = check_messages(messages)
    found = [m for m in items if isinstance(m, SystemMessage)]
    conv = [m for m in items if not isinstance(m, SystemMessage)]
    parts = ([system] if system is not None else []) + found
    if not parts:
        return None, conv
    if len(parts) == 1:
        return parts[0], conv
    text = "\n\n".join(t for t in (plain_text(p) for p in parts) if t)
    return SystemMessage(text, id=parts[0].id), conv


def check_structure(messages: Sequence[BaseMessage], *, require_human: bool = False) -> list[str]:
    """The rules a model input breaks, as readable strings (empty list: valid).

    Args:
        messages: a model input.
        require_human: also require at least one human message.

    Raises:
        TypeError: `messages` is not a list of messages (a `str` is refused, not split).
    """
    messages = check_messages(messages)
    problems: list[str] = []
    if not messages:
        return ["empty input"]
    systems = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage)]
    if len(systems) > 1:
        problems.append(f"{len(systems)} system messages")
    if systems and systems[0] != 0:
        problems.append(f"system message at index {systems[0]}")
    conv = [m for m in messages if not isinstance(m, SystemMessage)]
    if conv and is_tool_result(conv[0]):
        problems.append("conversation starts on a tool result")
    pending: set[str] = set()
    for i, m in enumerate(messages):
        if is_tool_result(m):
            rid = result_id(m)
            if rid is not None and rid not in pending:
                problems.append(f"orphan tool result at index {i} ({rid})")
            pending.discard(rid)  # type: ignore[arg-type]
        else:
            pending.update(call_ids(m))
    if pending:
        problems.append(f"dangling tool calls (no result): {sorted(pending)}")
    if require_human and not any(m.type == "human" for m in conv):
        problems.append("no human message")
    return problems
