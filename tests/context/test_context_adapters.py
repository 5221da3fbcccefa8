"""The policy plugged into real graphs and chains: create_react_agent, create_agent, a
StateGraph node and RunnableWithMessageHistory (summary stored on the session row)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from context_fakes import AgentModel, RecordingSummarizer, human_turns  # noqa: E402
from context_strategies import assert_valid_model_input  # noqa: E402

from langmem_sqlite import ConversationStore, session_history_factory  # noqa: E402
from langmem_sqlite.context import (  # noqa: E402
    ContextAgentState,
    ContextMiddleware,
    ContextPolicy,
    ContextState,
    context_node,
    context_step,
    load_record,
    pre_model_hook,
)
from langmem_sqlite.messages.counting import resolve_message_counter  # noqa: E402

EXACT = resolve_message_counter("gpt-4o")
BUDGET = 3000
SYSTEM = "You are a helpful research assistant. Use the lookup tool when asked."


@tool
def lookup(query: str, k: int = 1) -> str:
    """Look something up."""
    return json.dumps({"query": query, "hits": [f"result {i} for {query} " * 6 for i in range(k)]})


def make_policy(summarizer: RecordingSummarizer | None = None) -> ContextPolicy:
    return ContextPolicy(
        max_tokens=BUDGET,
        model="gpt-4o",
        system_prompt=SYSTEM,
        summarizer=summarizer or RecordingSummarizer(),
        keep_tokens=900,
        max_summary_tokens=400,
    )


def check_inputs(model: AgentModel, history: list) -> None:
    assert model.calls
    for call in model.calls:
        assert EXACT.count(call) <= BUDGET
        assert sum(isinstance(m, SystemMessage) for m in call) == 1 and call[0].text.startswith(
            SYSTEM
        )
        conv = [m for m in history if not isinstance(m, SystemMessage)]
        # each input is valid against the history prefix it was built from
        last = call[-1]
        prefix = conv[: next(i for i, m in enumerate(conv) if m.id == last.id) + 1]
        assert_valid_model_input(prefix, call)


def test_create_react_agent_long_run_stays_within_budget() -> None:
    from langgraph.prebuilt import create_react_agent

    model, summ = AgentModel(), RecordingSummarizer()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(
            model,
            [lookup],
            pre_model_hook=pre_model_hook(make_policy(summ)),
            state_schema=ContextAgentState,
            checkpointer=InMemorySaver(),
        )
    config = {"configurable": {"thread_id": "t1"}}
    for h in human_turns(45, seed=1):
        agent.invoke({"messages": [h]}, config)
    state = agent.get_state(config).values
    assert len([m for m in state["messages"] if m.type == "human"]) == 45  # full history kept
    assert load_record(state["context_summary"])["updates"] >= 2
    assert len(summ.calls) <= len(model.calls) // 4
    check_inputs(model, state["messages"])


def test_create_agent_middleware_long_run_stays_within_budget() -> None:
    from langchain.agents import create_agent

    model, summ = AgentModel(), RecordingSummarizer()
    policy = ContextPolicy(
        max_tokens=BUDGET, model="gpt-4o", summarizer=summ, keep_tokens=900, max_summary_tokens=400
    )
    agent = create_agent(
        model,
        [lookup],
        system_prompt=SYSTEM,
        middleware=[ContextMiddleware(policy)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t2"}}
    for h in human_turns(45, seed=2):
        agent.invoke({"messages": [h]}, config)
    state = agent.get_state(config).values
    assert len([m for m in state["messages"] if m.type == "human"]) == 45
    assert load_record(state["context_summary"])["updates"] >= 2
    check_inputs(model, state["messages"])


async def test_create_agent_middleware_async() -> None:
    from langchain.agents import create_agent

    model = AgentModel()
    agent = create_agent(
        model,
        [lookup],
        system_prompt=SYSTEM,
        middleware=[ContextMiddleware(make_policy())],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t3"}}
    for h in human_turns(30, seed=3):
        await agent.ainvoke({"messages": [h]}, config)
    state = (await agent.aget_state(config)).values
    assert state["context_summary"]["updates"] >= 1
    check_inputs(model, state["messages"])


def test_state_graph_node() -> None:
    model = AgentModel()

    def call_model(state: ContextState) -> dict:
        return {"messages": [model.invoke(state["llm_input_messages"])]}

    graph = StateGraph(ContextState)
    graph.add_node("context", context_node(make_policy()))
    graph.add_node("model", call_model)
    graph.add_edge(START, "context")
    graph.add_edge("context", "model")
    graph.add_edge("model", END)
    app = graph.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t4"}}
    for h in human_turns(40, seed=4):
        app.invoke({"messages": [HumanMessage(h.text.split(" [tools")[0], id=h.id)]}, config)
    state = app.get_state(config).values
    assert len(state["messages"]) == 80
    assert state["context_summary"]["updates"] >= 1
    check_inputs(model, state["messages"])


def _chain(
    policy: ContextPolicy, model: AgentModel, url: str, prefix: str
) -> RunnableWithMessageHistory:
    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    return RunnableWithMessageHistory(
        prompt | context_step(policy) | model,
        session_history_factory(url, table_prefix=prefix),
        input_messages_key="question",
        history_messages_key="history",
    )


def test_runnable_with_message_history_persists_summary(db_url: str, prefix: str) -> None:
    model, summ = AgentModel(answer_words=120), RecordingSummarizer()
    policy = ContextPolicy(
        max_tokens=BUDGET, model="gpt-4o", summarizer=summ, keep_tokens=900, max_summary_tokens=400
    )
    chain = _chain(policy, model, db_url, prefix)
    cfg = {"configurable": {"session_id": "s1"}}
    for h in human_turns(30, seed=5, words=60):
        chain.invoke({"question": h.text.split(" [tools")[0]}, cfg)
    store = ConversationStore(db_url, table_prefix=prefix)
    assert store.count_messages("s1") == 60  # the full history stays stored
    record = load_record(store.get_summary("s1"))
    assert record is not None and record["updates"] == len(summ.calls) >= 2
    for call in model.calls:
        assert EXACT.count(call) <= BUDGET
        assert sum(isinstance(m, SystemMessage) for m in call) == 1
    assert record["summary"] in model.calls[-1][0].text


async def test_runnable_with_message_history_async(db_url: str, prefix: str) -> None:
    model, summ = AgentModel(answer_words=120), RecordingSummarizer()
    chain = _chain(make_policy(summ), model, db_url, prefix)
    cfg = {"configurable": {"session_id": "s2"}}
    for h in human_turns(25, seed=6, words=60):
        await chain.ainvoke({"question": h.text.split(" [tools")[0]}, cfg)
    store = ConversationStore(db_url, table_prefix=prefix)
    record = load_record(await store.aget_summary("s2"))
    assert record is not None and record["updates"] == len(summ.calls) >= 1
    assert all(EXACT.count(call) <= BUDGET for call in model.calls)


def test_context_step_needs_a_sql_history() -> None:
    step = context_step(make_policy())
    with pytest.raises(TypeError, match="RunnableWithMessageHistory"):
        step.invoke([HumanMessage("hi")])
    with pytest.raises(TypeError, match="policy"):
        context_step("not a policy")  # type: ignore[arg-type]


@pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="LangGraph's strict msgpack allowlist fails on Python 3.10 for any agent state, "
    "its own AgentState included (issubclass of a Sequence[...] alias)",
)
def test_summary_state_survives_strict_msgpack(tmp_path: Path) -> None:
    """Under LANGGRAPH_STRICT_MSGPACK=true the record is read back from checkpoints and reused
    (langmem's RunningSummary crashes there)."""
    script = textwrap.dedent(f"""
        import sys, warnings
        sys.path[:0] = {[str(Path(__file__).parent), str(Path(__file__).parent.parent)]!r}
        from tiktoken_offline import install_offline_encodings
        install_offline_encodings()
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.prebuilt import create_react_agent
        from langchain_core.tools import tool
        from context_fakes import AgentModel, RecordingSummarizer, human_turns
        from langmem_sqlite.context import ContextAgentState, ContextPolicy, pre_model_hook
        @tool
        def lookup(query: str, k: int = 1) -> str:
            '''Look something up.'''
            return ("hit " + query + " ") * 20
        summ = RecordingSummarizer()
        policy = ContextPolicy(max_tokens=2000, model="gpt-4o", summarizer=summ, keep_tokens=600,
                               max_summary_tokens=300)
        with SqliteSaver.from_conn_string({str(tmp_path / "ck.db")!r}) as saver:
            warnings.simplefilter("ignore")
            agent = create_react_agent(AgentModel(), [lookup], pre_model_hook=pre_model_hook(policy),
                                       state_schema=ContextAgentState, checkpointer=saver)
            cfg = {{"configurable": {{"thread_id": "x"}}}}
            for h in human_turns(30, seed=9):
                agent.invoke({{"messages": [h]}}, cfg)
            rec = agent.get_state(cfg).values["context_summary"]
        assert rec["updates"] >= 3 and rec["updates"] == len(summ.calls), rec
        print("OK", rec["updates"])
    """)
    env = dict(os.environ, LANGGRAPH_STRICT_MSGPACK="true")
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("OK")
