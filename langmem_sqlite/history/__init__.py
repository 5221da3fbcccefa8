"""Conversation history: per-user, per-session messages in SQL.

* [`store`][langmem_sqlite.history.store]: [`ConversationStore`][langmem_sqlite.ConversationStore],
  the sync and async API over the tables;
* `sql`: the SQL of sessions and messages (storage functions on a
  [`Unit`][langmem_sqlite.engine.Unit]);
* `codec`: messages to and from the stored JSON text;
* [`chat_history`][langmem_sqlite.history.chat_history]:
  [`SQLChatMessageHistory`][langmem_sqlite.SQLChatMessageHistory], LangChain's
  `BaseChatMessageHistory`.
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
