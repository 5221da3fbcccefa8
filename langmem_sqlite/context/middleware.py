"""An `AgentMiddleware` for `langchain.agents.create_agent`: each model call sees the policy's
input (summary and facts in the one system message), and an updated summary record goes to
the agent state (`context_summary`) with the model's reply; `messages` is never rewritten.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import SystemMessage
from langgraph.types import Command
from typing_extensions import NotRequired

from .policy import ContextPolicy, ContextResult

__all__ = ["ContextMiddleware", "ContextMiddlewareState"]


class ContextMiddlewareState(AgentState):  # type: ignore[type-arg]
    """Agent state with the summary record."""

    context_summary: NotRequired[dict[str, Any] | None]


class ContextMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """Keep every model call within `policy`'s budget, with a running summary.

    Args:
        policy: the [`ContextPolicy`][langmem_sqlite.ContextPolicy]. The agent's `system_prompt` is
            merged into the one system message and counted in the budget (tool schemas are not
            counted).
    """

    state_schema = ContextMiddlewareState

    def __init__(self, policy: ContextPolicy) -> None:
        super().__init__()
        if not isinstance(policy, ContextPolicy):
            raise TypeError(f"policy: expected a ContextPolicy, got {type(policy).__name__}")
        self.policy = policy

    @staticmethod
    def _inputs(request: ModelRequest) -> tuple[list[Any], Any]:  # type: ignore[type-arg]
        head = [request.system_message] if request.system_message is not None else []
        return head + list(request.messages), (request.state or {}).get("context_summary")

    def _where(self, request: ModelRequest) -> dict[str, Any]:  # type: ignore[type-arg]
        """Where the facts come from: the run's config, the agent's store and context."""
        from langgraph.config import get_config

        try:
            config: Any = get_config()
        except RuntimeError:
            config = None
        runtime = request.runtime
        context = getattr(runtime, "context", None)
        assert self.policy.facts_source is not None
        key = self.policy.facts_source.user_id_key
        user = context.get(key) if isinstance(context, dict) else getattr(context, key, None)
        return {"config": config, "store": getattr(runtime, "store", None), "user_id": user}

    @staticmethod
    def _request(request: ModelRequest, result: ContextResult) -> ModelRequest:  # type: ignore[type-arg]
        msgs = result.messages
        system = msgs[0] if msgs and isinstance(msgs[0], SystemMessage) else None
        rest: list[Any] = msgs[1:] if system else msgs
        return request.override(system_message=system, messages=rest)

    @staticmethod
    def _response(response: Any, result: ContextResult) -> Any:
        if result.summary is None:
            return response
        if not isinstance(response, ModelResponse):
            response = ModelResponse(result=[response])
        command: Command[Any] = Command(update={"context_summary": result.summary})
        return ExtendedModelResponse(model_response=response, command=command)

    def wrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[[ModelRequest], ModelResponse],  # type: ignore[type-arg]
    ) -> Any:
        """Apply the policy, call the model, record the summary."""
        messages, summary = self._inputs(request)
        facts = None
        if self.policy.facts_source is not None:
            facts = self.policy.fetch_facts(messages, **self._where(request))
        result = self.policy.prepare(messages, summary, facts=facts)
        return self._response(handler(self._request(request, result)), result)

    async def awrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],  # type: ignore[type-arg]
    ) -> Any:
        """Async
        [`wrap_model_call`][langmem_sqlite.context.middleware.ContextMiddleware.wrap_model_call]."""
        messages, summary = self._inputs(request)
        facts = None
        if self.policy.facts_source is not None:
            facts = await self.policy.afetch_facts(messages, **self._where(request))
        result = await self.policy.aprepare(messages, summary, facts=facts)
        return self._response(await handler(self._request(request, result)), result)
