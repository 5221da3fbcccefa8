"""The summary cap never cuts the newest facts.

A summary over ``max_summary_tokens`` is folded into a shorter one by the summarizer (an
update like any other, counted); if that fails, is still too long, or there is no
summarizer, its oldest part is dropped. A summarizer whose summary grows on every call keeps
the newest summarized turn through many compactions.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from context_fakes import (  # noqa: E402
    AgentModel,
    RecordingModel,
    is_compaction,
    run_agent_loop,
)
from context_strategies import assert_valid_model_input  # noqa: E402

from langmem_sqlite.context import ContextPolicy  # noqa: E402
from langmem_sqlite.context.summary import SUMMARY_DROPPED_MARKER, text_tokens  # noqa: E402
from langmem_sqlite.messages.counting import resolve_message_counter  # noqa: E402

EXACT = resolve_message_counter("gpt-4o")
FILLER = [
    "the",
    "user",
    "compared",
    "plans",
    "and",
    "asked",
    "about",
    "invoices",
    "and",
    "delivery",
    "dates",
]


class GrowingSummarizer(RecordingModel):
    """Appends one line per merge naming the newest human message it was given, plus filler,
    to the previous summary: the summary grows on every call. Asked to shorten, it ``grows``
    (ignores the request and appends), ``folds`` (keeps its last two lines) or ``fails``."""

    on_compaction: str = "grow"

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        text = messages[-1].text
        previous = re.search(r"<previous_summary>\n(.*?)\n</previous_summary>", text, re.S)
        prev = "" if previous is None or previous.group(1) == "(none yet)" else previous.group(1)
        rng = random.Random(len(self.calls))
        filler = " ".join(rng.choices(FILLER, k=120))
        if is_compaction(messages):
            if self.on_compaction == "fail":
                raise RuntimeError("summarizer down while compacting")
            if self.on_compaction == "fold":
                return AIMessage("\n".join(prev.splitlines()[-2:]))
            return AIMessage(f"{prev}\n- (restated) {filler}")
        humans = re.findall(r'<message type="human">Question (\d+):', text)
        newest = humans[-1] if humans else "none"
        line = f"- newest summarized turn: {newest}; {filler}"
        return AIMessage(f"{prev}\n{line}" if prev else line)


def _newest_summarized_turn(history: list[BaseMessage], record: dict[str, Any]) -> str:
    covered = history[: record["upto_index"] + 1]
    humans = [m for m in covered if m.type == "human"]
    return humans[-1].text.split(":")[0].removeprefix("Question ")


@pytest.mark.parametrize("on_compaction", ["grow", "fold", "fail"])
def test_newest_summarized_turn_survives_many_compactions(on_compaction: str) -> None:
    summ = GrowingSummarizer(on_compaction=on_compaction)
    policy = ContextPolicy(
        max_tokens=3000,
        model="gpt-4o",
        summarizer=summ,
        keep_tokens=700,
        max_summary_tokens=300,
    )
    results = run_agent_loop(policy, AgentModel(), turns=70, seed=3)
    compactions = [r for r in results if r.info["compacted"]]
    assert len(compactions) >= 5
    for res in results:
        assert EXACT.count(res.messages) <= 3000
        assert_valid_model_input(res.history, res.messages)
        rec = res.record
        if rec is None:
            continue
        assert text_tokens(EXACT, rec["summary"]) == rec["summary_tokens"] <= 300
        newest = _newest_summarized_turn(res.history, rec)
        assert f"newest summarized turn: {newest};" in rec["summary"], (newest, rec["summary"])
        assert rec["summary"] in res.messages[0].text
    last = results[-1].record
    merges = [c for c in summ.calls if not is_compaction(c)]
    folds = [c for c in summ.calls if is_compaction(c)]
    assert len(folds) == len(compactions) and last["compactions"] == len(compactions)
    assert sum(r.info["summarizer_calls"] for r in results) == len(summ.calls)
    if on_compaction == "fold":  # each fold by the summarizer is an update like any other
        assert last["updates"] == len(summ.calls)
        assert all(r.info["compacted"] == "summarizer" for r in compactions)
        assert SUMMARY_DROPPED_MARKER not in last["summary"]
    else:  # growing again or failing: the oldest part is dropped, never the newest
        assert last["updates"] == len(merges) + (on_compaction == "grow") * len(folds)
        assert all("dropped oldest" in r.info["compacted"] for r in compactions)
        assert last["summary"].startswith(SUMMARY_DROPPED_MARKER)
    # the compaction's input is counted in the figures with the merge's
    both = next(r for r in compactions if r.info["summarized"])
    assert both.info["summarizer_calls"] == 2
    assert both.info["summarizer_input_tokens"] > 300


def test_without_a_summarizer_an_oversized_stored_summary_loses_its_oldest_part() -> None:
    lines = [f"- fact {i}: " + " ".join(FILLER) for i in range(60)]
    record = {
        "version": 1,
        "summary": "\n".join(lines),
        "upto_id": "a0",
        "upto_index": 1,
        "summary_tokens": 900,
        "updates": 4,
    }
    policy = ContextPolicy(max_tokens=4000, model="gpt-4o", max_summary_tokens=200)
    history = [HumanMessage("hi", id="h0"), AIMessage("hello", id="a0"), HumanMessage("q", id="h1")]
    res = policy.prepare(history, record)
    new = res.summary
    assert new is not None and res.info["compacted"] == "dropped oldest"
    assert text_tokens(EXACT, new["summary"]) == new["summary_tokens"] <= 200
    assert new["summary"].startswith(SUMMARY_DROPPED_MARKER) and new["summary"].endswith(lines[-1])
    assert "- fact 0:" not in new["summary"]
    assert new["updates"] == 4 and new["compactions"] == 1 and new["upto_id"] == "a0"
    assert new["summary"] in res.messages[0].text
    # the compacted record is stable: the next call changes nothing
    again = policy.prepare(history, new)
    assert again.summary is None and again.messages == res.messages
