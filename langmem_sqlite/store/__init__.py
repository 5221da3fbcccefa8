"""Long-term memory: a LangGraph ``BaseStore`` in SQL, user facts for agents, and
:class:`Memory`, one entry point handing out history, checkpointer and store for one URL."""

from .facts import (
    UserFacts,
    aextract_candidate_facts,
    extract_candidate_facts,
    fact_tools,
    facts_hook,
    with_facts,
)
from .memory import Memory
from .store import SQLStore

__all__ = [
    "Memory",
    "SQLStore",
    "UserFacts",
    "aextract_candidate_facts",
    "extract_candidate_facts",
    "fact_tools",
    "facts_hook",
    "with_facts",
]
