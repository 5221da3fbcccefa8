"""`Memory`: one object per database URL handing out everything an agent remembers.

```python
memory = Memory("sqlite:///agent.db")
graph = builder.compile(checkpointer=memory.checkpointer, store=memory.store)
history = memory.history("session-1", user_id="u1")
```

They share one [`Database`][langmem_sqlite.Database] (pooled engines), one set of tables and
one `encryption_key`.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from langgraph.store.base import IndexConfig, TTLConfig

from .crypto import MessageCipher
from .defaults import default_connection
from .engine import Database, DatabaseLike, get_database
from .engine.schema import DEFAULT_PREFIX
from .history.chat_history import SQLChatMessageHistory
from .history.store import ConversationStore
from .messages.counting import MessageCounter
from .store.facts import UserFacts
from .store.store import SQLStore
from .validation import IdLike

if TYPE_CHECKING:  # the checkpointer is imported when first used
    from .checkpoint import SQLSaver

__all__ = ["Memory"]


class Memory:
    """Chat history, checkpointer and long-term store for one database.

    Args:
        connection: URL, path, `Engine`, `AsyncEngine` or [`Database`][langmem_sqlite.Database]
            (default: `$LANGMEM_SQLITE_URL` or `langmem.db`).
        table_prefix: prefix of every table name.
        schema: PostgreSQL schema name.
        index: semantic-search config for [`store`][langmem_sqlite.memory.Memory.store] (LangGraph
            `IndexConfig`).
        ttl: TTL config for [`store`][langmem_sqlite.memory.Memory.store] (LangGraph `TTLConfig`).
        token_counter: how the conversation store counts tokens.
        engine_args: keyword arguments for `create_engine` when `connection` is a URL.
        encryption_key: a 16, 24 or 32 byte key (`bytes`, or a `str` of that many UTF-8
            bytes): messages, summaries and titles
            ([`ConversationStore`][langmem_sqlite.ConversationStore]), checkpoints (LangGraph's
            `EncryptedSerializer`) and store items with their embeddings
            ([`SQLStore`][langmem_sqlite.SQLStore]) are stored AES-GCM encrypted. Needs the
            `encryption` extra.
    """

    def __init__(
        self,
        connection: DatabaseLike | Database | None = None,
        *,
        table_prefix: str = DEFAULT_PREFIX,
        schema: str | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        token_counter: str | MessageCounter | None = None,
        engine_args: dict[str, Any] | None = None,
        encryption_key: bytes | str | None = None,
    ) -> None:
        self.db: Database = get_database(
            default_connection() if connection is None else connection, engine_args=engine_args
        )
        self.table_prefix = table_prefix
        self.schema = schema
        self._index = index
        self._ttl = ttl
        self._token_counter = token_counter
        self._key = encryption_key
        if encryption_key is not None:
            MessageCipher(encryption_key)  # a bad key fails here, not at first use

    @cached_property
    def conversations(self) -> ConversationStore:
        """The [`ConversationStore`][langmem_sqlite.ConversationStore] behind every
        [`history`][langmem_sqlite.memory.Memory.history]."""
        return ConversationStore(
            self.db,
            table_prefix=self.table_prefix,
            schema=self.schema,
            token_counter=self._token_counter,
            encryption_key=self._key,
        )

    @cached_property
    def store(self) -> SQLStore:
        """The long-term [`SQLStore`][langmem_sqlite.SQLStore] (`compile(store=...)`)."""
        return SQLStore(
            self.db,
            index=self._index,
            ttl=self._ttl,
            table_prefix=self.table_prefix,
            schema=self.schema,
            encryption_key=self._key,
        )

    @cached_property
    def checkpointer(self) -> SQLSaver:
        """The LangGraph checkpointer (`compile(checkpointer=...)`)."""
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        from .checkpoint import SQLSaver

        serde = None
        if self._key is not None:
            key = self._key.encode("utf-8") if isinstance(self._key, str) else bytes(self._key)
            serde = EncryptedSerializer.from_pycryptodome_aes(key=key)
        return SQLSaver(self.db, table_prefix=self.table_prefix, schema=self.schema, serde=serde)

    def facts(self, user_id: IdLike, **kwargs: Any) -> UserFacts:
        """The [`UserFacts`][langmem_sqlite.store.UserFacts] of one user in
        [`store`][langmem_sqlite.memory.Memory.store] (encrypted at rest with the memory's
        `encryption_key`); `kwargs` go to [`UserFacts`][langmem_sqlite.store.UserFacts]."""
        return UserFacts(self.store, user_id, **kwargs)

    def history(
        self, session_id: IdLike, user_id: IdLike | None = None, **kwargs: Any
    ) -> SQLChatMessageHistory:
        """A chat history for one session (of one user) on the shared conversation store;
        `kwargs` go to [`SQLChatMessageHistory`][langmem_sqlite.SQLChatMessageHistory] (`window`,
        `snapshot_reads`)."""
        return SQLChatMessageHistory(
            session_id, user_id=user_id, store=self.conversations, **kwargs
        )

    def close(self) -> None:
        """Stop the store's TTL sweeper, if started (the engines stay shared)."""
        if "store" in self.__dict__:
            self.store.close()

    def __repr__(self) -> str:
        return f"Memory({self.db.url!r}, table_prefix={self.table_prefix!r})"
