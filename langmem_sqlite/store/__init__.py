"""Long-term memory: a LangGraph ``BaseStore`` in SQL (:class:`SQLStore`) and user facts for
agents (:class:`UserFacts`, the fact tools and hooks)."""

from .facts import (
    UserFacts,
    aextract_candidate_facts,
    extract_candidate_facts,
    fact_tools,
    facts_hook,
    with_facts,
)
from .store import SQLStore

__all__ = [
    "SQLStore",
    "UserFacts",
    "aextract_candidate_facts",
    "extract_candidate_facts",
    "fact_tools",
    "facts_hook",
    "with_facts",
]
