"""Whole-database operations, each a library function the CLI also calls.

* [`copy`][langmem_sqlite.operations.copy]: [`copy_database`][langmem_sqlite.copy_database], between
  any two dialects;
* [`erasure`][langmem_sqlite.operations.erasure]: [`forget_user`][langmem_sqlite.forget_user],
  everything stored about a user, gone;
* [`export`][langmem_sqlite.operations.export]: a session or a thread as JSON, JSONL or Markdown;
* [`maintenance`][langmem_sqlite.operations.maintenance]: users, table statistics, retention;
* [`importers`][langmem_sqlite.operations.importers]: from langchain-community's and LangGraph's own
  tables.
"""
