"""Conversation history: per-user, per-session messages in SQL.

[`ConversationStore`][langmem_sqlite.ConversationStore] (`store`) is the sync and async API
over the tables (`sql`: their SQL; `codec`: messages to and from the stored JSON text);
[`SQLChatMessageHistory`][langmem_sqlite.SQLChatMessageHistory] (`chat_history`) is LangChain's
`BaseChatMessageHistory` over it.
"""

from .chat_history import (
    USER_CONVERSATION_FIELDS,
    SQLChatMessageHistory,
    session_history_factory,
    user_conversation_history_factory,
)
from .sql import SessionInfo
from .store import ConversationStore

__all__ = [
    "USER_CONVERSATION_FIELDS",
    "ConversationStore",
    "SQLChatMessageHistory",
    "SessionInfo",
    "session_history_factory",
    "user_conversation_history_factory",
]
