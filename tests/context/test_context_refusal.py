"""A long question with a running summary is never refused when the turn fits.

The summary is sent shortened for that call (its newest part, marked); only a system message
plus latest human message (tool results shortened) over the budget is refused, with an error
naming the part and by how much, before any summarizer call, storing nothing of the turn.
Checked on the policy and through every adapter.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from context_drivers import ADAPTERS, make_driver  # noqa: E402
from context_fakes import AgentModel, RecordingSummarizer  # noqa: E402
from context_strategies import assert_valid_model_input  # noqa: E402

from langmem_sqlite.context import (  # noqa: E402
    TRUNCATION_MARKER,
    ContextBudgetError,
    ContextPolicy,
)
from langmem_sqlite.context.summary import SUMMARY_SHORTENED_MARKER  # noqa: E402
from langmem_sqlite.messages.counting import resolve_message_counter  # noqa: E402

EXACT = resolve_message_counter("gpt-4o")
SYSTEM = "You are a helpful assistant."
CLAUSE = "The supplier shall deliver the goods on time. "


def issue_policy() -> ContextPolicy:
    return ContextPolicy(
        model="gpt-4o",
        max_tokens=4000,
        system_prompt=SYSTEM,
        summarizer=FakeListChatModel(responses=["x"]),
    )


def issue_record() -> dict:
    summary = "".join(f"Fact {i}: the user works on billing. " for i in range(45))
    return {
        "version": 1,
        "summary": summary,
        "upto_id": "a0",
        "upto_index": 1,
        "summary_tokens": EXACT(HumanMessage(summary)) - EXACT(HumanMessage("")),
        "messages_summarized": 2,
        "updates": 1,
    }


def question(clauses: int, qid: str = "h1") -> HumanMessage:
    return HumanMessage("Please review this contract. " + CLAUSE * clauses, id=qid)


def test_issue_reproduction_sends_the_newest_part_of_the_summary() -> None:
    policy, record = issue_policy(), issue_record()
    q = question(392)
    history = [HumanMessage("hi", id="h0"), AIMessage("hello", id="a0"), q]
    assert EXACT.count([SystemMessage(SYSTEM), q]) <= 4000  # the turn fits...
    assert EXACT.count([SystemMessage(SYSTEM + record["summary"]), q]) > 4000  # ...not beside it
    res = policy.prepare(history, record)
    assert EXACT.count(res.messages) <= 4000
    assert res.messages[-1] is q  # the question, whole
    system = res.messages[0].text
    assert system.startswith(SYSTEM) and SUMMARY_SHORTENED_MARKER in system
    assert "Fact 44: the user works on billing." in system  # the newest part is kept
    assert "Fact 0:" not in system  # the oldest part is left out
    assert res.info["summary_shortened"] and not res.info["summary_omitted"]
    assert res.summary is None and res.record == record  # nothing stored changes
    assert EXACT.count(res.messages) >= 4000 - 40  # the room is used, not wasted


def test_refusal_names_the_part_and_by_how_much_without_tool_wording() -> None:
    policy, record = issue_policy(), issue_record()
    q = question(460)
    need = EXACT.count([SystemMessage(SYSTEM), q])
    with pytest.raises(ContextBudgetError) as caught:
        policy.prepare([HumanMessage("hi", id="h0"), AIMessage("hello", id="a0"), q], record)
    e = caught.value
    assert e.part == "latest human message" and e.needed == need and e.over == need - 4000
    assert f"{need - 4000} over the budget" in str(e) and "max_tokens=4000" in str(e)
    assert "tool" not in str(e)
    # the system prompt alone
    with pytest.raises(ContextBudgetError) as caught:
        ContextPolicy(max_tokens=50, model="gpt-4o", system_prompt="word " * 200).prepare([q])
    assert caught.value.part == "system message" and "system message is too large" in str(
        caught.value
    )


def test_a_turn_with_tool_results_is_refused_only_when_their_markers_cannot_fit() -> None:
    """The turn's tool results are cut to their markers before anything is refused; the
    error then counts them as shortened."""
    calls = [{"name": "f", "args": {"q": i}, "id": f"c{i}"} for i in range(5)]
    turn = [
        question(300),
        AIMessage("", tool_calls=calls, id="a1"),
        *[ToolMessage(CLAUSE * 400, tool_call_id=f"c{i}", id=f"t{i}") for i in range(5)],
    ]
    policy = ContextPolicy(model="gpt-4o", max_tokens=4000, system_prompt=SYSTEM)
    res = policy.prepare(turn)
    assert EXACT.count(res.messages) <= 4000
    assert all("removed to fit" in m.text for m in res.messages if m.type == "tool")
    small = ContextPolicy(model="gpt-4o", max_tokens=2800, system_prompt=SYSTEM)
    with pytest.raises(ContextBudgetError) as caught:
        small.prepare(turn)
    e = caught.value
    markers = [
        m.model_copy(
            update={"content": TRUNCATION_MARKER.format(removed=len(m.text), total=len(m.text))}
        )
        for m in turn[2:]
    ]
    assert e.needed == EXACT.count([SystemMessage(SYSTEM), *turn[:2], *markers])
    assert e.part == "turn in progress" and "5 tool result(s) (shortened to their markers)" in str(
        e
    )


def test_refusal_calls_no_summarizer() -> None:
    summ = RecordingSummarizer()
    policy = ContextPolicy(
        model="gpt-4o", max_tokens=3000, system_prompt=SYSTEM, summarizer=summ, keep_tokens=900
    )
    history = []
    for i in range(12):
        history += [HumanMessage(CLAUSE * 40, id=f"h{i}"), AIMessage(CLAUSE * 20, id=f"a{i}")]
    with pytest.raises(ContextBudgetError):
        policy.prepare([*history, question(400)])
    assert summ.calls == []
    assert policy.prepare([*history, question(3)]).summary is not None and len(summ.calls) == 1


# -- through every adapter ------------------------------------------------------------------


def _fill_to(total: int) -> HumanMessage:
    """The largest question whose call with the system prompt needs at most ``total``."""
    lo, hi = 1, 2000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if EXACT.count([SystemMessage(SYSTEM), question(mid)]) <= total:
            lo = mid
        else:
            hi = mid - 1
    return question(lo, "long")


@pytest.mark.parametrize("kind", ADAPTERS)
def test_every_adapter_answers_a_long_question_and_refuses_an_oversized_one(
    kind: str, tmp_path: Path
) -> None:
    model, summ = AgentModel(answer_words=80), RecordingSummarizer(words=150)
    policy = ContextPolicy(
        max_tokens=3000,
        model="gpt-4o",
        system_prompt=SYSTEM,
        summarizer=summ,
        keep_tokens=900,
        max_summary_tokens=400,
    )
    driver = make_driver(kind, policy, model, url=f"sqlite:///{tmp_path}/h.db")
    for i in range(14):
        driver.turn(HumanMessage(f"Turn {i}: " + CLAUSE * 25, id=f"h{i}"))
    record = driver.record()
    assert record is not None and record["summary_tokens"] > 100
    # a long question: fits with the system prompt, not beside the whole summary
    long = _fill_to(3000 - 60)
    driver.turn(long)
    call = model.calls[-1]
    assert EXACT.count(call) <= 3000
    assert call[-1].text == long.text
    assert SUMMARY_SHORTENED_MARKER in call[0].text
    record = driver.record()  # (the long question may have made the summarizer run)
    assert record["summary"][-60:] in call[0].text  # the newest part of the summary
    assert SUMMARY_SHORTENED_MARKER not in record["summary"]  # the shortening is per call
    # an oversized question: a clear error, no summarizer call, no reply and no summary stored
    before_calls, before_summ = len(model.calls), len(summ.calls)
    before = driver.history()
    with pytest.raises(ContextBudgetError) as caught:
        driver.turn(question(800, "huge"))
    assert caught.value.part == "latest human message" and caught.value.over > 0
    assert len(model.calls) == before_calls and len(summ.calls) == before_summ
    assert driver.record() == record
    after = driver.history()
    if kind == "step":  # RunnableWithMessageHistory stores a turn only when it succeeds
        assert after == before
    else:  # LangGraph keeps the run's input (the question) in its checkpoint, nothing more
        assert after == [*before, after[-1]] and after[-1].id == "huge"
    # and the conversation goes on, within budget and valid
    driver.turn(HumanMessage("And now a short one.", id="next"))
    final = driver.history()
    call = model.calls[-1]
    assert EXACT.count(call) <= 3000 and call[-1].text == "And now a short one."
    conv = [m for m in final if m.type != "system"]
    assert_valid_model_input(conv[: [m.id for m in conv].index("next") + 1], call)
