"""Conversation history: per-user, per-session messages in SQL.

* :mod:`.store`: :class:`ConversationStore`, the sync and async API over the tables;
* :mod:`.sql`: the SQL of sessions and messages (storage functions on a :class:`Session`);
* :mod:`.codec`: messages to and from the stored JSON text;
* :mod:`.chat_history`: :class:`SQLChatMessageHistory`, LangChain's ``BaseChatMessageHistory``.
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
