"""Numbers and lists given to the context, counting and facts APIs: every public numeric
parameter refuses huge, negative, NaN, infinite and bool values with a ValueError naming it
(before any work or write), accepts the edges of its range, and every public function taking
a list of messages refuses a ``str``.

The str rule: LangChain's ``trim_messages("hi")`` goes through ``convert_to_messages``, which
makes one ``HumanMessage`` per character; our functions take lists of ``BaseMessage`` only, so a
``str`` (or a single message) is refused with a ``TypeError`` saying to pass a list, and an
item that is not a message with one naming its index. UserFacts runs on every backend.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from langmem_sqlite import SQLStore  # noqa: E402
from langmem_sqlite.context import (  # noqa: E402
    ContextBudgetError,
    ContextPolicy,
    check_structure,
    context_node,
    load_record,
    merge_system,
    pre_model_hook,
    trim_context,
)
from langmem_sqlite.messages import count_tokens, counting, drop_leading_orphans  # noqa: E402
from langmem_sqlite.messages.counting import TokenCounter, resolve_message_counter  # noqa: E402
from langmem_sqlite.messages.windows import orphan_prefix_length  # noqa: E402
from langmem_sqlite.store import (  # noqa: E402
    UserFacts,
    extract_candidate_facts,
    fact_tools,
    facts_hook,
    with_facts,
)
from langmem_sqlite.validation import INT64_MAX  # noqa: E402

HUMAN = [HumanMessage("hello there", id="h1")]
CONV = [
    SystemMessage("be brief"),
    HumanMessage("what is the weather?", id="h1"),
    AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Oslo"}}]),
    ToolMessage("sunny", tool_call_id="c1", id="t1"),
    AIMessage("sunny in Oslo", id="a2"),
    HumanMessage("thanks", id="h2"),
]


def summarizer() -> FakeListChatModel:
    return FakeListChatModel(responses=["a summary"] * 100)


def bad_int(low: int) -> st.SearchStrategy[Any]:
    """Values refused where an int from ``low`` to INT64_MAX is expected."""
    return st.one_of(
        st.integers(max_value=low - 1),
        st.integers(min_value=INT64_MAX + 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([math.nan, math.inf, -math.inf, 1.0, float(low + 1)]),
        st.booleans(),
    )


BAD_FRACTION = st.one_of(
    st.floats(max_value=0.0),
    st.floats(min_value=1.0),
    st.sampled_from([math.nan, math.inf, -math.inf, 0, 1, True, False, 10**30]),
)


def names(param: str) -> str:
    """A ValueError text that starts with the parameter and states the range."""
    return rf"^{re.escape(param)}: expected (an int|a number) "


# -- trim_context ----------------------------------------------------------------------------


@pytest.mark.parametrize("param", ["max_tokens", "max_messages", "max_chars"])
@settings(max_examples=60, deadline=None)
@given(value=bad_int(1))
def test_trim_context_budgets_refuse_bad_numbers(param: str, value: Any) -> None:
    with pytest.raises(ValueError, match=names(param)):
        trim_context(CONV, **{param: value})


def test_trim_context_budgets_at_their_edges() -> None:
    whole = trim_context(CONV, max_tokens=INT64_MAX, max_messages=INT64_MAX, max_chars=INT64_MAX)
    assert whole == CONV
    assert trim_context(HUMAN, max_messages=1) == HUMAN
    with pytest.raises(ContextBudgetError):
        trim_context(HUMAN, max_tokens=1)
    with pytest.raises(ValueError, match=r"^max_tokens: give at least one"):
        trim_context(HUMAN)


def test_trim_context_checks_its_numbers_before_its_messages() -> None:
    with pytest.raises(ValueError, match=names("max_chars")):
        trim_context("not messages", max_chars=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="shorten_tool_results"):
        trim_context(HUMAN, max_tokens=100, shorten_tool_results=1)  # type: ignore[arg-type]


# -- ContextPolicy ---------------------------------------------------------------------------

POLICY_INTS = [
    "max_tokens",
    "max_messages",
    "max_chars",
    "trigger_tokens",
    "trigger_messages",
    "keep_tokens",
    "keep_messages",
    "max_summary_tokens",
    "max_summarizer_input_tokens",
]


@pytest.mark.parametrize("param", POLICY_INTS)
@settings(max_examples=40, deadline=None)
@given(value=bad_int(1))
def test_policy_numbers_refuse_bad_values(param: str, value: Any) -> None:
    base: dict[str, Any] = {"max_tokens": 4_000, "summarizer": summarizer()}
    with pytest.raises(ValueError, match=names(param)):
        ContextPolicy(**{**base, param: value})


@settings(max_examples=80, deadline=None)
@given(value=BAD_FRACTION)
def test_policy_facts_share_refuses_bad_values(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^facts_share: expected a number above 0 and below 1"):
        ContextPolicy(max_tokens=4_000, facts_share=value)


def test_policy_numbers_are_checked_before_the_encoding_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded: list[str] = []
    monkeypatch.setattr(counting, "load_encoding", loaded.append)
    for param in POLICY_INTS:
        with pytest.raises(ValueError, match=names(param)):
            ContextPolicy(model="gpt-4o", summarizer=summarizer(), **{param: -1})
    with pytest.raises(ValueError, match=r"^facts_share"):
        ContextPolicy(model="gpt-4o", facts_share=math.nan)
    assert loaded == []
    ContextPolicy(model="gpt-4o")
    assert loaded == ["o200k_base"]


def test_policy_numbers_at_their_edges() -> None:
    huge = ContextPolicy(max_tokens=INT64_MAX, summarizer=summarizer(), facts_share=0.999999)
    assert huge.trigger_tokens == INT64_MAX
    assert huge.max_summarizer_input_tokens == INT64_MAX  # the default, clamped
    assert huge.prepare(CONV).messages == CONV
    every = ContextPolicy(
        max_tokens=INT64_MAX,
        max_messages=INT64_MAX,
        max_chars=INT64_MAX,
        summarizer=summarizer(),
        trigger_tokens=INT64_MAX,
        trigger_messages=INT64_MAX,
        keep_tokens=1,
        keep_messages=1,
        max_summary_tokens=INT64_MAX - 1_000,
        max_summarizer_input_tokens=INT64_MAX,
        facts_share=5e-324,
    )
    assert every.facts_budget == 0 and every.prepare(CONV).messages == CONV
    tiny = ContextPolicy(max_tokens=1, max_messages=1, max_chars=1)
    with pytest.raises(ContextBudgetError):
        tiny.prepare(HUMAN)
    with pytest.raises(ValueError, match=r"^keep_tokens: must be below trigger_tokens"):
        ContextPolicy(max_tokens=100, summarizer=summarizer(), trigger_tokens=1, keep_tokens=1)


def test_policy_refuses_bad_summary_records() -> None:
    policy = ContextPolicy(max_tokens=4_000)
    record = {"summary": "s", "upto_index": 0, "upto_id": "h1"}
    for key, low in [("upto_index", -1), ("summary_tokens", 0), ("updates", 0)]:
        for bad in (low - 1, INT64_MAX + 1, math.nan, math.inf, True, "3"):
            with pytest.raises(ValueError, match=rf"^summary\['{key}'\]: expected an int"):
                policy.prepare(CONV, {**record, key: bad})
    assert load_record({**record, "upto_index": -1, "updates": 0}) is not None
    assert load_record({**record, "upto_index": INT64_MAX, "compactions": INT64_MAX})
    assert policy.prepare(CONV, {**record, "upto_index": INT64_MAX}).messages


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(["upto_index", "messages_summarized", "upto_seq"]), value=bad_int(-1))
def test_load_record_refuses_bad_positions_and_counts(key: str, value: Any) -> None:
    low = -1 if key == "upto_index" else 0
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= INT64_MAX:
        return  # -1 is valid for upto_index only
    record = {"summary": "s", "upto_index": 0, key: value}
    with pytest.raises(ValueError, match=rf"^summary\['{key}'\]: expected an int"):
        load_record(record)


def test_adapter_options_are_checked() -> None:
    policy = ContextPolicy(max_tokens=4_000)
    for bad in ("", 3, None):
        with pytest.raises(TypeError, match=r"^output_key"):
            context_node(policy, output_key=bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^summary_key"):
            pre_model_hook(policy, summary_key=bad)  # type: ignore[arg-type]


# -- counting --------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(value=bad_int(0))
def test_token_counter_reply_overhead_refuses_bad_values(value: Any) -> None:
    with pytest.raises(ValueError, match=names("reply_overhead")):
        TokenCounter(lambda m: 1, name="one", reply_overhead=value)
    late = TokenCounter(lambda m: 1, name="late", reply_overhead=lambda: value)
    with pytest.raises(ValueError, match=names("reply_overhead")):
        late.count(HUMAN)


@settings(max_examples=60, deadline=None)
@given(value=bad_int(0))
def test_counter_results_refuse_bad_values(value: Any) -> None:
    for make in (lambda: resolve_message_counter(lambda m: value), lambda: None):
        counter = make()
        with pytest.raises(ValueError, match=r"^token_counter: returned .* expected an int from"):
            if counter is None:
                count_tokens(HUMAN, lambda m: value)
            else:
                counter.uncached(HUMAN[0])


def test_counter_numbers_at_their_edges() -> None:
    assert TokenCounter(lambda m: 0, name="zero", reply_overhead=0).count(HUMAN) == 0
    big = TokenCounter(lambda m: INT64_MAX, name="big", reply_overhead=INT64_MAX, cache=False)
    assert big.count(HUMAN) == 2 * INT64_MAX  # a total may pass INT64_MAX; one count may not
    assert trim_context(HUMAN, max_tokens=INT64_MAX, token_counter=lambda m: INT64_MAX - 3)


# -- str for a list --------------------------------------------------------------------------

LIST_HINT = (
    r"^messages: expected a list of messages, got str \(for a single one, pass \[message\]\)"
)


def test_message_lists_refuse_a_str() -> None:
    policy = ContextPolicy(max_tokens=4_000)
    calls: list[Any] = [
        lambda: trim_context("x", max_tokens=100),  # type: ignore[arg-type]
        lambda: policy.prepare("x"),  # type: ignore[arg-type]
        lambda: policy.fetch_facts("x"),  # type: ignore[arg-type]
        lambda: drop_leading_orphans("x"),  # type: ignore[arg-type]
        lambda: count_tokens("x"),  # type: ignore[arg-type]
        lambda: resolve_message_counter("gpt-4o").count("x"),  # type: ignore[arg-type]
        lambda: check_structure("x"),  # type: ignore[arg-type]
        lambda: merge_system("x"),  # type: ignore[arg-type]
        lambda: with_facts("hello", []),  # type: ignore[arg-type]
        lambda: extract_candidate_facts(summarizer(), "hi"),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(TypeError, match=LIST_HINT):
            call()
    with pytest.raises(TypeError, match=r"^types: expected a list of message types"):
        orphan_prefix_length("tool")  # type: ignore[arg-type]


async def test_async_message_lists_refuse_a_str() -> None:
    policy = ContextPolicy(max_tokens=4_000, facts=InMemoryStore())
    with pytest.raises(TypeError, match=LIST_HINT):
        await policy.aprepare("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=LIST_HINT):
        await policy.afetch_facts("x", {"configurable": {"user_id": "u"}})  # type: ignore[arg-type]


def test_message_lists_refuse_a_single_message_and_non_messages() -> None:
    one = HumanMessage("hi")
    with pytest.raises(
        TypeError, match=r"^messages: expected a list of messages, got HumanMessage"
    ):
        trim_context(one, max_tokens=100)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^messages\[1\]: expected a BaseMessage, got str"):
        trim_context([one, "there"], max_tokens=100)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^messages\[0\]: expected a BaseMessage, got tuple"):
        ContextPolicy(max_tokens=100).prepare([("user", "hi")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^messages: expected a list of messages, got dict"):
        drop_leading_orphans({"messages": [one]})  # type: ignore[arg-type]
    assert drop_leading_orphans((ToolMessage("r", tool_call_id="c"), one)) == [one]


def test_fact_lists_refuse_a_str() -> None:
    with pytest.raises(TypeError, match=r"^facts: expected a list, got str"):
        with_facts(HUMAN, "abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^facts\[0\]: expected a store Item .*, got int"):
        with_facts(HUMAN, [1])  # type: ignore[list-item]
    for make in (
        lambda: UserFacts(InMemoryStore(), "u", namespace_prefix="users"),  # type: ignore[arg-type]
        lambda: facts_hook(namespace_prefix="users"),  # type: ignore[arg-type]
        lambda: fact_tools(namespace_prefix="users"),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match=r"^namespace_prefix: expected a list, got str"):
            make()
    with pytest.raises(TypeError, match=r"^user_id_key"):
        facts_hook(user_id_key="")


# -- UserFacts on every backend ----------------------------------------------------------------


@pytest.fixture
def store(db_url: str, prefix: str) -> SQLStore:
    return SQLStore(db_url, table_prefix=prefix)


SLOW_FIXTURE = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def written(store: SQLStore) -> list[Any]:
    return store.search(("users",), limit=100)


@SLOW_FIXTURE
@given(value=bad_int(1))
def test_user_facts_max_facts_refuses_bad_values(store: SQLStore, value: Any) -> None:
    with pytest.raises(ValueError, match=names("max_facts")):
        UserFacts(store, "u1", max_facts=value)
    assert written(store) == []


@SLOW_FIXTURE
@given(value=bad_int(0))
async def test_user_facts_select_refuses_bad_budgets(store: SQLStore, value: Any) -> None:
    facts = UserFacts(store, "u1")
    with pytest.raises(ValueError, match=names("max_tokens")):
        facts.select("food", max_tokens=value)
    with pytest.raises(ValueError, match=names("max_tokens")):
        await facts.aselect("food", max_tokens=value)
    with pytest.raises(ValueError, match=names("max_tokens")):
        facts_hook(store=store, max_tokens=value)
    assert written(store) == []


async def test_user_facts_numbers_at_their_edges(store: SQLStore) -> None:
    from langmem_sqlite.store.checks import PAGE_MAX

    with pytest.raises(ValueError, match=names("max_facts")):
        UserFacts(store, "u1", max_facts=PAGE_MAX + 1)
    facts = UserFacts(store, "u1", max_facts=PAGE_MAX)
    keys = [facts.remember("The user is vegetarian"), await facts.aremember("Call them Ada")]
    assert sorted(i.key for i in facts.list_facts()) == sorted(keys)
    assert facts.select("food", max_tokens=0) == []
    assert len(facts.select("food", max_tokens=INT64_MAX)) == 2
    assert len(await facts.aselect(None, max_tokens=INT64_MAX)) == 2
    assert len(UserFacts(store, "u1", max_facts=1).list_facts()) == 1
    with pytest.raises(TypeError, match=r"^query"):
        facts.select(["food"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^candidates: expected a list, got str"):
        facts.propose("The user likes jazz")  # type: ignore[arg-type]
    hook = facts_hook(store=store, max_tokens=0)
    out = hook.invoke({"messages": HUMAN}, {"configurable": {"user_id": "u1"}})
    assert out["llm_input_messages"] == HUMAN  # nothing fits in 0 tokens: no facts section


def test_policy_reads_facts_within_an_edge_share(store: SQLStore) -> None:
    UserFacts(store, "u1").remember("The user is vegetarian")
    config = {"configurable": {"user_id": "u1"}}
    wide = ContextPolicy(max_tokens=4_000, facts=store, facts_share=0.999999)
    chosen = wide.fetch_facts(HUMAN, config)
    assert [i.value["fact"] for i in chosen] == ["The user is vegetarian"]
    assert "vegetarian" in str(wide.prepare(HUMAN, facts=chosen).messages[0].content)
    huge = ContextPolicy(max_tokens=INT64_MAX, facts=store, facts_share=0.999999)
    assert huge.fetch_facts(HUMAN, config) == chosen
    narrow = ContextPolicy(max_tokens=4_000, facts=store, facts_share=1e-9)
    assert narrow.fetch_facts(HUMAN, config) == []
    with pytest.raises(TypeError, match=LIST_HINT):
        wide.fetch_facts("x", config)  # type: ignore[arg-type]
