"""The four adapters of ``ContextPolicy`` driven the same way, for the tests and the benchmark.

Each driver runs whole turns (the tool loop up to the answer) on a real graph or chain:

* ``hook``: ``create_react_agent(pre_model_hook=pre_model_hook(policy))``;
* ``middleware``: ``create_agent(middleware=[ContextMiddleware(policy)])``;
* ``node``: a ``StateGraph`` with ``context_node(policy)`` before the model and a ``ToolNode``;
* ``step``: ``RunnableWithMessageHistory(context_step(policy) | model)`` on a SQL history, the
  tool loop driven by the caller (tool results are the next input), the summary stored on the
  session row.

The model records its inputs (``model.calls``); ``history()`` and ``record()`` read back what
was stored.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langmem_sqlite import ConversationStore, user_conversation_history_factory
from langmem_sqlite.context import (
    ContextAgentState,
    ContextMiddleware,
    ContextPolicy,
    ContextState,
    context_node,
    context_step,
    load_record,
    pre_model_hook,
)
from langmem_sqlite.history.chat_history import USER_CONVERSATION_FIELDS

__all__ = ["ADAPTERS", "Driver", "make_driver"]

ADAPTERS = ("hook", "middleware", "node", "step")


class Driver:
    """One adapter around ``policy`` and ``model`` (see the module docstring)."""

    def __init__(
        self,
        kind: str,
        policy: ContextPolicy,
        model: Any,
        tools: Sequence[BaseTool] = (),
        *,
        store: Any = None,
        user: str = "u1",
        url: str | None = None,
        prefix: str = "ctx_",
        thread: str = "t1",
    ) -> None:
        if kind not in ADAPTERS:
            raise ValueError(kind)
        self.kind, self.policy, self.model, self.tools = kind, policy, model, list(tools)
        self.user = user
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": thread, "user_id": user, "conversation_id": thread},
            "recursion_limit": 200,
        }
        if kind == "step":
            if url is None:
                raise ValueError("the step driver needs a database url")
            self.store = ConversationStore(url, table_prefix=prefix)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.app: Any = RunnableWithMessageHistory(
                    context_step(policy) | model,
                    user_conversation_history_factory(url, table_prefix=prefix),
                    history_factory_config=USER_CONVERSATION_FIELDS,
                )
        else:
            self.app = self._graph(kind, store)

    def _graph(self, kind: str, store: Any) -> Any:
        saver = InMemorySaver()
        if kind == "hook":
            from langgraph.prebuilt import create_react_agent

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return create_react_agent(
                    self.model,
                    self.tools,
                    pre_model_hook=pre_model_hook(self.policy),
                    state_schema=ContextAgentState,
                    checkpointer=saver,
                    store=store,
                )
        if kind == "middleware":
            from langchain.agents import create_agent

            return create_agent(
                self.model,
                self.tools,
                middleware=[ContextMiddleware(self.policy)],
                checkpointer=saver,
                store=store,
            )
        bound = self.model.bind_tools(self.tools) if self.tools else self.model

        def call_model(state: ContextState) -> dict[str, Any]:
            return {"messages": [bound.invoke(state["llm_input_messages"])]}

        graph = StateGraph(ContextState)
        graph.add_node("context", context_node(self.policy))
        graph.add_node("model", call_model)
        graph.add_edge(START, "context")
        graph.add_edge("context", "model")
        if self.tools:
            graph.add_node("tools", ToolNode(self.tools))
            graph.add_conditional_edges("model", tools_condition)
            graph.add_edge("tools", "context")
        return graph.compile(checkpointer=saver, store=store)

    def _begin(self, index: int | None) -> None:
        if index is not None and hasattr(self.model, "begin"):
            self.model.begin(index)

    def turn(self, human: BaseMessage, index: int | None = None) -> None:
        """Run one turn (raises what the policy raises, e.g. ``ContextBudgetError``)."""
        self._begin(index)
        if self.kind != "step":
            self.app.invoke({"messages": [human]}, self.config)
            return
        out = self.app.invoke([human], self.config)
        tools = {t.name: t for t in self.tools}
        while out.tool_calls:
            results = [
                ToolMessage(tools[c["name"]].invoke(c["args"]), tool_call_id=c["id"], id=c["id"])
                for c in out.tool_calls
            ]
            out = self.app.invoke(results, self.config)

    async def aturn(self, human: BaseMessage, index: int | None = None) -> None:
        """Async :meth:`turn`."""
        self._begin(index)
        if self.kind != "step":
            await self.app.ainvoke({"messages": [human]}, self.config)
            return
        out = await self.app.ainvoke([human], self.config)
        tools = {t.name: t for t in self.tools}
        while out.tool_calls:
            results = [
                ToolMessage(
                    await tools[c["name"]].ainvoke(c["args"]), tool_call_id=c["id"], id=c["id"]
                )
                for c in out.tool_calls
            ]
            out = await self.app.ainvoke(results, self.config)

    def history(self) -> list[BaseMessage]:
        """Every message stored for the thread (or session)."""
        if self.kind == "step":
            return list(
                self.store.get_messages(self.config["configurable"]["thread_id"], user_id=self.user)
            )
        return list(self.app.get_state(self.config).values.get("messages", []))

    def record(self) -> dict[str, Any] | None:
        """The summary record stored for the thread (or session)."""
        if self.kind == "step":
            session = self.config["configurable"]["thread_id"]
            return load_record(self.store.get_summary(session, user_id=self.user))
        return self.app.get_state(self.config).values.get("context_summary")


def make_driver(
    kind: str, policy: ContextPolicy, model: Any, tools: Sequence[BaseTool] = (), **kw: Any
) -> Driver:
    """A :class:`Driver` (see there)."""
    return Driver(kind, policy, model, tools, **kw)
