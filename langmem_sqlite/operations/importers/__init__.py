"""Importers from the packages this one replaces:
[`import_chat_history`][langmem_sqlite.operations.importers.import_chat_history]
(langchain-community `SQLChatMessageHistory` tables) and
[`import_checkpoints`][langmem_sqlite.operations.importers.import_checkpoints] (any LangGraph
checkpointer). Both skip what is already imported (resumable), return counts, and verify by
reading every imported item back.
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
