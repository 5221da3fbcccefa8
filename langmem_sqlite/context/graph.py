"""LangGraph adapters: a `StateGraph` node and a `pre_model_hook` for `create_react_agent`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from typing_extensions import NotRequired, TypedDict

from .policy import ContextPolicy, ContextResult

SUMMARY_KEY = "context_summary"
"""Default state key of the summary record."""


class ContextState(TypedDict):
    """A messages state with the summary record and the computed model input."""

    messages: Annotated[list[AnyMessage], add_messages]
    context_summary: NotRequired[dict[str, Any] | None]
    llm_input_messages: NotRequired[list[AnyMessage]]


class ContextAgentState(TypedDict):
    """`create_react_agent` state with the summary record (pass as `state_schema=`)."""

    messages: Annotated[Sequence[BaseMessage], add_messages]
    remaining_steps: NotRequired[RemainingSteps]
    context_summary: NotRequired[dict[str, Any] | None]


def _update(result: ContextResult, output_key: str, summary_key: str) -> dict[str, Any]:
    update: dict[str, Any] = {output_key: result.messages}
    if result.summary is not None:
        update[summary_key] = result.summary
    return update


def _read(state: Any, summary_key: str) -> tuple[Sequence[BaseMessage], Any]:
    if isinstance(state, dict):
        return state["messages"], state.get(summary_key)
    return state.messages, getattr(state, summary_key, None)


def context_node(
    policy: ContextPolicy,
    *,
    output_key: str = "llm_input_messages",
    summary_key: str = SUMMARY_KEY,
) -> RunnableLambda[Any, dict[str, Any]]:
    """A graph node (sync and async) applying `policy` to the state's `messages` (left whole).

    Returns `{output_key: model input}` and `{summary_key: record}` (plain JSON) when the
    summary changed. Wire the model node to read `state[output_key]`. With `facts=True` on the
    policy, compile the graph with `store=`.
    """
    if not isinstance(policy, ContextPolicy):
        raise TypeError(f"policy: expected a ContextPolicy, got {type(policy).__name__}")
    for name, key in (("output_key", output_key), ("summary_key", summary_key)):
        if not isinstance(key, str) or not key:
            raise TypeError(f"{name}: expected a non-empty str, got {key!r}")

    def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages, summary = _read(state, summary_key)
        facts = policy.fetch_facts(messages, config)
        result = policy.prepare(messages, summary, facts=facts)
        return _update(result, output_key, summary_key)

    async def arun(state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages, summary = _read(state, summary_key)
        facts = await policy.afetch_facts(messages, config)
        result = await policy.aprepare(messages, summary, facts=facts)
        return _update(result, output_key, summary_key)

    return RunnableLambda(run, afunc=arun, name="context_window")


def pre_model_hook(
    policy: ContextPolicy, *, summary_key: str = SUMMARY_KEY
) -> RunnableLambda[Any, dict[str, Any]]:
    """A `pre_model_hook` for `langgraph.prebuilt.create_react_agent`.

    Use with `state_schema=ContextAgentState` (or any schema with `summary_key`). Give the
    system prompt to the policy, not to `prompt=`: the agent prepends `prompt` after the hook,
    outside the budget.
    """
    return context_node(policy, output_key="llm_input_messages", summary_key=summary_key)
