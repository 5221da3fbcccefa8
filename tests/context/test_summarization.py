"""Incremental summarization: budget, hysteresis, one call per model call, failure fallback."""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage, SystemMessage
from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from context_fakes import (  # noqa: E402
    AgentModel,
    RecordingSummarizer,
    is_compaction,
    run_agent_loop,
)
from context_strategies import assert_valid_model_input, call_points, conversations  # noqa: E402

from langmem_sqlite.context import ContextPolicy, load_record  # noqa: E402
from langmem_sqlite.messages.counting import resolve_message_counter  # noqa: E402

EXACT = resolve_message_counter("gpt-4o")
SYSTEM = "You are a careful assistant. Answer briefly and cite tool results."


def policy(summarizer, **kw) -> ContextPolicy:
    kw.setdefault("max_tokens", 4000)
    kw.setdefault("model", "gpt-4o")
    return ContextPolicy(system_prompt=SYSTEM, summarizer=summarizer, **kw)


@pytest.mark.parametrize("mode", ["fixed", "append"])
def test_long_run_respects_every_rule(mode: str) -> None:
    summ = RecordingSummarizer(mode=mode, words=200)
    pol = policy(summ, keep_tokens=1200, max_summary_tokens=600)
    results = run_agent_loop(pol, AgentModel(), turns=80)
    assert len(summ.calls) >= 3  # it did summarize
    covered = -1
    previous_summary = None
    for res in results:
        assert_valid_model_input(res.history, res.messages)
        assert EXACT.count(res.messages) <= 4000
        assert sum(isinstance(m, SystemMessage) for m in res.messages) == 1
        if res.summary is not None:
            new = res.summary
            assert new["upto_index"] > covered  # each message summarized once, in order
            assert new["messages_summarized"] == new["upto_index"] + 1  # and none skipped
            covered = new["upto_index"]
            assert new["summary_tokens"] <= 600
            assert new["upto_id"] == res.history[new["upto_index"]].id
            previous_summary = new["summary"]
        if previous_summary:
            assert previous_summary in res.messages[0].text
        # at most one merge per model call, plus one compaction when the summary passed its cap
        assert res.info["summarizer_calls"] <= 1 + (res.info["compacted"] is not None)
    assert len(summ.calls) == sum(r.info["summarizer_calls"] for r in results)
    merges = [c for c in summ.calls if not is_compaction(c)]
    assert len(merges) == sum(r.info["summarized"] for r in results) <= len(results) // 5
    # the previous summary (the record in force, within its cap) was always passed whole
    stored = [r.summary["summary"] for r in results if r.summary]
    for call in merges[1:]:
        assert RecordingSummarizer.previous(call) in stored


def test_summary_is_capped_and_record_is_small_plain_json() -> None:
    summ = RecordingSummarizer(mode="append", words=400)
    pol = policy(summ, keep_tokens=1000, max_summary_tokens=300)
    results = run_agent_loop(pol, AgentModel(), turns=60)
    records = [r.summary for r in results if r.summary]
    assert len(records) >= 3
    sizes = []
    for rec in records:
        assert rec["summary_tokens"] <= 300
        assert rec["summary_tokens"] == max(
            0, EXACT(HumanMessage(rec["summary"])) - EXACT(HumanMessage(""))
        )
        text = json.dumps(rec)
        assert json.loads(text) == rec  # JSON primitives only
        assert load_record(text) == rec
        sizes.append(len(text))
    assert max(sizes) < 4 * 300 * 4  # bounded by the cap, not by the history


def test_summarizer_failure_changes_nothing_and_the_call_succeeds() -> None:
    summ = RecordingSummarizer(fail=True)
    pol = policy(summ, keep_tokens=1000)
    results = run_agent_loop(pol, AgentModel(), turns=40)
    assert summ.calls  # it was tried
    for res in results:
        assert res.summary is None and res.record is None
        assert_valid_model_input(res.history, res.messages)
        assert EXACT.count(res.messages) <= 4000
    assert any("summarizer unavailable" in r.info.get("summary_error", "") for r in results)


def test_oversized_material_is_summarized_in_passes_not_dropped() -> None:
    """A history far over the trigger at once: several passes, each within the summarizer's
    input budget, contiguous, one per model call."""
    summ = RecordingSummarizer(words=50)
    pol = policy(summ, keep_tokens=800, max_summarizer_input_tokens=1500, max_summary_tokens=200)
    history = []
    for r in run_agent_loop(ContextPolicy(max_tokens=10**6), AgentModel(), turns=40):
        history = r.history
    record, passes = None, 0
    for _ in range(40):
        res = pol.prepare(history, record)
        assert EXACT.count(res.messages) <= 4000
        assert_valid_model_input(history, res.messages)
        if res.summary is None:
            break
        prev_upto = record["upto_index"] if record else -1
        assert res.summary["upto_index"] > prev_upto
        assert res.info["summarizer_input_tokens"] <= 1500
        record, passes = res.summary, passes + 1
    assert passes >= 3
    assert len(summ.calls) == passes
    assert record["messages_summarized"] == record["upto_index"] + 1


def test_summary_as_tagged_message_never_second_system() -> None:
    summ = RecordingSummarizer()
    pol = policy(summ, keep_tokens=1000, summary_placement="message")
    results = run_agent_loop(pol, AgentModel(), turns=40)
    seen = False
    for res in results:
        assert sum(isinstance(m, SystemMessage) for m in res.messages) == 1
        if res.record:
            note = res.messages[1]
            assert note.type == "human" and note.additional_kwargs["lc_source"] == "summarization"
            assert res.record["summary"] in note.text
            seen = True
        assert EXACT.count(res.messages) <= 4000
    assert seen


async def test_async_prepare_matches_sync() -> None:
    summ_a, summ_b = RecordingSummarizer(), RecordingSummarizer()
    history = run_agent_loop(ContextPolicy(max_tokens=10**6), AgentModel(), turns=30)[-1].history
    sync = policy(summ_a, keep_tokens=1000).prepare(history)
    asyn = await policy(summ_b, keep_tokens=1000).aprepare(history)
    assert sync.messages == asyn.messages and sync.summary == asyn.summary
    assert len(summ_a.calls) == len(summ_b.calls) == 1


def test_stale_watermark_is_ignored_not_trusted() -> None:
    pol = policy(RecordingSummarizer(fail=True))
    rec = {"summary": "old", "upto_id": "gone", "upto_index": 3, "summary_tokens": 1}
    res = pol.prepare([HumanMessage("hi", id="x")], rec)
    assert "watermark" in res.info["summary_error"] and "old" not in res.messages[0].text


def test_configuration_is_validated() -> None:
    s = RecordingSummarizer()
    with pytest.raises(ValueError, match="keep_tokens"):
        ContextPolicy(max_tokens=4000, summarizer=s, trigger_tokens=3000, keep_tokens=3000)
    with pytest.raises(ValueError, match="keep_messages"):
        ContextPolicy(max_tokens=4000, summarizer=s, trigger_messages=20, keep_messages=25)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ContextPolicy(max_tokens=4000, summarizer=s, trigger_tokens=4000, keep_tokens=3900)
    texts = " ".join(str(w.message) for w in caught)
    assert "close to" in texts and "almost every call" in texts
    with pytest.raises(ValueError, match="trigger_tokens"):
        ContextPolicy(max_messages=50, summarizer=s)
    with pytest.raises(ValueError, match="summarizer"):
        ContextPolicy(max_tokens=4000, trigger_tokens=3000)
    with pytest.raises(TypeError, match="summarizer"):
        ContextPolicy(max_tokens=4000, summarizer="gpt-4o-mini")
    with pytest.raises(ValueError, match="max_tokens"):
        ContextPolicy(model="some-unknown-model")
    with pytest.raises(ValueError, match="summary_placement"):
        ContextPolicy(max_tokens=10, summary_placement="footer")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="summary"):
        ContextPolicy(max_tokens=100).prepare([HumanMessage("x")], summary=[1, 2])
    with pytest.raises(ValueError, match="summary"):
        ContextPolicy(max_tokens=100).prepare([HumanMessage("x")], summary="{not json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = ContextPolicy(model="gpt-4o")
    assert p.limits.max_tokens == 128_000 - 16_384 and p.counter.name == "gpt-4o"


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("chatgpt-4o-latest", 128_000),
        ("ft:gpt-4o-mini-2024-07-18:acme::abc123", 128_000),
        ("GPT-4o", 128_000),
        ("o3-mini", 200_000),
    ],
)
def test_every_openai_name_the_counter_takes_is_counted_exactly(model: str, window: int) -> None:
    """A policy counts exactly every model name the token counter counts exactly (one list of
    OpenAI prefixes, case ignored), and knows the window of each, fine-tuned ones included."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the approximation, no warning
        p = ContextPolicy(model=model)
    assert p.counter.name == model  # the approximation is named "approximate"
    assert p.limits.max_tokens == window - min(16_384, window // 4)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    messages=conversations(max_turns=25),
    budget=st.integers(1500, 4000),
    keep_ratio=st.floats(0.1, 0.6),
    placement=st.sampled_from(["system", "message"]),
    fail_every=st.sampled_from([0, 3]),
)
def test_policy_on_random_conversations(messages, budget, keep_ratio, placement, fail_every):
    """Replaying a random conversation call by call: every input valid and within budget, at
    most one summarizer call per model call, every message summarized at most once, in order."""
    summ = RecordingSummarizer(words=60)
    pol = ContextPolicy(
        max_tokens=budget,
        model="gpt-4o",
        summarizer=summ,
        keep_tokens=int(budget * keep_ratio),
        max_summary_tokens=250,
        summary_placement=placement,
    )
    record, covered = None, -1
    for calls, end in enumerate(call_points(messages)):
        summ.fail = bool(fail_every) and calls % fail_every == 1
        before = len(summ.calls)
        prefix = messages[:end]
        res = pol.prepare(prefix, record)
        assert len(summ.calls) - before <= 1
        assert_valid_model_input(prefix, res.messages, summary_note=placement == "message")
        assert EXACT.count(res.messages) <= budget
        if res.summary is not None:
            assert res.summary["upto_index"] > covered
            assert res.summary["messages_summarized"] == res.summary["upto_index"] + 1
            assert res.summary["summary_tokens"] <= 250
            covered = res.summary["upto_index"]
            record = json.loads(json.dumps(res.summary))  # as a checkpoint would hand it back
        else:
            assert res.record == record
