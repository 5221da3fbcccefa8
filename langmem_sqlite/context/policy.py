"""`ContextPolicy`, which turns a history into a model input for every adapter: one generator
(`_plan`) yielding summarizer requests, driven by `prepare` and `aprepare`."""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.store.base import BaseStore, Item

from ..messages.checks import check_message_list, check_messages
from ..messages.counting import TokenCounter, resolve_message_counter
from ..messages.encodings import is_openai_model
from ..plans import adrive, drive
from ..store.facts import UserFacts
from ..validation import INT64_MAX
from .facts import FactsSource, latest_question, render_facts
from .settings import (
    MODEL_CONTEXT_WINDOWS,
    SummaryPlacement,
    SummarySettings,
    check_numbers,
    default_max_tokens,
)
from .structure import merge_system
from .summarizing import SummarizerRequest, SummaryUpdates, aguard, guard
from .summary import (
    DEFAULT_SUMMARY_INSTRUCTIONS,
    SUMMARY_SHORTENED_MARKER,
    find_watermark,
    load_record,
    newest_part,
    render_summary,
)
from .trimming import (
    CutMode,
    Limits,
    count_input,
    fail_closed,
    largest,
    minimal_turn,
    require_turn,
    select_window,
    turn_start,
)

__all__ = ["MODEL_CONTEXT_WINDOWS", "ContextPolicy", "ContextResult"]


@dataclass
class ContextResult:
    """What the policy decided for one model call.

    Attributes:
        messages: the model input (one system message first if any, then the window).
        summary: the new summary record if it changed in this call, else `None`.
        record: the summary record in force after this call (new or previous).
        info: measurements: `input_tokens` (of `messages`), `kept` (conversation messages
            sent), `uncovered` (messages neither summarized nor sent), `summarized` (bool),
            `summarizer_calls` and `summarizer_input_tokens` (compactions included),
            `compacted` (`None`, `"summarizer"`, `"dropped oldest"` or
            `"summarizer, dropped oldest"`), `summary_tokens` (of the record),
            `summary_shortened` (the summary was sent shortened in this call, newest part
            kept), `summary_omitted` (not even a shortened summary fitted), `facts` and
            `facts_tokens` (the facts sent and their exact cost), `facts_dropped`,
            `summary_error` (text, if the summarizer failed), `seconds`.
    """

    messages: list[BaseMessage]
    summary: dict[str, Any] | None = None
    record: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)


class ContextPolicy:
    """How a history becomes a model input: budget, counting, trimming, summary and facts.

    Args:
        max_tokens: hard budget of the model input, system message, facts, summary and reply
            priming included. Defaults from `model` when its window is known.
        model: a model name used for defaults: the exact counter (OpenAI names; others count
            approximately) and the budget (see
            [`MODEL_CONTEXT_WINDOWS`][langmem_sqlite.context.MODEL_CONTEXT_WINDOWS]). An exact
            counter loads its tiktoken encoding here (see
            [`EncodingUnavailableError`][langmem_sqlite.EncodingUnavailableError] when offline).
        token_counter: counter spec (`"gpt-4o"`, `"approximate"`, `"messages"`, a
            callable...); default: exact for a known OpenAI `model`, else approximate.
        max_messages: optional message budget (system message included).
        max_chars: optional character budget.
        system_prompt: the system prompt; system messages in the history are merged after it.
        summarizer: a chat model (any `Runnable` taking messages) for the running summary;
            without one, the policy only trims.
        trigger_tokens: summarize when system + facts + summary + unsummarized messages exceed
            this (default: `max_tokens`).
        trigger_messages: or when more than this many messages are not summarized yet.
        keep_tokens: tokens of recent messages kept verbatim after summarizing (default:
            30% of `trigger_tokens`); must be below `trigger_tokens` (hysteresis).
        keep_messages: optional message count kept verbatim; below `trigger_messages`.
        max_summary_tokens: cap of the stored summary (default `max_tokens // 8`, at most
            2,000). A summary over it is folded into a shorter one by the summarizer (one more
            summarizer call, an update like any other); if that fails or there is no
            summarizer, its oldest part is dropped, never its newest.
        max_summarizer_input_tokens: budget of one summarizer call (default: `trigger_tokens`
            plus `max_summary_tokens`); the new material is shortened message by message to
            fit it, and older material beyond it is summarized in later passes.
        summary_placement: `"system"` (appended to the one system message) or `"message"`
            (a leading human message tagged `lc_source="summarization"`).
        summary_instructions: the summarizer's instructions (`{max_tokens}` is filled in).
        cut: `"turn"` (cut only before human messages) or `"unit"` (between tool units).
        facts: read the user's long-term facts before each call and put them in the system
            message: a `BaseStore` (e.g. [`SQLStore`][langmem_sqlite.SQLStore]), or `True` for
            the running graph's store. The user is `config["configurable"][user_id_key]` (or
            the runtime context). [`prepare`][langmem_sqlite.context.ContextPolicy.prepare] also
            takes facts directly (`facts=`).
        facts_share: the facts' share of `max_tokens` (default 0.1), counted exactly; over
            it, the least relevant (or oldest) facts are dropped first.
        facts_namespace: labels before the user id in the store (default `("users",)`, as
            [`UserFacts`][langmem_sqlite.store.UserFacts]).
        user_id_key: where the user id is found in the config (default `"user_id"`).

    Raises:
        ValueError: a number out of its range (every count and budget an int from 1 to
            `INT64_MAX`, `facts_share` a number strictly between 0 and 1; `bool`, NaN
            and infinities refused; the message names the parameter), checked before anything
            is loaded; a missing budget; or `keep >= trigger`.
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
        facts: BaseStore | bool | None = None,
        facts_share: float = 0.1,
        facts_namespace: tuple[str, ...] = ("users",),
        user_id_key: str = "user_id",
    ) -> None:
        if model is not None and not isinstance(model, str):
            raise TypeError(f"model: expected a model name, got {type(model).__name__}")
        summary_numbers = {
            "trigger_tokens": trigger_tokens,
            "trigger_messages": trigger_messages,
            "keep_tokens": keep_tokens,
            "keep_messages": keep_messages,
            "max_summary_tokens": max_summary_tokens,
            "max_summarizer_input_tokens": max_summarizer_input_tokens,
        }
        budgets = {"max_tokens": max_tokens, "max_messages": max_messages, "max_chars": max_chars}
        check_numbers({**budgets, **summary_numbers}, facts_share)  # before any other work
        if max_tokens is None:
            max_tokens = default_max_tokens(model)
        if token_counter is None and model is not None and is_openai_model(model):
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
        settings = SummarySettings.make(summarizer, max_tokens, **summary_numbers)
        self.counter: TokenCounter = resolve_message_counter(token_counter)
        self.limits = Limits.make(max_tokens, max_messages, max_chars, self.counter)
        self._text_counter = (
            self.counter if self.counter.name != "messages" else resolve_message_counter(None)
        )
        self.system_prompt = system_prompt
        self.summarizer = summarizer
        self.summary_placement = summary_placement
        self.summary_instructions = summary_instructions
        self.cut: CutMode = cut
        self.trigger_tokens = settings.trigger_tokens
        self.trigger_messages = settings.trigger_messages
        self.keep_tokens = settings.keep_tokens
        self.keep_messages = settings.keep_messages
        self.max_summary_tokens = settings.max_summary_tokens
        self.max_summarizer_input_tokens = settings.max_summarizer_input_tokens
        self._updates = SummaryUpdates(
            settings,
            self.counter,
            self._text_counter,
            summarizer,
            summary_instructions,
            summary_placement,
        )
        self._setup_facts(facts, facts_share, facts_namespace, user_id_key)
        self.counter.load()  # an exact counter's encoding: a clear error here if offline

    def _setup_facts(
        self, facts: Any, share: float, namespace: tuple[str, ...], user_id_key: str
    ) -> None:
        if not isinstance(namespace, tuple) or not all(isinstance(n, str) for n in namespace):
            raise TypeError("facts_namespace: expected a tuple of strings")
        if not isinstance(user_id_key, str) or not user_id_key:
            raise TypeError("user_id_key: expected a non-empty string")
        tokens = self.limits.max_tokens if self.counter.name != "messages" else None
        self.facts_share = float(share)
        self.facts_budget: int | None = int(tokens * share) if tokens else None
        self.facts_source: FactsSource | None = None
        if facts is None or facts is False:
            return
        if facts is not True and not isinstance(facts, BaseStore):
            raise TypeError(f"facts: expected a BaseStore or True, got {type(facts).__name__}")
        if self.facts_budget is None:
            raise ValueError("facts: needs a token budget (max_tokens with a token counter)")
        store = None if facts is True else facts
        self.facts_source = FactsSource(store, namespace, user_id_key)

    def _plan(
        self, messages: Sequence[BaseMessage], summary: Any, facts: Any
    ) -> Generator[SummarizerRequest, Any, ContextResult]:
        started = time.perf_counter()
        system, conv = merge_system(messages, self.system_prompt)  # checks the messages
        items = self._check_facts(facts)
        record = load_record(summary)
        if system is None and not conv:
            raise ValueError("messages: nothing to send (no system message and no conversation)")
        upto = find_watermark(conv, record)
        info: dict[str, Any] = {
            "summarized": False,
            "summarizer_calls": 0,
            "summarizer_input_tokens": 0,
            "compacted": None,
            "summary_shortened": False,
            "summary_omitted": False,
        }
        if upto is None:
            info["summary_error"] = "summary watermark not found in the history; ignored"
            record, upto = None, -1
        lo = upto + 1
        tail = conv[turn_start(conv, lo) :] if len(conv) > lo else []
        # the system message and the turn in progress must fit; nothing else has to
        require_turn(self.limits.meters([system] if system is not None else []), tail)
        given = len(items)
        items = self._facts_within_share(system, items)
        new: dict[str, Any] | None = None
        with_facts = render_facts(system, items)
        updates = self._updates
        if self.summarizer is not None and updates.triggered(with_facts, record, conv, lo):
            chunk = updates.chunk(conv, lo, updates.keep_cut(conv, lo))
            if chunk > lo:
                reply = yield from updates.call(updates.prompt(record, conv[lo:chunk]), info)
                got = updates.absorb(reply, record, conv, lo, chunk, info)
                if got is not None:
                    record, new, lo = got, got, chunk
        if record is not None:
            capped = yield from updates.cap(record, info)
            if capped is not record:
                record = new = capped
        fixed = self._compose(system, items, record, minimal_turn(tail), info)
        info["facts_dropped"] = given - info["facts"]
        window = select_window(conv, self.limits.meters(fixed, check=False), lo=lo, cut=self.cut)
        out = fail_closed(fixed + window)
        info.update(
            input_tokens=count_input(self.counter, out),
            kept=len(window),
            uncovered=max(0, len(conv) - len(window) - lo) if window else 0,
            summary_tokens=record.get("summary_tokens", 0) if record else 0,
            seconds=time.perf_counter() - started,
        )
        return ContextResult(out, new, record, info)

    def _check_facts(self, facts: Any) -> list[Item]:
        if facts is None:
            return []
        items = list(facts) if isinstance(facts, Sequence) else [facts]
        if isinstance(facts, Item) or not all(isinstance(i, Item) for i in items):
            raise TypeError("facts: expected a sequence of store Items (UserFacts.select)")
        if items and self.facts_budget is None:
            raise ValueError("facts: need a token budget (max_tokens with a token counter)")
        return items

    def _facts_cost(
        self, system: SystemMessage | None, items: Sequence[Item], *, cached: bool = False
    ) -> int:
        """Exact tokens the facts add to the system message (uncached unless `cached`)."""
        c = self._text_counter
        with_facts = render_facts(system, items)
        base = c(system) if system is not None else 0
        count = c if cached else c.uncached
        return (count(with_facts) if with_facts is not None else 0) - base

    def _facts_within_share(self, system: SystemMessage | None, items: list[Item]) -> list[Item]:
        """The most relevant facts (a prefix of `items`) within `facts_budget`."""
        if not items or self.facts_budget is None:
            return []
        budget = self.facts_budget
        if self._facts_cost(system, items, cached=True) <= budget:
            return items
        k = largest(len(items), lambda n: self._facts_cost(system, items[:n]) <= budget)
        return items[:k]

    def _build(
        self, system: SystemMessage | None, items: Sequence[Item], text: str | None
    ) -> list[BaseMessage]:
        head, notes = render_summary(render_facts(system, items), text, self.summary_placement)
        return ([head] if head is not None else []) + notes

    def _compose(
        self,
        system: SystemMessage | None,
        items: list[Item],
        record: dict[str, Any] | None,
        tail: list[BaseMessage],
        info: dict[str, Any],
    ) -> list[BaseMessage]:
        """The system message (with facts and summary) and summary note that fit beside `tail`:
        least relevant facts dropped first, then the summary shortened (newest part kept)."""
        text = record["summary"] if record else None

        def fits(k: int, t: str | None, cached: bool = False) -> bool:
            return self.limits.fits(self._build(system, items[:k], t), tail, cached=cached)

        k = len(items)
        if not fits(k, text, cached=True):
            if k:
                k = largest(k, lambda n: fits(n, text))
            if text and not fits(k, text):
                short = newest_part(text, SUMMARY_SHORTENED_MARKER, lambda t: fits(0, t))
                info["summary_shortened"] = short is not None
                info["summary_omitted"] = short is None
                text = short
        fixed = self._build(system, items[:k], text)
        info["facts"] = k
        info["facts_tokens"] = self._facts_cost(system, items[:k], cached=True) if k else 0
        return fixed

    def fetch_facts(
        self,
        messages: Sequence[BaseMessage],
        config: Any = None,
        *,
        store: BaseStore | None = None,
        user_id: Any = None,
    ) -> list[Item]:
        """The user's facts for this call (empty without `facts=`), most relevant to the
        latest human message first: pass them to
        [`prepare`][langmem_sqlite.context.ContextPolicy.prepare]. The adapters call this.

        Args:
            messages: the history (its latest human message is the query).
            config: the run's config (the user id is read from it, else the runtime context).
            store: the graph's store, used when the policy was given `facts=True`.
            user_id: the user, when the caller knows it.
        """
        facts, query = self._facts_query(messages, config, store, user_id)
        return [] if facts is None else list(facts.select(query, **self._select_args()))

    async def afetch_facts(
        self,
        messages: Sequence[BaseMessage],
        config: Any = None,
        *,
        store: BaseStore | None = None,
        user_id: Any = None,
    ) -> list[Item]:
        """Async [`fetch_facts`][langmem_sqlite.context.ContextPolicy.fetch_facts]."""
        facts, query = self._facts_query(messages, config, store, user_id)
        return [] if facts is None else list(await facts.aselect(query, **self._select_args()))

    def _facts_query(
        self, messages: Sequence[BaseMessage], config: Any, store: BaseStore | None, user_id: Any
    ) -> tuple[UserFacts | None, str | None]:
        if self.facts_source is None:
            check_message_list(messages)
            return None, None
        facts = self.facts_source.user_facts(config, store=store, user_id=user_id)
        return facts, latest_question(check_messages(messages))

    def _select_args(self) -> dict[str, Any]:
        # UserFacts.select counts each line as a message of its own (a few tokens more than
        # in the section): twice the share is a superset of what fits, counted exactly here
        assert self.facts_budget is not None
        most = min(INT64_MAX, 2 * self.facts_budget)
        return {"max_tokens": most, "token_counter": self._text_counter}

    def prepare(
        self,
        messages: Sequence[BaseMessage],
        summary: Any = None,
        *,
        facts: Sequence[Item] | None = None,
    ) -> ContextResult:
        """The model input for `messages` given the summary record in force (dict, JSON or
        `None`) and the user's facts (store items, most relevant first; see
        [`fetch_facts`][langmem_sqlite.context.ContextPolicy.fetch_facts]). One summarizer call at
        most, plus one to shorten the summary when it passes its cap; if the summarizer fails, the
        result only trims.

        Raises:
            TypeError: `messages` is not a list of messages (a `str` is refused, not
                split), or `facts` not a list of store items.
            ValueError: a summary record with a missing text or a bad position or count.
            ContextBudgetError: the system message, or the system message and the turn in
                progress (tool results shortened), cannot fit; nothing was summarized.
        """
        plan = self._plan(messages, summary, facts)
        return drive(plan, lambda request: guard(self.summarizer.invoke, request.prompt))

    async def aprepare(
        self,
        messages: Sequence[BaseMessage],
        summary: Any = None,
        *,
        facts: Sequence[Item] | None = None,
    ) -> ContextResult:
        """Async [`prepare`][langmem_sqlite.context.ContextPolicy.prepare] (the summarizer is
        awaited)."""
        plan = self._plan(messages, summary, facts)
        return await adrive(plan, lambda request: aguard(self.summarizer.ainvoke(request.prompt)))
