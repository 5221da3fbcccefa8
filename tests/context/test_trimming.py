"""Trimming: property tests over random conversations, edge cases, and O(kept) work."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from context_strategies import (  # noqa: E402
    assert_valid_model_input,
    conv_of,
    conversations,
    latest_human,
    smallest_input,
)

from langmem_sqlite.context import (  # noqa: E402
    ContextBudgetError,
    ContextStructureError,
    check_structure,
    trim_context,
)
from langmem_sqlite.messages.counting import count_characters, resolve_message_counter  # noqa: E402

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(
    messages=conversations(),
    spec=st.sampled_from(["gpt-4o", "approximate", "chars"]),
    max_tokens=st.one_of(st.none(), st.integers(1, 4000)),
    max_messages=st.one_of(st.none(), st.integers(1, 40)),
    cut=st.sampled_from(["turn", "unit"]),
)
def test_trim_never_breaks_a_rule(messages, spec, max_tokens, max_messages, cut) -> None:
    if max_tokens is None and max_messages is None:
        max_tokens = 500
    counter = resolve_message_counter(spec)
    try:
        out = trim_context(
            messages, max_tokens=max_tokens, token_counter=spec, max_messages=max_messages, cut=cut
        )
    except ContextBudgetError:
        too_many = max_messages is not None and max_messages < len(conv_of(messages)) - conv_of(
            messages
        ).index(latest_human(conv_of(messages))) + (
            1 if any(isinstance(m, SystemMessage) for m in messages) else 0
        )
        assert too_many or (
            max_tokens is not None and smallest_input(messages, counter) > max_tokens
        )
        return
    assert_valid_model_input(messages, out)
    if max_tokens is not None:
        assert counter.count(out) <= max_tokens
    if max_messages is not None:
        assert len(out) <= max_messages
    if cut == "turn":  # cut only before a human message (or keep everything)
        conv_in, conv_out = conv_of(messages), conv_of(out)
        assert conv_out[0].type == "human" or len(conv_out) == len(conv_in)


@SETTINGS
@given(messages=conversations(), max_chars=st.integers(50, 3000))
def test_trim_by_characters(messages, max_chars) -> None:
    try:
        out = trim_context(messages, max_chars=max_chars)
    except ContextBudgetError:
        return
    assert_valid_model_input(messages, out)
    assert sum(count_characters(m) for m in out) <= max_chars


@SETTINGS
@given(messages=conversations(in_progress=True), budget=st.integers(300, 2000))
def test_turn_in_progress_is_shortened_not_dropped(messages, budget) -> None:
    big = [
        m.model_copy(update={"content": m.text * 30}) if m.type == "tool" else m for m in messages
    ]
    counter = resolve_message_counter("gpt-4o")
    try:
        out = trim_context(big, max_tokens=budget, token_counter="gpt-4o")
    except ContextBudgetError:
        assert smallest_input(big, counter) > budget
        return
    assert_valid_model_input(big, out)
    assert counter.count(out) <= budget


def _two_calls(message_id: str, name: str) -> AIMessage:
    calls = [{"name": name, "args": {}, "id": c} for c in ("c1", "c2")]
    return AIMessage("", id=message_id, tool_calls=calls)


def _tool_turn() -> list:
    return [
        SystemMessage("sys"),
        HumanMessage("q1", id="h1"),
        _two_calls("a1", "f"),
        ToolMessage("r1", tool_call_id="c1", id="t1"),
        ToolMessage("r2", tool_call_id="c2", id="t2"),
        AIMessage("answer", id="a2"),
        HumanMessage("q2", id="h2"),
    ]


def test_message_budget_never_orphans_or_drops_the_question() -> None:
    msgs = _tool_turn()
    for n in range(2, 8):
        out = trim_context(msgs, max_messages=n, cut="unit")
        assert check_structure(out) == [] and out[-1].id == "h2" and len(out) <= n
    assert [m.id for m in trim_context(msgs, max_messages=3, cut="unit")] == [None, "a2", "h2"]
    assert [m.id for m in trim_context(msgs, max_messages=6)][1:] == ["h2"]
    with pytest.raises(ContextBudgetError, match="max_messages"):
        trim_context(msgs, max_messages=1)


def test_system_prompt_over_budget_raises() -> None:
    with pytest.raises(ContextBudgetError, match="system message"):
        trim_context(
            [SystemMessage("word " * 300), HumanMessage("hi")],
            max_tokens=50,
            token_counter="gpt-4o",
        )


def test_question_over_budget_raises_instead_of_sending_only_system() -> None:
    with pytest.raises(ContextBudgetError, match="latest human message"):
        trim_context(
            [SystemMessage("s"), HumanMessage("word " * 500)],
            max_tokens=100,
            token_counter="gpt-4o",
        )


def test_huge_tool_results_of_the_current_turn_are_shortened_with_marker() -> None:
    msgs = [
        HumanMessage("summarize the logs", id="h"),
        _two_calls("a", "read"),
        ToolMessage("log line\n" * 5000, tool_call_id="c1", id="t1"),
        ToolMessage("small", tool_call_id="c2", id="t2"),
    ]
    out = trim_context(msgs, max_tokens=1000, token_counter="gpt-4o", system_prompt="sys")
    counter = resolve_message_counter("gpt-4o")
    assert counter.count(out) <= 1000 and check_structure(out) == []
    assert [m.id for m in out[1:]] == ["h", "a", "t1", "t2"]
    assert "removed to fit the context window" in out[3].text and out[4].text == "small"
    assert counter.count(out) > 900  # the cut keeps as much as fits


def test_system_messages_anywhere_are_merged_first_and_counted() -> None:
    msgs = [
        HumanMessage("a"),
        SystemMessage("rule one"),
        AIMessage("b"),
        SystemMessage("rule two"),
        HumanMessage("c"),
    ]
    out = trim_context(msgs, max_tokens=1000, system_prompt="base")
    assert isinstance(out[0], SystemMessage) and out[0].text == "base\n\nrule one\n\nrule two"
    assert [m.text for m in out[1:]] == ["a", "b", "c"]


def test_errors_are_typed_and_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        trim_context([HumanMessage("x")])
    with pytest.raises(ValueError, match="max_tokens"):
        trim_context([HumanMessage("x")], max_tokens=0)
    with pytest.raises(TypeError, match="max_messages"):
        trim_context([HumanMessage("x")], max_messages="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cut"):
        trim_context([HumanMessage("x")], max_messages=3, cut="any")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="messages"):
        trim_context([], max_messages=3)
    with pytest.raises(ContextStructureError, match="orphan"):
        trim_context([HumanMessage("x"), ToolMessage("r", tool_call_id="zz")], max_messages=5)


def test_everything_fits_returns_everything_same_objects() -> None:
    msgs = _tool_turn()
    out = trim_context(msgs, max_tokens=10_000, token_counter="gpt-4o")
    assert all(a is b for a, b in zip(msgs, out, strict=True))


def test_work_is_proportional_to_what_is_kept() -> None:
    """At 10,000 messages only the kept window (plus a few) is ever tokenized."""
    msgs = []
    for i in range(2500):
        msgs += [
            HumanMessage(f"question {i} " * 5, id=f"h{i}"),
            AIMessage("", id=f"a{i}", tool_calls=[{"name": "f", "args": {"i": i}, "id": f"c{i}"}]),
            ToolMessage(f"result {i} " * 8, tool_call_id=f"c{i}", id=f"t{i}"),
            AIMessage(f"answer {i} " * 6, id=f"b{i}"),
        ]
    counter = resolve_message_counter("tiktoken:o200k_base")
    counter.clear_cache()
    before = counter.computed
    out = trim_context(msgs, max_tokens=3000, token_counter="tiktoken:o200k_base")
    kept = len(out)
    assert kept < 200
    assert counter.computed - before <= kept + 8  # kept, plus the one unit that did not fit
    again = counter.computed
    trim_context(msgs, max_tokens=3000, token_counter="tiktoken:o200k_base")
    assert counter.computed == again  # warm: nothing recounted


def test_structure_checker_catches_each_violation() -> None:
    """The checker used by the property tests is not vacuous."""
    h, s = HumanMessage("q"), SystemMessage("s")
    call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    res = ToolMessage("r", tool_call_id="c1")
    assert check_structure([]) == ["empty input"]
    assert check_structure([s, h, call, res]) == []
    assert "conversation starts on a tool result" in check_structure([s, res, h])
    assert any("orphan" in p for p in check_structure([h, res]))
    assert any("dangling" in p for p in check_structure([h, call]))
    assert any("system messages" in p for p in check_structure([s, h, s]))
    assert any("index 1" in p for p in check_structure([h, s]))
    assert "no human message" in check_structure([call, res], require_human=True)


@pytest.mark.parametrize("kind", [FunctionMessage, FunctionMessageChunk])
def test_legacy_function_results_stay_with_their_call(kind: type[FunctionMessage]) -> None:
    call = AIMessage("", additional_kwargs={"function_call": {"name": "f", "arguments": "{}"}})
    result = kind(name="f", content="r" * 50)
    assert "conversation starts on a tool result" in check_structure([result, HumanMessage("q")])
    history = [HumanMessage("q1"), call, result, AIMessage("a1"), HumanMessage("q2")]
    for n in range(1, 6):
        out = trim_context(history, max_messages=n, cut="unit")
        assert out[0] is not result and (result not in out or call in out), n
