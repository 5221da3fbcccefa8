"""`ContextPolicy`: the one object that turns a history into a model input, everywhere.

Before each model call: merge system content into one system message; if the messages not yet
summarized pass the trigger (tokens and/or messages, system prompt and summary included), fold
the oldest of them into the running summary with one summarizer call, down to ``keep``; then
trim what is left to the budget (:mod:`.trimming`). The full history is never modified.

The decision is written once as a generator that yields summarizer requests; :meth:`prepare`
and :meth:`aprepare` only differ in how they call the summarizer.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage, SystemMessage

from ..counting import TokenCounter, resolve_message_counter
from ..validation import check_positive
from .structure import call_ids, is_tool_result, merge_system
from .summary import (
    DEFAULT_SUMMARY_INSTRUCTIONS,
    cap_text,
    find_watermark,
    load_record,
    new_record,
    render_messages,
    render_summary,
    summarizer_prompt,
    text_tokens,
)
from .trimming import CutMode, Limits, _close, _Meter, _pinned_start, fail_closed, select_window

__all__ = ["MODEL_CONTEXT_WINDOWS", "ContextPolicy", "ContextResult"]

MODEL_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-": 1_048_576,
}
"""Context windows of known models, by name prefix (longest prefix wins). With ``model=``, the
default budget is the window minus a reply reserve (a quarter of it, at most 16,384 tokens)."""

_SUMMARY_MARKER = " [...summary cut to its size limit]"
_CHUNK_MARKER = "\n[...the rest of this part was too long for one summarizer call]"

SummaryPlacement = Literal["system", "message"]


@dataclass
class ContextResult:
    """What the policy decided for one model call.

    Attributes:
        messages: the model input (one system message first if any, then the window).
        summary: the new summary record if it changed in this call, else ``None``.
        record: the summary record in force after this call (new or previous).
        info: measurements: ``input_tokens`` (of ``messages``), ``kept`` (conversation messages
            sent), ``summarized`` (bool), ``summarizer_input_tokens``, ``summary_tokens``,
            ``summary_error`` (text, if the summarizer failed), ``seconds``.
    """

    messages: list[BaseMessage]
    summary: dict[str, Any] | None = None
    record: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Request:
    prompt: list[BaseMessage]


def _window_for(model: str) -> int | None:
    best = ""
    for prefix in MODEL_CONTEXT_WINDOWS:
        if model.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return MODEL_CONTEXT_WINDOWS[best] if best else None


def _opt_positive(value: int | None, name: str) -> int | None:
    return None if value is None else check_positive(value, name)


class ContextPolicy:
    """How a history becomes a model input: budget, counting, trimming and summarization.

    Args:
        max_tokens: hard budget of the model input, system message, summary and reply priming
            included. Defaults from ``model`` when its window is known.
        model: a model name used for defaults: the exact counter (OpenAI names; others count
            approximately) and the budget (see :data:`MODEL_CONTEXT_WINDOWS`). An exact
            counter loads its tiktoken encoding here (see
            :class:`~langmem_sqlite.counting.EncodingUnavailableError` when offline).
        token_counter: counter spec (``"gpt-4o"``, ``"approximate"``, ``"messages"``, a
            callable...); default: exact for a known OpenAI ``model``, else approximate.
        max_messages: optional message budget (system message included).
        max_chars: optional character budget.
        system_prompt: the system prompt; system messages in the history are merged after it.
        summarizer: a chat model (any ``Runnable`` taking messages) for the running summary;
            without one, the policy only trims.
        trigger_tokens: summarize when system + summary + unsummarized messages exceed this
            (default: ``max_tokens``).
        trigger_messages: or when more than this many messages are not summarized yet.
        keep_tokens: tokens of recent messages kept verbatim after summarizing (default:
            30% of ``trigger_tokens``); must be below ``trigger_tokens`` (hysteresis).
        keep_messages: optional message count kept verbatim; below ``trigger_messages``.
        max_summary_tokens: cap of the summary (enforced; default ``max_tokens // 8``, at most
            2,000).
        max_summarizer_input_tokens: budget of one summarizer call (default: ``trigger_tokens``
            plus ``max_summary_tokens``); older material beyond it is summarized in later passes.
        summary_placement: ``"system"`` (appended to the one system message) or ``"message"``
            (a leading human message tagged ``lc_source="summarization"``).
        summary_instructions: the summarizer's instructions (``{max_tokens}`` is filled in).
        cut: ``"turn"`` (cut only before human messages) or ``"unit"`` (between tool units).

    Raises:
        ValueError: a missing budget, or ``keep >= trigger``.
        EncodingUnavailableError: an exact counter whose encoding cannot be loaded.
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        model: str | None = None,
        token_counter: Any = None,
        max_messages: int | None = None,
        max_chars: int | None = None,
        system_prompt: str | SystemMessage | None = None,
        summarizer: Any = None,
        trigger_tokens: int | None = None,
        trigger_messages: int | None = None,
        keep_tokens: int | None = None,
        keep_messages: int | None = None,
        max_summary_tokens: int | None = None,
        max_summarizer_input_tokens: int | None = None,
        summary_placement: SummaryPlacement = "system",
        summary_instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
        cut: CutMode = "turn",
    ) -> None:
        if model is not None and not isinstance(model, str):
            raise TypeError(f"model: expected a model name, got {type(model).__name__}")
        if max_tokens is None and model is not None and (window := _window_for(model)):
            max_tokens = window - min(16_384, window // 4)
        if (
            token_counter is None
            and model is not None
            and model.startswith(("gpt-", "o1", "o3", "o4"))
        ):
            token_counter = model
        if max_tokens is None and max_messages is None and max_chars is None:
            raise ValueError("max_tokens: required (or a known model=, max_messages, max_chars)")
        if summary_placement not in ("system", "message"):
            raise ValueError(
                f"summary_placement: expected 'system' or 'message', got {summary_placement!r}"
            )
        if cut not in ("turn", "unit"):
            raise ValueError(f"cut: expected 'turn' or 'unit', got {cut!r}")
        if system_prompt is not None and not isinstance(system_prompt, str | SystemMessage):
            raise TypeError("system_prompt: expected str or SystemMessage")
        if not isinstance(summary_instructions, str):
            raise TypeError("summary_instructions: expected str")
        self.counter: TokenCounter = resolve_message_counter(token_counter)
        self.counter.load()  # an exact counter's encoding, now: a clear error if offline
        self.limits = Limits.make(max_tokens, max_messages, max_chars, self.counter)
        self._text_counter = (
            self.counter if self.counter.name != "messages" else resolve_message_counter(None)
        )
        self.system_prompt = system_prompt
        self.summarizer = summarizer
        self.summary_placement = summary_placement
        self.summary_instructions = summary_instructions
        self.cut: CutMode = cut
        self._setup_summary(
            max_tokens,
            trigger_tokens,
            trigger_messages,
            keep_tokens,
            keep_messages,
            max_summary_tokens,
            max_summarizer_input_tokens,
        )

    def _setup_summary(
        self,
        max_tokens: int | None,
        trigger_tokens: int | None,
        trigger_messages: int | None,
        keep_tokens: int | None,
        keep_messages: int | None,
        max_summary_tokens: int | None,
        max_summarizer_input_tokens: int | None,
    ) -> None:
        """Validate the summarization settings and fill in their defaults."""
        self.trigger_tokens = _opt_positive(trigger_tokens, "trigger_tokens")
        self.trigger_messages = _opt_positive(trigger_messages, "trigger_messages")
        self.keep_tokens = _opt_positive(keep_tokens, "keep_tokens")
        self.keep_messages = _opt_positive(keep_messages, "keep_messages")
        given = (trigger_tokens, trigger_messages, keep_tokens, keep_messages)
        if self.summarizer is None:
            if any(v is not None for v in given):
                raise ValueError("summarizer: trigger/keep settings need a summarizer model")
        elif not (hasattr(self.summarizer, "invoke") and hasattr(self.summarizer, "ainvoke")):
            raise TypeError("summarizer: expected a chat model or Runnable")
        elif self.trigger_tokens is None and self.trigger_messages is None:
            if max_tokens is None:
                raise ValueError("trigger_tokens: required with a summarizer and no max_tokens")
            self.trigger_tokens = max_tokens
        base = max_tokens or self.trigger_tokens or 4_000
        self.max_summary_tokens = check_positive(
            max_summary_tokens
            if max_summary_tokens is not None
            else max(64, min(2_000, base // 8)),
            "max_summary_tokens",
        )
        if self.summarizer is not None and self.trigger_tokens is not None:
            if self.keep_tokens is None:
                self.keep_tokens = max(1, self.trigger_tokens * 3 // 10)
            if self.keep_tokens < self.trigger_tokens <= self.keep_tokens + self.max_summary_tokens:
                warnings.warn(
                    f"keep_tokens + max_summary_tokens ({self.keep_tokens} + "
                    f"{self.max_summary_tokens}) reach trigger_tokens={self.trigger_tokens}: "
                    "the summarizer may run on almost every call",
                    stacklevel=3,
                )
        self._check_hysteresis()
        if self.summarizer is not None and max_tokens and self.max_summary_tokens >= max_tokens:
            raise ValueError(
                f"max_summary_tokens: must be below max_tokens ({self.max_summary_tokens} >= "
                f"{max_tokens})"
            )
        self.max_summarizer_input_tokens = check_positive(
            max_summarizer_input_tokens
            if max_summarizer_input_tokens is not None
            else (self.trigger_tokens or base) + self.max_summary_tokens,
            "max_summarizer_input_tokens",
        )
        if (
            self.summarizer is not None
            and self.max_summarizer_input_tokens <= self.max_summary_tokens + 200
        ):
            raise ValueError(
                "max_summarizer_input_tokens: must leave room for new material beside the "
                f"previous summary (> max_summary_tokens + 200 = {self.max_summary_tokens + 200})"
            )

    def _check_hysteresis(self) -> None:
        pairs = (
            (self.keep_tokens, self.trigger_tokens, "keep_tokens", "trigger_tokens"),
            (self.keep_messages, self.trigger_messages, "keep_messages", "trigger_messages"),
        )
        for keep, trigger, kname, tname in pairs:
            if keep is not None and trigger is not None:
                if keep >= trigger:
                    raise ValueError(
                        f"{kname}: must be below {tname} ({keep} >= {trigger}); otherwise the "
                        "summarizer would run on almost every call"
                    )
                if keep > trigger * 0.75:
                    warnings.warn(
                        f"{kname}={keep} is close to {tname}={trigger}: the summarizer will run "
                        f"about every {max(1, trigger - keep)} {tname.split('_')[1]}",
                        stacklevel=4,
                    )

    # -- the decision, written once ---------------------------------------------------------

    def _plan(
        self, messages: Sequence[BaseMessage], summary: Any
    ) -> Generator[_Request, Any, ContextResult]:
        started = time.perf_counter()
        if isinstance(messages, BaseMessage) or not isinstance(messages, Sequence):
            raise TypeError("messages: expected a sequence of BaseMessage")
        record = load_record(summary)
        system, conv = merge_system(messages, self.system_prompt)
        upto = find_watermark(conv, record)
        info: dict[str, Any] = {"summarized": False, "summarizer_input_tokens": 0}
        if upto is None:
            info["summary_error"] = "summary watermark not found in the history; ignored"
            record, upto = None, -1
        new: dict[str, Any] | None = None
        lo = upto + 1
        if self.summarizer is not None and self._triggered(system, record, conv, lo):
            chunk = self._chunk(conv, lo, self._keep_cut(conv, lo))
            if chunk > lo:
                prompt = self._prompt(record, conv[lo:chunk])
                info["summarizer_input_tokens"] = self._text_counter.count(prompt)
                reply = yield _Request(prompt)
                new = self._absorb(reply, record, conv, lo, chunk, info)
                if new is not None:
                    record, lo = new, chunk
        summary_text = record["summary"] if record else None
        system, notes = render_summary(system, summary_text, self.summary_placement)
        fixed = ([system] if system is not None else []) + notes
        window = select_window(conv, self.limits.meters(fixed), lo=lo, cut=self.cut)
        out = fail_closed(fixed + window) if fixed or window else _nothing()
        info.update(
            input_tokens=self.counter.count(out),
            kept=len(window),
            summary_tokens=record["summary_tokens"] if record else 0,
            seconds=time.perf_counter() - started,
        )
        return ContextResult(out, new, record, info)

    def _absorb(
        self,
        reply: Any,
        record: dict[str, Any] | None,
        conv: Sequence[BaseMessage],
        lo: int,
        chunk: int,
        info: dict[str, Any],
    ) -> dict[str, Any] | None:
        """The new record from the summarizer's reply (capped), or ``None`` on failure."""
        text = _reply_text(reply)
        if text is None:
            failed = isinstance(reply, BaseException)
            info["summary_error"] = repr(reply) if failed else "summarizer returned no text"
            return None
        text = cap_text(self._text_counter, text, self.max_summary_tokens, _SUMMARY_MARKER)
        tokens = text_tokens(self._text_counter, text)
        info["summarized"] = True
        return new_record(text, chunk - 1, conv[chunk - 1].id, tokens, record, chunk - lo)

    def _unsummarized_meters(self, system: SystemMessage | None, record: Any) -> list[_Meter]:
        text = record["summary"] if record else None
        head, notes = render_summary(system, text, self.summary_placement)
        out = []
        if self.trigger_tokens is not None:
            c = self.counter
            used = c.reply_overhead + sum(c(m) for m in ([head] if head else []) + notes)
            out.append(_Meter("trigger_tokens", "tokens", c, self.trigger_tokens, used))
        if self.trigger_messages is not None:
            out.append(_Meter("trigger_messages", "messages", lambda m: 1, self.trigger_messages))
        return out

    def _triggered(
        self, system: SystemMessage | None, record: Any, conv: Sequence[BaseMessage], lo: int
    ) -> bool:
        """Whether the unsummarized part passes a trigger (walks back, stops once it does)."""
        meters = self._unsummarized_meters(system, record)
        for j in range(len(conv) - 1, lo - 1, -1):
            for m in meters:
                m.used += m.fn(conv[j])
                if m.used > m.limit:
                    return True
        return False

    def _keep_cut(self, conv: Sequence[BaseMessage], lo: int) -> int:
        """Where the verbatim part starts after summarizing: the earliest turn boundary whose
        suffix fits ``keep``, never after the latest human message."""
        pinned = _pinned_start(conv, lo)
        tokens = sum(self.counter(m) for m in conv[pinned:])
        count = len(conv) - pinned
        best = pinned
        open_ids: set[str] = set()
        for j in range(pinned - 1, lo - 1, -1):
            msg = conv[j]
            tokens += self.counter(msg)
            count += 1
            if (self.keep_tokens is not None and tokens > self.keep_tokens) or (
                self.keep_messages is not None and count > self.keep_messages
            ):
                break
            _close(open_ids, msg)
            if not open_ids and msg.type == "human":
                best = j
        return best

    def _chunk(self, conv: Sequence[BaseMessage], lo: int, cut: int) -> int:
        """End (exclusive) of the oldest new material that fits one summarizer call, at a
        tool-unit boundary; at least one unit."""
        room = self.max_summarizer_input_tokens - self.max_summary_tokens - 150
        used, pending, best = 0, set(), lo
        for j in range(lo, cut):
            msg = conv[j]
            used += self._text_counter(msg)
            if used > room and best > lo:
                break
            if is_tool_result(msg):
                pending.discard(getattr(msg, "tool_call_id", None))
            else:
                pending.update(call_ids(msg))
            nxt = conv[j + 1] if j + 1 < len(conv) else None
            if not pending and (nxt is None or not is_tool_result(nxt)):
                best = j + 1
                if used > room:
                    break
        return best

    def _prompt(self, record: Any, new: Sequence[BaseMessage]) -> list[BaseMessage]:
        previous = record["summary"] if record else None
        text = render_messages(new)
        room = self.max_summarizer_input_tokens - self._text_counter.count(
            summarizer_prompt(previous, "", self.summary_instructions, self.max_summary_tokens)
        )
        text = cap_text(self._text_counter, text, max(room, 1), _CHUNK_MARKER)
        return summarizer_prompt(previous, text, self.summary_instructions, self.max_summary_tokens)

    # -- drivers -------------------------------------------------------------------------------

    def prepare(self, messages: Sequence[BaseMessage], summary: Any = None) -> ContextResult:
        """The model input for ``messages`` given the summary record in force (dict, JSON or
        ``None``). At most one summarizer call; if it fails, the result only trims."""
        plan = self._plan(messages, summary)
        step = _resume(plan, None)
        while isinstance(step, _Request):
            step = _resume(plan, _guard(self.summarizer.invoke, step.prompt))
        return step

    async def aprepare(self, messages: Sequence[BaseMessage], summary: Any = None) -> ContextResult:
        """Async :meth:`prepare` (the summarizer is awaited)."""
        plan = self._plan(messages, summary)
        step = _resume(plan, None)
        while isinstance(step, _Request):
            step = _resume(plan, await _aguard(self.summarizer.ainvoke(step.prompt)))
        return step


def _resume(plan: Generator[_Request, Any, ContextResult], reply: Any) -> _Request | ContextResult:
    try:
        return plan.send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _guard(fn: Any, arg: Any) -> Any:
    """The summarizer's reply, or the exception it raised (the call then succeeds by trimming)."""
    try:
        return fn(arg)
    except Exception as e:
        return e


async def _aguard(awaitable: Any) -> Any:
    """Async :func:`_guard`."""
    try:
        return await awaitable
    except Exception as e:
        return e


def _reply_text(reply: Any) -> str | None:
    if isinstance(reply, BaseException) or reply is None:
        return None
    if isinstance(reply, str):
        text = reply
    elif isinstance(reply, BaseMessage):
        text = reply.content if isinstance(reply.content, str) else reply.text
    else:
        return None
    text = str(text).strip()
    return text or None


def _nothing() -> list[BaseMessage]:
    raise ValueError("messages: nothing to send (no system message and no conversation)")
