"""Whole-database operations, each a library function the CLI also calls.

* :mod:`.copy`: :func:`copy_database`, between any two dialects;
* :mod:`.erasure`: :func:`forget_user`, everything stored about a user, gone;
* :mod:`.export`: a session or a thread as JSON, JSONL or Markdown;
* :mod:`.maintenance`: users, table statistics, retention;
* :mod:`.importers`: from langchain-community's and LangGraph's own tables.
"""
