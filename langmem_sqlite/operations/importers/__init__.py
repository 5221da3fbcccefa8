"""Importers from the packages this one replaces, into this package's tables.

* [`import_chat_history`][langmem_sqlite.operations.importers.import_chat_history] --
  langchain-community `SQLChatMessageHistory` tables (any dialect SQLAlchemy reaches) into the
  conversation tables.
* [`import_checkpoints`][langmem_sqlite.operations.importers.import_checkpoints] -- any LangGraph
  checkpointer (`SqliteSaver` files, `PostgresSaver` databases: see
  [`open_sqlite_saver`][langmem_sqlite.operations.importers.open_sqlite_saver],
  [`open_postgres_saver`][langmem_sqlite.operations.importers.open_postgres_saver]) into
  [`SQLSaver`][langmem_sqlite.SQLSaver]: threads, checkpoints, pending writes.

Both are idempotent and resumable (what is already imported is skipped), show a progress bar
when asked, return counts, and verify by reading every imported item back.
"""

from .checkpoints import (
    import_checkpoints,
    open_postgres_saver,
    open_sqlite_saver,
    source_thread_ids,
)
from .history import import_chat_history
from .report import ImportMismatchError, ImportReport

__all__ = [
    "ImportMismatchError",
    "ImportReport",
    "import_chat_history",
    "import_checkpoints",
    "open_postgres_saver",
    "open_sqlite_saver",
    "source_thread_ids",
]
