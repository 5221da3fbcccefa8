"""Long-term memory: a LangGraph `BaseStore` in SQL ([`SQLStore`][langmem_sqlite.SQLStore]) and user
facts for agents ([`UserFacts`][langmem_sqlite.store.UserFacts], the fact tools and hooks)."""

from .extraction import aextract_candidate_facts, extract_candidate_facts
from .facts import UserFacts, fact_tools, facts_hook, with_facts
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
