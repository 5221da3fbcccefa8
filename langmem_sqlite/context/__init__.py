"""Context-window management: exact token counts, safe trimming and incremental summaries.

* :func:`trim_context`: pure trimming to a token / message / character budget.
* :class:`ContextPolicy`: trimming plus a running summary, one object for every adapter:
  :func:`context_node` (``StateGraph``), :func:`pre_model_hook` (``create_react_agent``),
  :class:`ContextMiddleware` (``create_agent``, imported lazily as it needs ``langchain``) and
  :func:`context_step` (``RunnableWithMessageHistory`` with the summary stored in SQL).

Example::

    policy = ContextPolicy(
        max_tokens=4_000,              # the whole model input, system prompt included
        model="gpt-4o",                # exact tiktoken counts, like ChatOpenAI's
        system_prompt="You are ...",
        summarizer=ChatOpenAI(model="gpt-4o-mini"),
    )
    # langgraph: create_react_agent(model, tools, pre_model_hook=pre_model_hook(policy),
    #                               state_schema=ContextAgentState)
    # langchain: create_agent(model, tools, middleware=[ContextMiddleware(policy)])
    # chains:    RunnableWithMessageHistory(prompt | context_step(policy) | model, ...)
    trimmed = trim_context(messages, max_tokens=4_000, token_counter="gpt-4o")
"""

from __future__ import annotations

from typing import Any

from .graph import SUMMARY_KEY, ContextAgentState, ContextState, context_node, pre_model_hook
from .history import context_step
from .policy import MODEL_CONTEXT_WINDOWS, ContextPolicy, ContextResult
from .structure import ContextBudgetError, ContextStructureError, check_structure, merge_system
from .summary import dump_record, load_record
from .trimming import TRUNCATION_MARKER, trim_context

__all__ = [
    "MODEL_CONTEXT_WINDOWS",
    "SUMMARY_KEY",
    "TRUNCATION_MARKER",
    "ContextAgentState",
    "ContextBudgetError",
    "ContextMiddleware",
    "ContextPolicy",
    "ContextResult",
    "ContextState",
    "ContextStructureError",
    "check_structure",
    "context_node",
    "context_step",
    "dump_record",
    "load_record",
    "merge_system",
    "pre_model_hook",
    "trim_context",
]


def __getattr__(name: str) -> Any:
    if name in ("ContextMiddleware", "ContextMiddlewareState"):
        from . import middleware

        return getattr(middleware, name)
    raise AttributeError(name)
