"""Context-window management: exact token counts, safe trimming, incremental summaries, facts.

[`trim_context`][langmem_sqlite.trim_context] trims to a budget;
[`ContextPolicy`][langmem_sqlite.ContextPolicy] builds the whole model input for every adapter:
[`context_node`][langmem_sqlite.context_node] (`StateGraph`),
[`pre_model_hook`][langmem_sqlite.pre_model_hook] (`create_react_agent`),
[`ContextMiddleware`][langmem_sqlite.context.middleware.ContextMiddleware] (`create_agent`) and
[`context_step`][langmem_sqlite.context_step] (`RunnableWithMessageHistory`).

Each model input is, in this order of priority, within one budget counted exactly: the system
prompt; the latest human message and the rest of its turn (tool results shortened if need be;
only if these alone cannot fit is the turn refused, with a
[`ContextBudgetError`][langmem_sqlite.ContextBudgetError] naming the part too large and by how
much); the running summary of older turns (shortened for the call, newest part kept, when it does
not fit beside the turn); the user's long-term facts (`facts=`, within `facts_share` of the budget,
least relevant dropped first); the rest of the turn's tool results; as many older messages as fit.

Example (`create_agent`; the other adapters take the same policy):

```python
store = SQLStore("agent.db")
policy = ContextPolicy(
    max_tokens=8_000,              # the whole model input, system prompt included
    model="gpt-4o",                # exact tiktoken counts, like ChatOpenAI's
    system_prompt="You are ...",
    summarizer=ChatOpenAI(model="gpt-4o-mini"),
    facts=True,                    # the user's facts, from the agent's store
)
agent = create_agent(model, fact_tools(), middleware=[ContextMiddleware(policy)],
                     checkpointer=SQLSaver("agent.db"), store=store)
agent.invoke({"messages": [("user", "hi")]},
             {"configurable": {"thread_id": "t1", "user_id": "ada"}})
# langgraph: create_react_agent(model, tools, pre_model_hook=pre_model_hook(policy),
#                               state_schema=ContextAgentState, store=store)
# chains:    RunnableWithMessageHistory(prompt | context_step(policy) | model, ...), with
#            facts=store on the policy (a chain has no store of its own)
trimmed = trim_context(messages, max_tokens=4_000, token_counter="gpt-4o")
```
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
