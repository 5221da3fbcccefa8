"""`SQLChatMessageHistory`: a `BaseChatMessageHistory` over
[`ConversationStore`][langmem_sqlite.ConversationStore], a drop-in for langchain-community's.
Construction runs no SQL and opens no pool (`RunnableWithMessageHistory` builds one per turn).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, get_buffer_string
from langchain_core.runnables.utils import ConfigurableFieldSpec

from ..engine import Database, DatabaseLike, Plan
from ..engine.schema import DEFAULT_PREFIX
from ..messages.counting import MessageCounter
from ..validation import IdLike, check_positive
from .store import ConversationStore

try:  # langchain-core deprecates this base class for 2.0; the store does not need it.
    from langchain_core.chat_history import BaseChatMessageHistory as _Base
except ImportError:  # pragma: no cover - langchain-core without chat_history
    _Base = object  # type: ignore[assignment,misc]

__all__ = [
    "USER_CONVERSATION_FIELDS",
    "SQLChatMessageHistory",
    "session_history_factory",
    "user_conversation_history_factory",
]


class SQLChatMessageHistory(_Base):  # type: ignore[misc,valid-type]
    """Chat message history stored in SQL, per user and per session.

    Args:
        session_id: the conversation (str, int or UUID).
        connection: URL, path, `Engine` or `AsyncEngine` (default: `langmem.db`).
        user_id: the user owning the session (str, int or UUID); sessions of different users
            never see each other's messages, even with equal `session_id`.
        table_name: accepted for compatibility with langchain-community: used as the table
            prefix (`"message_store"` gives `message_store_sessions`/`_messages`).
        table_prefix: prefix of the package's table names (default `langmem_`).
        schema: PostgreSQL schema name.
        connection_string: the old name of `connection` (langchain-community).
        engine_args: keyword arguments for `create_engine` when `connection` is a URL.
        async_mode: accepted for compatibility and ignored: both modes always work.
        window: if set,
            [`messages`][langmem_sqlite.history.chat_history.SQLChatMessageHistory.messages] returns
            only the most recent `window` messages (read in SQL); everything stays stored.
        token_counter: how stored token counts are computed (see
            [`ConversationStore`][langmem_sqlite.ConversationStore]).
        snapshot_reads: if true (the default), reads on this object do not see messages that
            other writers add to the session after this object's first read, until this object
            writes or [`refresh`][langmem_sqlite.history.chat_history.SQLChatMessageHistory.refresh]
            is called. `RunnableWithMessageHistory` reads the history twice per turn; a snapshot
            keeps a concurrent turn from making it drop the new human message.
        encryption_key: encrypt messages at rest (see
            [`ConversationStore`][langmem_sqlite.ConversationStore]).
        since_summary: read only the messages that the session's running summary (stored by
            [`context_step`][langmem_sqlite.context_step]) does not cover yet, selected in SQL, so
            a turn costs what is not yet summarized instead of the whole history.
        store: an existing [`ConversationStore`][langmem_sqlite.ConversationStore] to use instead of
            the arguments above.
    """

    def __init__(
        self,
        session_id: IdLike,
        connection: DatabaseLike | Database | None = None,
        *,
        user_id: IdLike | None = None,
        table_name: str | None = None,
        table_prefix: str | None = None,
        schema: str | None = None,
        connection_string: str | None = None,
        engine_args: dict[str, Any] | None = None,
        async_mode: bool | None = None,
        window: int | None = None,
        token_counter: str | MessageCounter | None = None,
        snapshot_reads: bool = True,
        encryption_key: bytes | str | None = None,
        since_summary: bool = False,
        store: ConversationStore | None = None,
    ) -> None:
        if connection is not None and connection_string is not None:
            raise ValueError("connection: give either connection or connection_string, not both")
        if table_name is not None and table_prefix is not None:
            raise ValueError("table_name: give either table_name or table_prefix, not both")
        if store is None:
            prefix = table_prefix or (f"{table_name}_" if table_name else DEFAULT_PREFIX)
            store = ConversationStore(
                connection if connection is not None else connection_string,
                table_prefix=prefix,
                schema=schema,
                token_counter=token_counter,
                engine_args=engine_args,
                encryption_key=encryption_key,
            )
        elif encryption_key is not None:
            raise ValueError("encryption_key: give it to the store, not with store=")
        self.store = store
        self._key = store.key(session_id, user_id)
        self.window = None if window is None else check_positive(window, "window")
        self.snapshot_reads = snapshot_reads
        self._snapshot: int | None = None
        if since_summary and self.window is not None:
            raise ValueError("since_summary: cannot be combined with window=")
        self.since_summary = since_summary
        self.pinned: tuple[str | None, list[tuple[int, BaseMessage]]] | None = None
        """With `since_summary`: the summary record and the `(position, message)` pairs of
        this object's first read (kept while the read snapshot holds)."""
        _ = async_mode

    @property
    def session_id(self) -> str:
        """The session id, as stored."""
        return self._key.session_id

    @property
    def user_id(self) -> str | None:
        """The user id, or `None`."""
        return self._key.user_id or None

    def refresh(self) -> None:
        """Forget the read snapshot, so the next read sees every stored message."""
        self._snapshot = None
        self.pinned = None

    def _remember(self, pairs: list[tuple[int, BaseMessage]]) -> list[BaseMessage]:
        if self.snapshot_reads and self._snapshot is None:
            self._snapshot = pairs[-1][0] if pairs else -1
        return [m for _, m in pairs]

    def _read(self, limit: int | None) -> Any:
        if limit is not None:
            check_positive(limit, "limit")
        if self.since_summary:
            return self._since_summary_plan()
        return self.store._get_plan(self._key, limit, self._snapshot)

    def _since_summary_plan(self) -> Plan[list[tuple[int, BaseMessage]]]:
        if self.pinned is None or not self.snapshot_reads:
            self.pinned = yield from self.store._after_summary_plan(self._key, self._snapshot)
        return self.pinned[1]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages in order (the last `window` if set). Always a new list."""
        return self.get_messages(self.window)

    def get_messages(self, limit: int | None = None) -> list[BaseMessage]:
        """The messages in order; only the most recent `limit` (default: `window`, if set),
        selected in SQL."""
        return self._remember(
            self.store.db.drive(self._read(self.window if limit is None else limit))
        )

    async def aget_messages(self, limit: int | None = None) -> list[BaseMessage]:  # type: ignore[override]
        """Async
        [`get_messages`][langmem_sqlite.history.chat_history.SQLChatMessageHistory.get_messages]."""
        return self._remember(
            await self.store.db.adrive(self._read(self.window if limit is None else limit))
        )

    def get_token_window(self, max_tokens: int) -> list[BaseMessage]:
        """The longest recent run of messages within `max_tokens` stored tokens, never starting
        on an orphan tool result; computed in SQL."""
        pairs = self.store.db.drive(self.store._window_plan(self._key, max_tokens, self._snapshot))
        return [m for _, m in pairs]

    async def aget_token_window(self, max_tokens: int) -> list[BaseMessage]:
        """Async
        [`get_token_window`][langmem_sqlite.history.chat_history.SQLChatMessageHistory.get_token_window]."""
        plan = self.store._window_plan(self._key, max_tokens, self._snapshot)
        return [m for _, m in await self.store.db.adrive(plan)]

    def add_message(self, message: BaseMessage) -> None:
        """Append one message."""
        self.add_messages([message])

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages in one transaction (all validated before anything is written)."""
        self.store.db.drive(self.store._add_plan(self._key, messages, False))
        self.refresh()

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async
        [`add_messages`][langmem_sqlite.history.chat_history.SQLChatMessageHistory.add_messages]."""
        await self.store.db.adrive(self.store._add_plan(self._key, messages, False))
        self.refresh()

    def clear(self) -> None:
        """Delete the session's messages."""
        self.store.clear(self._key.session_id, user_id=self._key.user_id or None)
        self.refresh()

    async def aclear(self) -> None:
        """Async [`clear`][langmem_sqlite.history.chat_history.SQLChatMessageHistory.clear]."""
        await self.store.aclear(self._key.session_id, user_id=self._key.user_id or None)
        self.refresh()

    def __str__(self) -> str:
        try:
            return get_buffer_string(self.get_messages(self.window))
        except Exception as e:  # str() must never raise
            return f"<SQLChatMessageHistory {self._key.session_id!r}: unreadable ({e})>"

    def __repr__(self) -> str:
        return (
            f"SQLChatMessageHistory(session_id={self._key.session_id!r}, "
            f"user_id={self.user_id!r}, url={self.store.db.url!r})"
        )


USER_CONVERSATION_FIELDS = [
    ConfigurableFieldSpec(
        id=key,
        annotation=str,
        name=name,
        description=f"Unique identifier for the {what}.",
        default="",
        is_shared=True,
    )
    for key, name, what in (
        ("user_id", "User ID", "user"),
        ("conversation_id", "Conversation ID", "conversation"),
    )
]
"""`history_factory_config` for
[`user_conversation_history_factory`][langmem_sqlite.user_conversation_history_factory]."""


def session_history_factory(
    connection: DatabaseLike | Database | None = None, **options: Any
) -> Callable[[IdLike], SQLChatMessageHistory]:
    """A `get_session_history(session_id)` for `RunnableWithMessageHistory`.

    `options` are [`SQLChatMessageHistory`][langmem_sqlite.SQLChatMessageHistory] keyword arguments
    (`window`, ...). The store is built once; each call only builds a history object (no SQL).
    """
    store = _store_for(connection, options)

    def get_session_history(session_id: IdLike) -> SQLChatMessageHistory:
        return SQLChatMessageHistory(session_id, store=store, **options)

    return get_session_history


def user_conversation_history_factory(
    connection: DatabaseLike | Database | None = None, **options: Any
) -> Callable[[IdLike, IdLike], SQLChatMessageHistory]:
    """A `get_session_history(user_id, conversation_id)` for `RunnableWithMessageHistory`
    with `history_factory_config=USER_CONVERSATION_FIELDS`."""
    store = _store_for(connection, options)

    def get_session_history(user_id: IdLike, conversation_id: IdLike) -> SQLChatMessageHistory:
        return SQLChatMessageHistory(conversation_id, user_id=user_id, store=store, **options)

    return get_session_history


def _store_for(connection: Any, options: dict[str, Any]) -> ConversationStore:
    store_keys = ("table_prefix", "schema", "token_counter", "engine_args", "encryption_key")
    kwargs = {k: options.pop(k) for k in store_keys if k in options}
    return ConversationStore(connection, **kwargs)
