"""langmem-sqlite: durable, bounded conversation memory for LangChain and LangGraph in SQL.

SQLite by default (a file, zero configuration), PostgreSQL or MariaDB/MySQL by changing one URL.
"""

from .chat_history import (
    USER_CONVERSATION_FIELDS,
    SQLChatMessageHistory,
    session_history_factory,
    user_conversation_history_factory,
)
from .checkpoint import SQLSaver, ThreadInfo
from .context import (
    ContextBudgetError,
    ContextPolicy,
    ContextStructureError,
    context_node,
    context_step,
    pre_model_hook,
    trim_context,
)
from .conversation_store import ConversationStore, SessionInfo
from .counting import count_tokens, resolve_message_counter
from .crypto import MessageCipher
from .db import Database, get_database
from .erasure import ForgetReport, aforget_user, forget_user
from .migrate import SchemaTooNewError
from .store import Memory, SQLStore
from .windows import drop_leading_orphans

__all__ = [
    "USER_CONVERSATION_FIELDS",
    "ContextBudgetError",
    "ContextPolicy",
    "ContextStructureError",
    "ConversationStore",
    "Database",
    "ForgetReport",
    "Memory",
    "MessageCipher",
    "SQLChatMessageHistory",
    "SQLSaver",
    "SQLStore",
    "SchemaTooNewError",
    "SessionInfo",
    "ThreadInfo",
    "aforget_user",
    "context_node",
    "context_step",
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

__version__ = "0.1.0"
