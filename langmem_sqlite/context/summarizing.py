"""How a policy updates the running summary; steps that call the summarizer are generators
yielding a `SummarizerRequest`."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from ..messages.counting import TokenCounter
from .settings import SummarySettings
from .structure import call_ids, is_tool_result, plain_text, result_id
from .summary import (
    COMPACTION_INSTRUCTIONS,
    SUMMARY_DROPPED_MARKER,
    cap_text,
    compacted_record,
    new_record,
    newest_part,
    render_messages,
    render_summary,
    summarizer_prompt,
    text_tokens,
)
from .trimming import _close, count_input, largest, turn_start

_CHUNK_MARKER = "\n[...the rest of this part was too long for one summarizer call]"
_SQUEEZED = " [... {n} more characters]"


@dataclass
class SummarizerRequest:
    """One summarizer call the plan asks for: the prompt to send."""

    prompt: list[BaseMessage]


@dataclass(frozen=True)
class SummaryUpdates:
    """The summary steps of a policy (`text_counter` counts text when the budget counts
    messages)."""

    settings: SummarySettings
    counter: TokenCounter
    text_counter: TokenCounter
    summarizer: Any
    instructions: str
    placement: str

    def call(
        self, prompt: list[BaseMessage], info: dict[str, Any]
    ) -> Generator[SummarizerRequest, Any, Any]:
        """One summarizer call (counted in `info`); returns its reply or exception."""
        info["summarizer_calls"] += 1
        info["summarizer_input_tokens"] += count_input(self.text_counter, prompt, cache=False)
        return (yield SummarizerRequest(prompt))

    def absorb(
        self,
        reply: Any,
        record: dict[str, Any] | None,
        conv: Sequence[BaseMessage],
        lo: int,
        chunk: int,
        info: dict[str, Any],
    ) -> dict[str, Any] | None:
        """The new record from the summarizer's reply, or `None` on failure."""
        text = reply_text(reply)
        if text is None:
            failed = isinstance(reply, BaseException)
            info["summary_error"] = repr(reply) if failed else "summarizer returned no text"
            return None
        tokens = text_tokens(self.text_counter, text)
        info["summarized"] = True
        return new_record(text, chunk - 1, conv[chunk - 1].id, tokens, record, chunk - lo)

    def cap(
        self, record: dict[str, Any], info: dict[str, Any]
    ) -> Generator[SummarizerRequest, Any, dict[str, Any]]:
        """`record` within `max_summary_tokens`: folded by the summarizer, else its oldest part
        dropped."""
        cap, counter = self.settings.max_summary_tokens, self.text_counter
        text = record["summary"]
        if text_tokens(counter, text) <= cap:
            return record
        shorter = None
        if self.summarizer is not None:
            nothing_new = "(none: only shorten the summary)"
            prompt = summarizer_prompt(text, nothing_new, COMPACTION_INSTRUCTIONS, cap)
            reply = yield from self.call(prompt, info)
            shorter = reply_text(reply)
            if shorter is None:
                info["summary_error"] = (
                    repr(reply) if isinstance(reply, BaseException) else "no text"
                ) + " (while shortening the summary)"
        by_summarizer = shorter is not None
        info["compacted"] = "summarizer"
        if shorter is None or text_tokens(counter, shorter, cache=False) > cap:
            fits = lambda t: text_tokens(counter, t, cache=False) <= cap  # noqa: E731
            shorter = newest_part(shorter or text, SUMMARY_DROPPED_MARKER, fits) or ""
            info["compacted"] = "summarizer, dropped oldest" if by_summarizer else "dropped oldest"
        return compacted_record(record, shorter, text_tokens(counter, shorter), by_summarizer)

    def triggered(
        self, system: SystemMessage | None, record: Any, conv: Sequence[BaseMessage], lo: int
    ) -> bool:
        """Whether the unsummarized part passes a trigger (walks back, stops once it does)."""
        settings = self.settings
        if settings.trigger_messages is not None and len(conv) - lo > settings.trigger_messages:
            return True
        if settings.trigger_tokens is None:
            return False
        text = record["summary"] if record else None
        head, notes = render_summary(system, text, self.placement)
        c = self.counter
        used = c.reply_overhead + sum(c(m) for m in ([head] if head else []) + notes)
        for j in range(len(conv) - 1, lo - 1, -1):
            used += c(conv[j])
            if used > settings.trigger_tokens:
                return True
        return False

    def keep_cut(self, conv: Sequence[BaseMessage], lo: int) -> int:
        """Start of the verbatim part: the earliest turn boundary whose suffix fits `keep`."""
        pinned = turn_start(conv, lo)
        tokens = sum(self.counter(m) for m in conv[pinned:])
        count = len(conv) - pinned
        best = pinned
        open_ids: set[str] = set()
        for j in range(pinned - 1, lo - 1, -1):
            msg = conv[j]
            tokens += self.counter(msg)
            count += 1
            if (self.settings.keep_tokens is not None and tokens > self.settings.keep_tokens) or (
                self.settings.keep_messages is not None and count > self.settings.keep_messages
            ):
                break
            _close(open_ids, msg)
            if not open_ids and msg.type == "human":
                best = j
        return best

    def chunk(self, conv: Sequence[BaseMessage], lo: int, cut: int) -> int:
        """End (exclusive) of the new material for one summarizer call, at a tool-unit
        boundary. A message counts at most 1/24 of the room (`prompt` shortens larger ones),
        so one call covers a whole agent turn; a longer backlog takes several calls."""
        settings = self.settings  # the room for new material beside the previous summary:
        room = settings.max_summarizer_input_tokens - settings.max_summary_tokens - 150
        most = max(1, room // 24)
        used, pending, best = 0, set(), lo
        for j in range(lo, cut):
            msg = conv[j]
            used += min(self.text_counter(msg), most)
            if used > room and best > lo:
                break
            if is_tool_result(msg):
                pending.discard(result_id(msg))
            else:
                pending.update(call_ids(msg))
            nxt = conv[j + 1] if j + 1 < len(conv) else None
            if not pending and (nxt is None or not is_tool_result(nxt)):
                best = j + 1
                if used > room:
                    break
        return best

    def prompt(self, record: Any, new: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The previous summary whole, then the new material (longest messages shortened to
        one common length if over the call's budget)."""
        previous = record["summary"] if record else None
        counter = self.text_counter

        def prompt(text: str) -> list[BaseMessage]:
            return summarizer_prompt(
                previous, text, self.instructions, self.settings.max_summary_tokens
            )

        base = count_input(counter, prompt(""), cache=False)
        room = max(1, self.settings.max_summarizer_input_tokens - base)

        def fits(text: str) -> bool:
            return text_tokens(counter, text, cache=False) <= room

        text = render_messages(new)
        if not fits(text):
            texts = [plain_text(m) for m in new]

            def squeezed(cap: int) -> str:
                return render_messages(
                    [
                        m.model_copy(update={"content": t[:cap] + _SQUEEZED.format(n=len(t) - cap)})
                        if len(t) > cap
                        else m
                        for m, t in zip(new, texts, strict=True)
                    ]
                )

            longest = max(len(t) for t in texts)
            if fits(squeezed(0)):
                text = squeezed(largest(longest, lambda cap: fits(squeezed(cap))))
            else:
                text = cap_text(counter, squeezed(0), room, _CHUNK_MARKER)
        return prompt(text)


def guard(fn: Any, arg: Any) -> Any:
    """The summarizer's reply, or the exception it raised (the call then succeeds by trimming)."""
    try:
        return fn(arg)
    except Exception as e:
        return e


async def aguard(awaitable: Any) -> Any:
    """Async `guard`."""
    try:
        return await awaitable
    except Exception as e:
        return e


def reply_text(reply: Any) -> str | None:
    if isinstance(reply, str):
        text = reply
    elif isinstance(reply, BaseMessage):
        text = plain_text(reply)
    else:
        return None
    return text.strip() or None
