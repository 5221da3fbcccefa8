"""Conversation history in SQL: `ConversationStore` (`store`, over `sql` and `codec`) and
LangChain's `BaseChatMessageHistory` over it, `SQLChatMessageHistory` (`chat_history`)."""

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
