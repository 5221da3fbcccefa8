"""Conversations of other shapes: Chinese only, long questions, big parallel tool results.

Property tests (hypothesis) replay random hard conversations call by call through the policy,
with summaries, facts and a summarizer that sometimes fails; and every adapter runs the
benchmark's hard conversation (``benchmarks/hard_conversation.py``). On every call: input within
the budget (exact gpt-4o counts), no structural violation, no refusal of a turn that fits, and
a refusal (the oversized question) stores nothing.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.store.base import Item
from tiktoken_offline import install_offline_encodings

install_offline_encodings()
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from context_drivers import ADAPTERS, make_driver  # noqa: E402
from context_fakes import RecordingSummarizer  # noqa: E402
from context_strategies import (  # noqa: E402
    assert_valid_model_input,
    call_points,
    hard_conversations,
    latest_human,
    smallest_input,
    violations,
    zh_text,
)
from hard_conversation import (  # noqa: E402
    HARD_BUDGET,
    SYSTEM_ZH,
    ChineseSummarizer,
    ScriptedAgent,
    hard_conversation,
    has_summary,
    make_tools,
)

from langmem_sqlite.context import ContextBudgetError, ContextPolicy  # noqa: E402
from langmem_sqlite.context.summary import SUMMARY_SHORTENED_MARKER, text_tokens  # noqa: E402
from langmem_sqlite.messages.counting import resolve_message_counter  # noqa: E402

EXACT = resolve_message_counter("gpt-4o")


def _facts(n: int) -> list[Item]:
    now = datetime.now(timezone.utc)
    return [
        Item(
            value={"fact": zh_text(1000 + i, 30)},
            key=f"f{i}",
            namespace=("users", "u", "facts"),
            created_at=now,
            updated_at=now,
        )
        for i in range(n)
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    messages=hard_conversations(),
    budget=st.integers(2500, 6000),
    facts=st.integers(0, 12),
    mode=st.sampled_from(["fixed", "append"]),
    fail_every=st.sampled_from([0, 3]),
)
def test_policy_on_random_hard_conversations(messages, budget, facts, mode, fail_every) -> None:
    summ = RecordingSummarizer(mode=mode, words=250)
    policy = ContextPolicy(
        max_tokens=budget, model="gpt-4o", system_prompt=SYSTEM_ZH, summarizer=summ
    )
    items = _facts(facts)
    record: dict[str, Any] | None = None
    failed = False
    for calls, end in enumerate(call_points(messages)):
        summ.fail = bool(fail_every) and calls % fail_every == 1
        prefix = messages[:end]
        need = smallest_input(prefix, EXACT, SYSTEM_ZH)
        if need > budget:  # refused, before any summarizer call, saying by how much
            before = len(summ.calls)
            with pytest.raises(ContextBudgetError) as caught:
                policy.prepare(prefix, record, facts=items)
            assert caught.value.needed == need and caught.value.over == need - budget
            assert len(summ.calls) == before
            continue
        res = policy.prepare(prefix, record, facts=items)
        failed = failed or "summary_error" in res.info
        out = res.messages
        assert EXACT.count(out) <= budget
        assert_valid_model_input(prefix, out)
        found = violations(
            out,
            latest_human(prefix).text,
            first_question=prefix[0].text,
            summary_seen="<conversation_summary>" in out[0].text,
        )
        if found == ["summary missing after history was dropped"]:
            # only when the summarizer failed, or not even a marker fits beside the turn
            assert (res.record is None and failed) or res.info["summary_omitted"]
        else:
            assert found == []
        if res.record is not None:
            assert res.record["summary_tokens"] <= policy.max_summary_tokens
        record = res.record


@pytest.mark.parametrize("kind", ADAPTERS)
def test_every_adapter_on_the_hard_conversation(kind: str, tmp_path: Path) -> None:
    script = hard_conversation(turns=6, oversized_at=3)
    model, summ = ScriptedAgent(script=script), ChineseSummarizer()
    policy = ContextPolicy(
        max_tokens=HARD_BUDGET, model="gpt-4o", system_prompt=SYSTEM_ZH, summarizer=summ
    )
    driver = make_driver(kind, policy, model, make_tools(script), url=f"sqlite:///{tmp_path}/h.db")
    refused = []
    for t, turn in enumerate(script):
        before = (driver.history(), driver.record(), len(model.calls), len(summ.calls))
        try:
            driver.turn(turn.human, t)
        except ContextBudgetError as e:
            refused.append(t)
            assert e.part == "latest human message" and e.over > 0
            after = driver.history()
            assert driver.record() == before[1]  # no summary written
            assert (len(model.calls), len(summ.calls)) == before[2:]  # no model, no summarizer
            # nothing of the turn is stored but (in a graph's checkpoint) the question itself
            assert after[: len(before[0])] == before[0]
            assert [m.type for m in after[len(before[0]) :]] in ([], ["human"])
    assert refused == [3]
    first = script[0].human.text
    cut_results = cut_summary = 0
    for call, question in zip(model.calls, model.expected, strict=True):
        assert EXACT.count(call) <= HARD_BUDGET
        seen = has_summary(call)
        assert violations(call, question, first_question=first, summary_seen=seen) == []
        cut_results += "removed to fit" in call[-1].text
        cut_summary += SUMMARY_SHORTENED_MARKER in call[0].text
    assert len(model.calls) == 5 * 3 and cut_results >= 5  # big tool results cut to fit
    assert cut_summary >= 2  # turns that fit only beside a shortened summary were answered
    assert driver.record()["updates"] >= 3


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    budget=st.integers(1500, 6000),
    summary_chars=st.integers(40, 900),
    slack=st.integers(-300, 600),
    seed=st.integers(0, 10**6),
    placement=st.sampled_from(["system", "message"]),
)
def test_a_question_that_fits_alone_is_never_refused(budget, summary_chars, slack, seed, placement):
    """A summary in force and a question sized around ``budget - slack``: refused exactly
    when the question with the system prompt does not fit, else sent with the newest part
    of the summary."""
    policy = ContextPolicy(
        max_tokens=budget,
        model="gpt-4o",
        system_prompt=SYSTEM_ZH,
        summarizer=RecordingSummarizer(),
        summary_placement=placement,
    )
    summary = zh_text(seed, summary_chars) + "最新的事实在这里。"
    while text_tokens(EXACT, summary) > policy.max_summary_tokens:  # within its cap
        summary = summary[len(summary) // 10 :]
    record = {"summary": summary, "upto_id": "a0", "upto_index": 1, "summary_tokens": 1}
    base = [HumanMessage("你好", id="h0"), AIMessage("你好！", id="a0")]
    lo, hi = 1, 3 * budget  # the longest question whose call fits ``budget - slack``
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if (
            EXACT.count([SystemMessage(SYSTEM_ZH), HumanMessage(zh_text(seed, mid))])
            <= budget - slack
        ):
            lo = mid
        else:
            hi = mid - 1
    question = HumanMessage(zh_text(seed, lo), id="q")
    need = EXACT.count([SystemMessage(SYSTEM_ZH), question])
    history = [*base, question]
    if need > budget:
        with pytest.raises(ContextBudgetError) as caught:
            policy.prepare(history, record)
        assert caught.value.part == "latest human message" and caught.value.over == need - budget
        return
    res = policy.prepare(history, record)
    assert EXACT.count(res.messages) <= budget and res.messages[-1] is question
    text = "\n".join(m.text for m in res.messages[:-1])
    assert res.info["summary_omitted"] or "最新的事实在这里。" in text
