"""Long-term facts as a budgeted part of the model input, from one policy, in every adapter.

``ContextPolicy(facts=store)`` reads the facts of the config's ``user_id`` through
``UserFacts`` (most relevant first with a semantic index, else most recent), counts them
exactly in the one system message, keeps them within ``facts_share`` of the budget (dropping
the least relevant or oldest first), and gives way to the summary when the turn is large.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from context_drivers import ADAPTERS, make_driver  # noqa: E402
from context_fakes import AgentModel, RecordingSummarizer  # noqa: E402
from topic_embedding import TopicEmbedding as StoreTopics  # noqa: E402

from langmem_sqlite import SQLStore  # noqa: E402
from langmem_sqlite.context import ContextPolicy, context_step  # noqa: E402
from langmem_sqlite.messages.counting import resolve_message_counter  # noqa: E402
from langmem_sqlite.store import UserFacts  # noqa: E402

EXACT = resolve_message_counter("gpt-4o")
SYSTEM = "You are a travel assistant."


class TopicEmbedding(StoreTopics):
    """Three topics; a text is near the topics it names."""

    TOPICS = ("food", "train", "hotel")


def _remember(facts: UserFacts, texts: list[str]) -> None:
    for text in texts:
        facts.remember(text)
        time.sleep(0.002)  # distinct updated_at: "most recent" is well defined


def test_facts_are_counted_exactly_and_kept_within_their_share(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    facts = UserFacts(store, "ada")
    _remember(facts, [f"Fact {i}: the user once visited town number {i}." for i in range(40)])
    policy = ContextPolicy(model="gpt-4o", max_tokens=2000, system_prompt=SYSTEM, facts=store)
    history = [HumanMessage("Where should I go next?", id="h0")]
    config = {"configurable": {"user_id": "ada"}}
    items = policy.fetch_facts(history, config)
    res = policy.prepare(history, facts=items)
    system = res.messages[0]
    assert sum(isinstance(m, SystemMessage) for m in res.messages) == 1
    assert system.text.startswith(SYSTEM) and "<user_facts>" in system.text
    sent = [i for i in items if f"(id: {i.key})" in system.text]
    assert len(sent) == res.info["facts"] and 0 < len(sent) < 40
    assert res.info["facts_tokens"] == EXACT(system) - EXACT(SystemMessage(SYSTEM))
    assert res.info["facts_tokens"] <= policy.facts_budget == 200
    # the most recent facts are kept, the oldest dropped
    assert sent == items[: len(sent)] and "Fact 39:" in system.text and "Fact 0:" not in system.text
    # another share: more facts, still counted exactly
    wide = ContextPolicy(
        model="gpt-4o", max_tokens=2000, system_prompt=SYSTEM, facts=store, facts_share=0.3
    )
    res = wide.prepare(history, facts=wide.fetch_facts(history, config))
    assert len(sent) < res.info["facts"] and res.info["facts_tokens"] <= 600
    assert EXACT.count(res.messages) <= 2000
    assert policy.fetch_facts(history, {"configurable": {"user_id": "bob"}}) == []


def test_least_relevant_facts_are_dropped_first(tmp_path: Path) -> None:
    store = SQLStore(
        f"sqlite:///{tmp_path}/f.db",
        index={"dims": 3, "embed": TopicEmbedding(), "fields": ["fact"]},
    )
    facts = UserFacts(store, "ada")
    topics = ["food", "hotel", "train"]
    _remember(facts, [f"{topics[i % 3]}: preference number {i} of the user" for i in range(30)])
    policy = ContextPolicy(
        model="gpt-4o", max_tokens=1000, system_prompt=SYSTEM, facts=store, facts_share=0.2
    )
    history = [HumanMessage("Which train should I book?", id="h0")]
    res = policy.prepare(
        history, facts=policy.fetch_facts(history, {"configurable": {"user_id": "ada"}})
    )
    lines = [ln for ln in res.messages[0].text.splitlines() if ln.startswith("- ")]
    assert 3 <= len(lines) <= 10 and all(ln.startswith("- train:") for ln in lines)


def test_facts_give_way_to_the_summary_when_the_turn_is_large(tmp_path: Path) -> None:
    store = SQLStore(f"sqlite:///{tmp_path}/f.db")
    _remember(UserFacts(store, "ada"), [f"Fact {i}: likes city {i}." for i in range(6)])
    policy = ContextPolicy(model="gpt-4o", max_tokens=3000, system_prompt=SYSTEM, facts=store)
    summary = "".join(f"Point {i}: the user planned a trip. " for i in range(30))
    record = {"summary": summary, "upto_id": "a0", "upto_index": 1, "summary_tokens": 300}
    base = [HumanMessage("hi", id="h0"), AIMessage("hello", id="a0")]
    cfg = {"configurable": {"user_id": "ada"}}
    sent = []
    for words in (50, 2550, 2800):  # all fits; not all facts; not even the whole summary
        history = [*base, HumanMessage("word " * words, id="q")]
        res = policy.prepare(history, record, facts=policy.fetch_facts(history, cfg))
        assert EXACT.count(res.messages) <= 3000
        assert "Point 29:" in res.messages[0].text  # the newest of the summary, always
        sent.append((res.info["facts"], res.info["summary_shortened"]))
    assert sent[0] == (6, False)
    assert 0 < sent[1][0] < 6 and not sent[1][1]  # facts dropped first, the summary whole
    assert sent[2] == (0, True)  # then the summary shortened for the call, no facts


@pytest.mark.parametrize("kind", ADAPTERS)
def test_every_adapter_puts_the_users_facts_in_the_model_input(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    store = SQLStore(url)
    _remember(UserFacts(store, "ada"), ["The user is vegetarian.", "The user travels by train."])
    _remember(UserFacts(store, "bob"), ["The user likes steak."])
    model, summ = AgentModel(answer_words=60), RecordingSummarizer(words=100)
    policy = ContextPolicy(
        model="gpt-4o",
        max_tokens=2500,
        system_prompt=SYSTEM,
        summarizer=summ,
        keep_tokens=700,
        max_summary_tokens=300,
        # the graphs get the store at compile time; a chain has none: give it to the policy
        facts=store if kind == "step" else True,
        facts_share=0.1,
    )
    ada = make_driver(kind, policy, model, store=store, user="ada", url=url, thread="ta")
    bob = make_driver(kind, policy, model, store=store, user="bob", url=url, thread="tb")
    for i in range(16):
        ada.turn(HumanMessage(f"Question {i}: plan a day out. " + "words " * 100, id=f"a{i}"))
        call = model.calls[-1]
        assert EXACT.count(call) <= 2500
        assert "vegetarian" in call[0].text and "steak" not in call[0].text
    assert ada.record() is not None  # summarized too: facts, summary and trimming at once
    assert "<conversation_summary>" in model.calls[-1][0].text
    bob.turn(HumanMessage("What should I eat?", id="b0"))
    assert "steak" in model.calls[-1][0].text and "vegetarian" not in model.calls[-1][0].text
    # a fact remembered now is in the next call
    UserFacts(store, "ada").remember("The user is allergic to peanuts.")
    ada.turn(HumanMessage("Any snack ideas?", id="a-last"))
    assert "peanuts" in model.calls[-1][0].text


@pytest.mark.parametrize("kind", ["middleware", "node", "step"])
async def test_async_adapters_read_facts_too(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    store = SQLStore(url)
    await UserFacts(store, "ada").aremember("The user is vegetarian.")
    model = AgentModel()
    policy = ContextPolicy(
        model="gpt-4o",
        max_tokens=2000,
        system_prompt=SYSTEM,
        facts=store if kind == "step" else True,
    )
    driver = make_driver(kind, policy, model, store=store, user="ada", url=url)
    await driver.aturn(HumanMessage("hello", id="h0"))
    assert "vegetarian" in model.calls[-1][0].text


def test_facts_need_a_user_and_a_store(tmp_path: Path) -> None:
    store = SQLStore(f"sqlite:///{tmp_path}/f.db")
    policy = ContextPolicy(model="gpt-4o", max_tokens=2000, facts=store)
    with pytest.raises(ValueError, match="user_id"):
        policy.fetch_facts([HumanMessage("hi")], {"configurable": {}})
    with pytest.raises(ValueError, match="facts=True"):
        context_step(ContextPolicy(model="gpt-4o", max_tokens=2000, facts=True))
    with pytest.raises(ValueError, match="no store"):
        ContextPolicy(model="gpt-4o", max_tokens=2000, facts=True).fetch_facts(
            [HumanMessage("hi")], {"configurable": {"user_id": "ada"}}
        )
    with pytest.raises(ValueError, match="facts_share"):
        ContextPolicy(max_tokens=2000, facts=store, facts_share=1.5)
    with pytest.raises(ValueError, match="token budget"):
        ContextPolicy(max_messages=20, facts=store)
    with pytest.raises(TypeError, match="facts"):
        ContextPolicy(max_tokens=2000, facts="users")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="facts"):
        policy.prepare([HumanMessage("hi")], facts=["a fact"])  # type: ignore[list-item]
