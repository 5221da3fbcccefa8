"""User facts: remember/update/forget, pending candidates, budgeted prompt injection, tools,
model extraction; on SQLStore over SQLite, PostgreSQL and MariaDB, inside real graphs."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from topic_embedding import TopicEmbedding

from langmem_sqlite import Memory, SQLStore
from langmem_sqlite.store import (
    UserFacts,
    aextract_candidate_facts,
    extract_candidate_facts,
    fact_tools,
    facts_hook,
    with_facts,
)


def test_remember_update_forget(store: SQLStore) -> None:
    facts = UserFacts(store, "u1")
    a = facts.remember("The user is vegetarian")
    b = facts.remember("Call the user   Zhang San", key="name")
    assert b == "name"
    assert [i.value["fact"] for i in facts.list_facts()] == [
        "Call the user Zhang San",
        "The user is vegetarian",
    ]
    assert facts.update(a, "The user is vegan")
    assert not facts.update("missing", "x")
    assert facts.forget("name") and not facts.forget("name")
    assert [i.value["fact"] for i in facts.list_facts()] == ["The user is vegan"]
    assert UserFacts(store, "u2").list_facts() == []
    with pytest.raises(ValueError, match="fact"):
        facts.remember("   ")
    with pytest.raises(TypeError, match="fact"):
        facts.remember(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="user_id"):
        UserFacts(store, "")


async def test_pending_candidates_need_confirmation(store: SQLStore) -> None:
    facts = UserFacts(store, "u1")
    await facts.aremember("The user is vegetarian")
    keys = await facts.apropose(
        ["the user is  VEGETARIAN", "The user likes jazz", "The user likes jazz"]
    )
    assert len(keys) == 1  # known fact and duplicate skipped
    assert [i.value["fact"] for i in await facts.alist_facts(pending=True)] == [
        "The user likes jazz"
    ]
    assert [i.value["fact"] for i in await facts.alist_facts()] == ["The user is vegetarian"]
    assert await facts.aconfirm(keys[0]) == keys[0]
    assert await facts.aconfirm(keys[0]) is None
    assert len(await facts.alist_facts()) == 2 and await facts.alist_facts(pending=True) == []
    [other] = await facts.apropose(["The user lives in Paris"])
    assert await facts.areject(other) and not await facts.areject(other)
    assert len(await facts.alist_facts()) == 2


def test_select_respects_budget_and_recency(store: SQLStore) -> None:
    facts = UserFacts(store, "u1")
    for i in range(10):
        facts.remember(f"fact number {i} " + "word " * 10)
    everything = facts.select(max_tokens=10_000)
    assert [i.value["fact"].split()[2] for i in everything] == [str(i) for i in reversed(range(10))]
    some = facts.select(max_tokens=60)
    assert 0 < len(some) < 10
    assert some == everything[: len(some)]  # the most recent ones
    assert facts.select(max_tokens=0) == []
    section = with_facts([], some)[0].content
    from langmem_sqlite.messages.counting import resolve_message_counter

    assert resolve_message_counter(None)(SystemMessage(section)) <= 60 + 10


def test_select_prefers_relevant_facts(db_url: str, prefix: str) -> None:
    store = SQLStore(
        db_url,
        table_prefix=prefix,
        index={"dims": 3, "embed": TopicEmbedding(), "fields": ["fact"]},
    )
    facts = UserFacts(store, "u1")
    facts.remember("food: the user is vegetarian")
    facts.remember("name: call the user Zhang San")
    facts.remember("style: answer briefly")
    assert facts.select("what food do they eat?")[0].value["fact"].startswith("food")
    some = facts.select("which name to use?", max_tokens=70)
    assert 1 <= len(some) < 3 and some[0].value["fact"].startswith("name")


def test_with_facts_adds_or_replaces_the_section() -> None:
    store_facts = [
        type("I", (), {"key": "k1", "value": {"fact": "The user is vegetarian"}})(),
    ]
    out = with_facts([HumanMessage("hi")], store_facts)  # type: ignore[arg-type]
    assert isinstance(out[0], SystemMessage) and "vegetarian" in out[0].content
    again = with_facts([SystemMessage("Be nice.", id="sys"), HumanMessage("hi")], store_facts)  # type: ignore[arg-type]
    twice = with_facts(again, store_facts)  # type: ignore[arg-type]
    assert twice[0].id == "sys" and twice[0].content.startswith("Be nice.")
    assert twice[0].content.count("vegetarian") == 1
    assert with_facts(twice, [])[0].content == "Be nice."


def _model_graph(store: SQLStore, seen: list[list[Any]]) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        seen.append(list(state["messages"]))
        return {"messages": [AIMessage("ok")]}

    builder = StateGraph(MessagesState)
    builder.add_node("facts", facts_hook(output="messages", max_tokens=200))
    builder.add_node("model", model)
    builder.add_edge(START, "facts")
    builder.add_edge("facts", "model")
    return builder.compile(store=store)


def test_hook_puts_facts_in_the_system_message_in_a_graph(store: SQLStore) -> None:
    UserFacts(store, "u1").remember("The user is vegetarian")
    seen: list[list[Any]] = []
    graph = _model_graph(store, seen)
    cfg = {"configurable": {"user_id": "u1"}}
    out = graph.invoke(
        {"messages": [SystemMessage("Be brief."), HumanMessage("dinner ideas?")]}, cfg
    )
    first = seen[-1][0]
    assert isinstance(first, SystemMessage) and "Be brief." in first.content
    assert "The user is vegetarian" in first.content
    assert [m.type for m in out["messages"]] == ["system", "human", "ai"]
    # another user's facts never leak
    graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"user_id": "u2"}})
    assert all("vegetarian" not in str(m.content) for m in seen[-1])


async def test_hook_llm_input_mode_async(store: SQLStore) -> None:
    await UserFacts(store, "u1").aremember("Call the user Zhang San")
    hook = facts_hook(store=store)
    state = {"messages": [HumanMessage("hello")]}
    result = await hook.ainvoke(state, {"configurable": {"user_id": "u1"}})
    assert "Zhang San" in result["llm_input_messages"][0].content
    assert len(state["messages"]) == 1
    with pytest.raises(ValueError, match="user_id"):
        hook.invoke(state)


def test_tools_in_a_tool_node(store: SQLStore) -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(fact_tools()))
    builder.add_edge(START, "tools")
    graph = builder.compile(store=store)
    cfg = {"configurable": {"user_id": "u9"}}

    def call(name: str, **args: Any) -> str:
        msg = AIMessage(
            "", tool_calls=[{"name": name, "args": args, "id": "c1", "type": "tool_call"}]
        )
        return str(graph.invoke({"messages": [msg]}, cfg)["messages"][-1].content)

    reply = call("remember_fact", fact="The user prefers short answers")
    key = reply.split("id: ")[1].rstrip(")")
    assert [i.key for i in UserFacts(store, "u9").list_facts()] == [key]
    assert call("update_fact", fact_id=key, fact="The user prefers detailed answers") == "updated"
    assert (
        UserFacts(store, "u9").list_facts()[0].value["fact"] == "The user prefers detailed answers"
    )
    assert call("forget_fact", fact_id=key) == "forgotten"
    assert call("forget_fact", fact_id=key).startswith("no fact")
    assert UserFacts(store, "u9").list_facts() == []


async def test_extraction_keeps_candidates_pending(store: SQLStore) -> None:
    convo = [HumanMessage("I'm vegetarian, and please call me Zhang San."), AIMessage("Noted!")]
    model = FakeListChatModel(
        responses=[
            '["The user is vegetarian", "Call the user Zhang San"]',
            "sure! here you go",
            '```json\n["The user is vegetarian", 3]\n```',
        ]
    )
    candidates = extract_candidate_facts(model, convo)
    assert candidates == ["The user is vegetarian", "Call the user Zhang San"]
    facts = UserFacts(store, "u1")
    assert len(facts.propose(candidates)) == 2
    assert facts.list_facts() == []  # nothing remembered until confirmed
    assert extract_candidate_facts(model, convo) == []  # not JSON: remember nothing
    assert await aextract_candidate_facts(model, convo) == ["The user is vegetarian"]


def test_memory_entry_point(db_url: str, prefix: str) -> None:
    memory = Memory(db_url, table_prefix=prefix)
    history = memory.history("s1", user_id="u1")
    history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    assert [m.content for m in memory.history("s1", user_id="u1").messages] == ["hi", "hello"]
    assert memory.history("s1", user_id="u2").messages == []
    assert history.store is memory.conversations
    memory.store.put(("users", "u1", "facts"), "k", {"fact": "x"})
    assert memory.store.db is memory.conversations.db
    assert SQLStore(db_url, table_prefix=prefix).get(("users", "u1", "facts"), "k") is not None
    memory.close()


def test_hook_as_pre_model_hook_of_a_prebuilt_agent(store: SQLStore) -> None:
    import warnings

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    seen: list[list[Any]] = []

    class Spy(GenericFakeChatModel):
        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        agent = create_react_agent(
            Spy(messages=iter([AIMessage("ok")])),
            tools=[],
            pre_model_hook=facts_hook(),
            store=store,
        )
    UserFacts(store, "u1").remember("The user is vegetarian")
    out = agent.invoke({"messages": [HumanMessage("dinner?")]}, {"configurable": {"user_id": "u1"}})
    assert seen[0][0].type == "system" and "vegetarian" in seen[0][0].content
    assert [m.type for m in out["messages"]] == ["human", "ai"]  # the state keeps no facts
