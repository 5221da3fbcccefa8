"""Trimming a conversation to a budget, walking back from the end: a tool call and its results
are kept or dropped together, and the turn in progress is always kept (its tool results
shortened if it alone is over the budget)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from ..messages.counting import TokenCounter, count_characters, resolve_message_counter
from ..validation import check_positive
from .structure import (
    ContextBudgetError,
    ContextStructureError,
    call_ids,
    check_structure,
    is_tool_result,
    merge_system,
    plain_text,
    result_id,
)

CutMode = Literal["turn", "unit"]
"""Where older history may be cut: only before a human message (`"turn"`, the default) or
between any two tool-call units (`"unit"`)."""

TRUNCATION_MARKER = "\n[... {removed} of {total} characters of this tool result were removed to fit the context window]"
"""Appended to a tool result shortened to fit the budget."""

_LEGACY = "\x00function_call"  # open marker for legacy FunctionMessage results


SHORTENED_KEY = "shortened_to_fit"
"""`response_metadata` key of a tool result shortened to fit (`{"removed", "total"}`)."""


def is_shortened(message: BaseMessage) -> bool:
    """A shortened copy of a tool result (counted uncached: it shares the original's id)."""
    return SHORTENED_KEY in message.response_metadata


@dataclass
class _Meter:
    label: str
    unit: str
    fn: Callable[[BaseMessage], int]
    limit: int
    used: int = 0
    fixed: int = 0  # messages pre-loaded (the system message, a summary note)

    def cost(self, message: BaseMessage) -> int:
        if is_shortened(message):
            return int(getattr(self.fn, "uncached", self.fn)(message))
        return self.fn(message)


def count_input(
    counter: TokenCounter, messages: Sequence[BaseMessage], *, cache: bool = True
) -> int:
    """`counter.count(messages)`, shortened copies (every message without `cache`) uncached."""
    fresh = counter.uncached
    return counter.reply_overhead + sum(
        fresh(m) if not cache or is_shortened(m) else counter(m) for m in messages
    )


@dataclass(frozen=True)
class Limits:
    """Budgets of one whole model input (system message included); `None` is not applied."""

    max_tokens: int | None = None
    max_messages: int | None = None
    max_chars: int | None = None
    counter: TokenCounter | None = None

    @classmethod
    def make(
        cls,
        max_tokens: int | None,
        max_messages: int | None,
        max_chars: int | None,
        token_counter: Any,
    ) -> Limits:
        """Validated limits; at least one must be given."""
        budgets = {"max_tokens": max_tokens, "max_messages": max_messages, "max_chars": max_chars}
        for name, value in budgets.items():
            if value is not None:
                check_positive(value, name)
        if max_tokens is None and max_messages is None and max_chars is None:
            raise ValueError("max_tokens: give at least one of max_tokens, max_messages, max_chars")
        counter = resolve_message_counter(token_counter) if max_tokens is not None else None
        return cls(max_tokens, max_messages, max_chars, counter)

    def meters(self, fixed: Sequence[BaseMessage], *, check: bool = True) -> list[_Meter]:
        """One meter per limit, pre-loaded with `fixed`; with `check`, raise if it is over."""
        out = []
        for label, unit, fn, limit in (
            ("max_tokens", "tokens", self.counter, self.max_tokens),
            ("max_messages", "messages", resolve_message_counter("messages"), self.max_messages),
            ("max_chars", "characters", count_characters, self.max_chars),
        ):
            if limit is not None and fn is not None:
                used = sum(fn(m) for m in fixed) + getattr(fn, "reply_overhead", 0)
                out.append(_Meter(label, unit, fn, limit, used, len(fixed)))
        for m in out if check else ():
            if m.used > m.limit:
                priming = " (with the reply priming)" if m.unit == "tokens" else ""
                text = (
                    f"the system message is too large: it needs {m.used} {m.unit}{priming} "
                    f"alone, {m.used - m.limit} over the budget"
                )
                raise _budget_error(m, "system message", text, m.used)
        return out

    def fits(
        self, fixed: Sequence[BaseMessage], rest: Sequence[BaseMessage], *, cached: bool = False
    ) -> bool:
        """Whether `fixed` (counted uncached unless `cached`) and `rest` fit every limit."""
        meters = self.meters((), check=False)
        for m in meters:
            count = m.fn if cached else getattr(m.fn, "uncached", m.fn)
            m.used += sum(count(x) for x in fixed)
        return _fits(meters, rest)


def _close(open_ids: set[str], message: BaseMessage) -> None:
    """Track, walking backwards, the tool results whose call is not seen yet."""
    if is_tool_result(message):
        rid = result_id(message)
        open_ids.add(_LEGACY if rid is None else rid)
    elif isinstance(message, AIMessage):
        open_ids.difference_update(call_ids(message))
        if message.additional_kwargs.get("function_call"):
            open_ids.discard(_LEGACY)


def turn_start(conv: Sequence[BaseMessage], lo: int = 0) -> int:
    """Start of the turn in progress: the latest human message that is a valid cut (else the
    latest valid cut)."""
    open_ids: set[str] = set()
    latest_valid: int | None = None
    for i in range(len(conv) - 1, lo - 1, -1):
        m = conv[i]
        _close(open_ids, m)
        if not open_ids and not is_tool_result(m):
            if m.type == "human":
                return i
            if latest_valid is None:
                latest_valid = i
    if latest_valid is None:
        raise ContextStructureError(
            "messages: every tool result in the window lacks its tool call (orphan tool results)"
        )
    return latest_valid


def largest(n: int, ok: Callable[[int], bool]) -> int:
    """The largest `k` in `0..n` with `ok(k)` (`ok` true at 0, monotone), by bisection."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _shortened(message: BaseMessage, text: str, cap: int) -> BaseMessage:
    removed = len(text) - cap
    marker = TRUNCATION_MARKER.format(removed=removed, total=len(text))
    meta = {**message.response_metadata, SHORTENED_KEY: {"removed": removed, "total": len(text)}}
    return message.model_copy(update={"content": text[:cap] + marker, "response_metadata": meta})


def _fits(meters: list[_Meter], messages: Sequence[BaseMessage]) -> bool:
    return all(m.used + _sum(m, messages) <= m.limit for m in meters)


def shorten_tool_results(
    messages: Sequence[BaseMessage], meters: list[_Meter]
) -> list[BaseMessage] | None:
    """Cut every tool result to one common length, the largest that fits the meters, with
    `TRUNCATION_MARKER` (`None` if even empty results do not fit)."""
    texts = {i: plain_text(m) for i, m in enumerate(messages) if is_tool_result(m)}
    if not texts:
        return None

    def build(cap: int) -> list[BaseMessage]:
        return [
            _shortened(m, texts[i], cap) if i in texts and len(texts[i]) > cap else m
            for i, m in enumerate(messages)
        ]

    if not _fits(meters, build(0)):
        return None
    return build(largest(max(map(len, texts.values())), lambda cap: _fits(meters, build(cap))))


def minimal_turn(tail: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The turn in progress as small as it may become: every tool result cut to its marker."""
    return [
        _shortened(m, plain_text(m), 0) if is_tool_result(m) and plain_text(m) else m for m in tail
    ]


def _sum(m: _Meter, messages: Sequence[BaseMessage]) -> int:
    return sum(m.cost(x) for x in messages)


def _turn_error(m: _Meter, sent: Sequence[BaseMessage], shortened: bool) -> ContextBudgetError:
    """Which part of `sent` (the smallest turn in progress) is too large for `m`, by how much."""
    need = m.used + _sum(m, sent)
    human = next((x for x in sent if x.type == "human"), None)
    h = m.cost(human) if human is not None else 0
    who = ["the system message"] if m.fixed else []
    if m.unit == "tokens":
        who.append("the reply priming")
    fixed = f", plus {m.used} for {' and '.join(who)}" if m.used and who else ""
    total = f"{fixed}: {need} in all, {need - m.limit} over the budget"
    part = "turn in progress"
    if m.unit == "messages":
        text = f"the turn in progress has {len(sent)} message(s){total}"
    elif human is not None and (m.used + h > m.limit or len(sent) == 1):
        part = "latest human message"
        text = (
            f"the latest human message is too large: it needs {h} {m.unit}{total} (shorten the "
            f"message or raise {m.label})"
        )
    else:
        calls = [x for x in sent if call_ids(x)]
        results = [x for x in sent if is_tool_result(x)]
        rest = [x for x in sent if x is not human and not call_ids(x) and not is_tool_result(x)]
        how = " (shortened to their markers)" if shortened else ""
        parts = [f"the latest human message {h}"] if human is not None else []
        for group, label in (
            (calls, "AI message(s) with tool calls"),
            (results, f"tool result(s){how}"),
            (rest, "other message(s)"),
        ):
            if group:
                parts.append(f"{len(group)} {label} {_sum(m, group)}")
        text = f"the turn in progress is too large: {', '.join(parts)} {m.unit}{total}"
    return _budget_error(m, part, text, need)


def _budget_error(m: _Meter, part: str, text: str, need: int) -> ContextBudgetError:
    return ContextBudgetError(
        f"{m.label}={m.limit}: {text}", part=part, needed=need, limit=m.limit, unit=m.unit
    )


def require_turn(
    meters: list[_Meter], tail: Sequence[BaseMessage], *, shorten: bool = True
) -> None:
    """Raise `ContextBudgetError` unless `tail` fits (tool results shortened if `shorten`)."""
    sent = minimal_turn(tail) if shorten else list(tail)
    for m in meters:
        if m.used + _sum(m, sent) > m.limit:
            raise _turn_error(m, sent, shorten and m.unit != "messages")


def select_window(
    conv: Sequence[BaseMessage],
    meters: list[_Meter],
    *,
    lo: int = 0,
    cut: CutMode = "turn",
    shorten: bool = True,
) -> list[BaseMessage]:
    """The longest valid suffix of `conv[lo:]` that fits the meters: the turn in progress
    (shortened if needed), then older messages while they fit, up to the last valid cut."""
    n = len(conv)
    if n <= lo:
        return []
    pinned = turn_start(conv, lo)
    tail: list[BaseMessage] = list(conv[pinned:])
    over = [m for m in meters if m.used + _sum(m, tail) > m.limit]
    if over:
        tried = shorten and all(m.label != "max_messages" for m in over)
        short = shorten_tool_results(tail, meters) if tried else None
        if short is None:
            require_turn(meters, tail, shorten=tried)  # raises: the turn cannot fit
            raise AssertionError("require_turn did not raise")
        tail = short
    for m in meters:
        m.used += _sum(m, tail)
    best = pinned
    open_ids: set[str] = set()
    for j in range(pinned - 1, lo - 1, -1):
        msg = conv[j]
        costs = [m.cost(msg) for m in meters]
        if any(m.used + c > m.limit for m, c in zip(meters, costs, strict=True)):
            break
        for m, c in zip(meters, costs, strict=True):
            m.used += c
        _close(open_ids, msg)
        if (
            not open_ids
            and not is_tool_result(msg)
            and (cut == "unit" or msg.type == "human" or j == lo)
        ):
            best = j
    return list(conv[best:pinned]) + tail


def fail_closed(messages: list[BaseMessage]) -> list[BaseMessage]:
    """`messages`, or a `ContextStructureError` if they break a structural rule."""
    problems = check_structure(messages)
    if problems:
        raise ContextStructureError("messages: invalid model input: " + "; ".join(problems))
    return messages


def trim_context(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int | None = None,
    token_counter: Any = None,
    max_messages: int | None = None,
    max_chars: int | None = None,
    system_prompt: SystemMessage | str | None = None,
    cut: CutMode = "turn",
    shorten_tool_results: bool = True,
) -> list[BaseMessage]:
    """Trim `messages` to a budget for one model call, keeping the structure valid.

    Args:
        messages: the conversation, oldest first (system messages anywhere are merged into one
            at index 0).
        max_tokens: token budget of the whole input, system message and reply priming included.
        token_counter: counter spec for `max_tokens` (default: approximate; `"gpt-4o"`
            for exact OpenAI counts; see
            [`resolve_message_counter`][langmem_sqlite.resolve_message_counter]).
        max_messages: message budget, system message included.
        max_chars: character budget, system message included.
        system_prompt: a system prompt placed first (merged with system messages found).
        cut: `"turn"` cuts older history only before human messages; `"unit"` between any
            tool-call units.
        shorten_tool_results: allow shortening tool results of the turn in progress when it
            alone is over the budget.

    Returns:
        A new list: at most one system message (index 0), then the most recent messages that fit.

    Raises:
        ValueError: a budget that is not an int from 1 to `INT64_MAX` (`bool`, floats, NaN
            and infinities refused; the message names it), or none given.
        TypeError: `messages` is not a list of messages (a `str` is refused, not split).
        ContextBudgetError: the system message or the turn in progress alone cannot fit.
        ContextStructureError: the input has orphan tool results or dangling tool calls in the
            part that would be kept.
    """
    if cut not in ("turn", "unit"):
        raise ValueError(f"cut: expected 'turn' or 'unit', got {cut!r}")
    if not isinstance(shorten_tool_results, bool):
        raise TypeError(
            f"shorten_tool_results: expected a bool, got {type(shorten_tool_results).__name__}"
        )
    limits = Limits.make(max_tokens, max_messages, max_chars, token_counter)
    system, conv = merge_system(messages, system_prompt)
    fixed = [system] if system is not None else []
    window = select_window(conv, limits.meters(fixed), cut=cut, shorten=shorten_tool_results)
    out = fixed + window
    if not out:
        raise ValueError("messages: nothing to send (no system message and no conversation)")
    return fail_closed(out)
