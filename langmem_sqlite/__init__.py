"""langmem-sqlite: durable, bounded conversation memory for LangChain and LangGraph in SQL.

SQLite by default, PostgreSQL or MariaDB/MySQL by changing one URL. The names below are
imported on first use, so that the command line starts fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "USER_CONVERSATION_FIELDS": "history",
    "SQLChatMessageHistory": "history",
    "session_history_factory": "history",
    "user_conversation_history_factory": "history",
    "CheckpointEncryptionError": "checkpoint",
    "SQLSaver": "checkpoint",
    "ThreadInfo": "checkpoint",
    "ContextBudgetError": "context",
    "ContextPolicy": "context",
    "ContextStructureError": "context",
    "context_node": "context",
    "context_step": "context",
    "pre_model_hook": "context",
    "trim_context": "context",
    "ConversationStore": "history",
    "SessionInfo": "history",
    "EncodingUnavailableError": "messages",
    "count_tokens": "messages",
    "resolve_message_counter": "messages",
    "MessageCipher": "crypto",
    "Database": "engine",
    "get_database": "engine",
    "ForgetReport": "operations.erasure",
    "aforget_user": "operations.erasure",
    "forget_user": "operations.erasure",
    "SchemaTooNewError": "engine.migrations",
    "Memory": "memory",
    "SQLStore": "store",
    "CopyReport": "operations.copy",
    "acopy_database": "operations.copy",
    "copy_database": "operations.copy",
    "drop_leading_orphans": "messages",
}

__all__ = [
    "USER_CONVERSATION_FIELDS",
    "CheckpointEncryptionError",
    "ContextBudgetError",
    "ContextPolicy",
    "ContextStructureError",
    "ConversationStore",
    "CopyReport",
    "Database",
    "EncodingUnavailableError",
    "ForgetReport",
    "Memory",
    "MessageCipher",
    "SQLChatMessageHistory",
    "SQLSaver",
    "SQLStore",
    "SchemaTooNewError",
    "SessionInfo",
    "ThreadInfo",
    "acopy_database",
    "aforget_user",
    "context_node",
    "context_step",
    "copy_database",
    "count_tokens",
    "drop_leading_orphans",
    "forget_user",
    "get_database",
    "pre_model_hook",
    "resolve_message_counter",
    "session_history_factory",
    "trim_context",
    "user_conversation_history_factory",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:  # a submodule used as an attribute (``langmem_sqlite.store.X``)
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'langmem_sqlite' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:
    from .checkpoint import CheckpointEncryptionError, SQLSaver, ThreadInfo
    from .context import (
        ContextBudgetError,
        ContextPolicy,
        ContextStructureError,
        context_node,
        context_step,
        pre_model_hook,
        trim_context,
    )
    from .crypto import MessageCipher
    from .engine import Database, get_database
    from .engine.migrations import SchemaTooNewError
    from .history.chat_history import (
        USER_CONVERSATION_FIELDS,
        SQLChatMessageHistory,
        session_history_factory,
        user_conversation_history_factory,
    )
    from .history.store import ConversationStore, SessionInfo
    from .memory import Memory
    from .messages.counting import EncodingUnavailableError, count_tokens, resolve_message_counter
    from .messages.windows import drop_leading_orphans
    from .operations.copy import CopyReport, acopy_database, copy_database
    from .operations.erasure import ForgetReport, aforget_user, forget_user
    from .store import SQLStore
