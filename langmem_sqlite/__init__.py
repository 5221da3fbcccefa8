"""langmem-sqlite: durable, bounded conversation memory for LangChain and LangGraph in SQL.

SQLite by default (a file, zero configuration), PostgreSQL or MariaDB/MySQL by changing one URL.
"""

from .chat_history import (
    USER_CONVERSATION_FIELDS,
    SQLChatMessageHistory,
    session_history_factory,
    user_conversation_history_factory,
)
from .conversation_store import ConversationStore, SessionInfo
from .db import Database, get_database
from .migrate import SchemaTooNewError
from .windows import drop_leading_orphans

__all__ = [
    "USER_CONVERSATION_FIELDS",
    "ConversationStore",
    "Database",
    "SQLChatMessageHistory",
    "SchemaTooNewError",
    "SessionInfo",
    "drop_leading_orphans",
    "get_database",
    "session_history_factory",
    "user_conversation_history_factory",
]

__version__ = "0.1.0"
