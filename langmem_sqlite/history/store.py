"""`ConversationStore`: per-user, per-session message history in SQL, sync and async.

Each operation is one [`Plan`][langmem_sqlite.engine.Plan], driven by the sync method with
`Database.drive` and by its `a`-prefixed twin with `Database.adrive`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from .. import clock
from ..crypto import MessageCipher, is_encrypted, resolve_cipher
from ..defaults import DEFAULT_DATABASE, MAX_DAYS, default_connection
from ..engine import Database, DatabaseLike, Plan, Step, get_database
from ..engine.migrations import schema_plan
from ..engine.schema import DEFAULT_PREFIX, Tables, get_tables
from ..messages.counting import MessageCounter, TokenCounter, resolve_message_counter
from ..messages.windows import drop_leading_orphans, orphan_prefix_length
from ..validation import (
    IdLike,
    check_id,
    check_number,
    check_optional_id,
    check_positive,
    check_text,
)
from . import sql
from .codec import decode_message, encode_message, message_text
from .sql import MessageRow, SessionInfo, SessionKey

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MAX_DAYS",
    "MAX_MESSAGE_TOKENS",
    "ConversationStore",
    "SessionInfo",
    "idle_cutoff",
]


DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""Largest serialized message accepted by default (MariaDB's default packet limit is 16 MiB
per statement for a single value; raise `max_allowed_packet` there for larger messages)."""

MAX_MESSAGE_TOKENS = 2**40
"""The largest token count a `token_counter` may give one message: a session's running
total stays within a 64-bit integer up to 8 million such messages."""


def _text(value: Any, name: str) -> str | None:
    """A title or summary: `str` or `None`, without NUL or lone surrogates."""
    return None if value is None else check_text(value, name)


def idle_cutoff(days: Any) -> int:
    """The time (ms since the epoch) `days` days ago.

    Raises:
        ValueError: `days` is not a finite number from 0 to
            [`MAX_DAYS`][langmem_sqlite.history.store.MAX_DAYS] (a `bool` neither).
    """
    return clock.now_ms() - int(check_number(days, "days", low=0, high=MAX_DAYS) * clock.DAY_MS)


class ConversationStore:
    """Conversation history for many users and sessions in one database.

    Args:
        connection: a URL (`"postgresql://..."`), a path (`"memory.db"` is a SQLite file), an
            `Engine` or an `AsyncEngine`. Defaults to `$LANGMEM_SQLITE_URL` or
            `langmem.db`. Engines and pools are shared per URL across stores.
        table_prefix: prefix of every table name (letters, digits, `_`).
        schema: PostgreSQL schema (created if missing); on other dialects, a schema they know.
        token_counter: how stored token counts are computed: `"approximate"` (default), or a
            callable `message -> int`.
        max_message_bytes: largest serialized message accepted.
        encryption_key: if given (16, 24 or 32 bytes), message bodies, titles and summaries are
            stored AES-GCM encrypted and `content_text` is left empty (see
            [`langmem_sqlite.crypto`][langmem_sqlite.crypto]; needs the `encryption` extra).
        cipher: a [`MessageCipher`][langmem_sqlite.MessageCipher], instead of `encryption_key`.

    Both sync and async methods work whatever `connection` is: the package builds the twin
    engine for the same database.
    """

    def __init__(
        self,
        connection: DatabaseLike | Database | None = None,
        *,
        table_prefix: str = DEFAULT_PREFIX,
        schema: str | None = None,
        token_counter: str | MessageCounter | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        engine_args: dict[str, Any] | None = None,
        encryption_key: bytes | str | None = None,
        cipher: MessageCipher | None = None,
    ) -> None:
        self.cipher: MessageCipher | None = resolve_cipher(encryption_key, cipher)
        self.db: Database = get_database(
            default_connection() if connection is None else connection, engine_args=engine_args
        )
        self.tables: Tables = get_tables(table_prefix, schema)
        self.count_tokens: TokenCounter = resolve_message_counter(token_counter)
        self.max_message_bytes = check_positive(max_message_bytes, "max_message_bytes")

    # -- helpers -------------------------------------------------------------------------------

    def key(self, session_id: IdLike, user_id: IdLike | None = None) -> SessionKey:
        """Validate and normalise a (session, user) pair."""
        return SessionKey(check_optional_id(user_id, "user_id"), check_id(session_id, "session_id"))

    def _op(self, fn: Any, *args: Any, write: bool = False, single: bool = False) -> Plan[Any]:
        yield from schema_plan(self.db, self.tables)
        return (yield Step(fn, (self.tables, *args), write=write, single=single))

    def _seal(self, key: SessionKey, text: str | None) -> str | None:
        """`text` as stored: encrypted to the session when the store has a cipher."""
        if self.cipher is None or text is None:
            return text
        return self.cipher.encrypt(text, f"{key.user_id}\x00{key.session_id}".encode())

    def _open(self, key: SessionKey, stored: str | None) -> str | None:
        """Inverse of `_seal`; `ValueError` for an encrypted value without the key."""
        if stored is None or (self.cipher is None and not is_encrypted(stored)):
            return stored
        if self.cipher is None:
            raise ValueError("stored value is encrypted: give the store its encryption_key")
        return self.cipher.decrypt(stored, f"{key.user_id}\x00{key.session_id}".encode())

    def _decode(self, key: SessionKey, rows: Sequence[Any]) -> list[tuple[int, BaseMessage]]:
        """`(position, message)` pairs of rows `(seq, ..., body)`: the body is the last column."""
        bodies = [decode_message(self._open(key, r[-1])) for r in rows]  # type: ignore[arg-type]
        return list(zip([r[0] for r in rows], bodies, strict=True))

    def _reveal(self, info: SessionInfo) -> SessionInfo:
        if self.cipher is None:
            return info
        key = SessionKey(info.user_id or "", info.session_id)
        title, summary = self._open(key, info.title), self._open(key, info.summary)
        return dataclasses.replace(info, title=title, summary=summary)

    def _rows(
        self, messages: Sequence[BaseMessage], key: SessionKey | None = None
    ) -> list[MessageRow]:
        if isinstance(messages, BaseMessage) or not isinstance(messages, Sequence):
            raise TypeError("messages: expected a sequence of BaseMessage")
        rows = []
        for message in messages:
            body = encode_message(message)
            size = len(body.encode("utf-8", "surrogatepass"))
            if size > self.max_message_bytes:
                raise ValueError(
                    f"messages: a {message.type} message serializes to {size} bytes, over "
                    f"max_message_bytes={self.max_message_bytes}"
                )
            count = self.count_tokens(message)  # an int from 0 to INT64_MAX (TokenCounter checks)
            if count > MAX_MESSAGE_TOKENS:
                raise ValueError(
                    f"token_counter: expected an int from 0 to {MAX_MESSAGE_TOKENS:_} "
                    f"(a message's count), got {count!r}"
                )
            rows.append(
                MessageRow(
                    type=message.type,
                    message_id=check_id(message.id, "message.id") if message.id else None,
                    content_text="" if self.cipher else message_text(message),
                    body=body if key is None else str(self._seal(key, body)),
                    token_count=count,
                )
            )
        return rows

    # -- plans (each operation once) -------------------------------------------------------------

    def _get_plan(
        self, key: SessionKey, limit: int | None, max_seq: int | None = None
    ) -> Plan[list[tuple[int, BaseMessage]]]:
        if limit is not None:
            check_positive(limit, "limit")
        rows = yield from self._op(sql.read_messages, key, limit, max_seq, single=True)
        return self._decode(key, rows)

    def _after_summary_plan(
        self, key: SessionKey, max_seq: int | None = None
    ) -> Plan[tuple[str | None, list[tuple[int, BaseMessage]]]]:
        summary, rows = yield from self._op(sql.read_after_summary, key, max_seq)
        return self._open(key, summary), self._decode(key, rows)

    def _window_plan(
        self, key: SessionKey, max_tokens: int, max_seq: int | None = None
    ) -> Plan[list[tuple[int, BaseMessage]]]:
        check_positive(max_tokens, "max_tokens", allow_zero=True)
        rows = yield from self._op(sql.read_token_window, key, max_tokens, max_seq, single=True)
        return self._decode(key, rows[orphan_prefix_length([r[1] for r in rows]) :])

    def _load_plan(
        self, key: SessionKey, limit: int | None, max_tokens: int | None
    ) -> Plan[list[BaseMessage]]:
        if limit is not None:
            check_positive(limit, "limit")
        if max_tokens is None:
            pairs = yield from self._get_plan(key, limit)
        else:
            pairs = yield from self._window_plan(key, max_tokens)
            if limit is not None:
                pairs = pairs[-limit:]
        return drop_leading_orphans([m for _, m in pairs])

    def _add_plan(
        self, key: SessionKey, messages: Sequence[BaseMessage], dedupe: bool
    ) -> Plan[int]:
        rows = self._rows(messages, key)
        ids = [r.message_id for r in rows if r.message_id]
        if dedupe and ids:
            # A read without the write lock leaves out what is stored (a LangGraph node sends its
            # whole state): a step adding nothing takes no write lock; the append checks again.
            seen = yield from self._op(sql.existing_message_ids, key, ids)
            rows = [r for r in rows if r.message_id not in seen]
        if not rows:
            return 0
        if self.db.rules.statement_bytes_limited:
            yield from self._check_packet(rows)
        now, append = clock.now_ms(), sql.Append()
        done = yield from self._op(sql.add_messages, key, rows, now, append, dedupe, write=True)
        return int(done.written)

    def _check_packet(self, rows: Sequence[MessageRow]) -> Plan[None]:
        """Refuse a message over the statement size limit of a server that drops the
        connection on one (MySQL/MariaDB's `max_allowed_packet`) with a clear error."""
        limit = self.db.facts.get("max_allowed_packet")
        if limit is None:
            limit = yield Step(self.db.rules.max_statement_bytes, single=True)
            self.db.facts["max_allowed_packet"] = limit
        if limit is None:
            return
        per_byte = self.db.rules.statement_bytes_per_byte
        for r in rows:  # with room for escaping and the other columns
            text = r.body.encode("utf-8", "surrogatepass") + r.content_text.encode()
            size = per_byte * len(text)
            if size + 4096 > limit:
                raise ValueError(
                    f"messages: a {r.type} message needs about {size} bytes in one statement, "
                    f"over the server's max_allowed_packet={limit}; raise max_allowed_packet "
                    "or store less in one message"
                )

    def _list_plan(
        self, user_id: IdLike | None, limit: int | None, offset: int
    ) -> Plan[list[SessionInfo]]:
        uid = None if user_id is None else check_id(user_id, "user_id")
        if limit is not None:
            check_positive(limit, "limit")
        check_positive(offset, "offset", allow_zero=True)
        infos = yield from self._op(sql.list_sessions, uid, limit, offset, single=True)
        return [self._reveal(i) for i in infos]

    def _session_plan(self, key: SessionKey) -> Plan[SessionInfo | None]:
        info = yield from self._op(sql.get_session, key, single=True)
        return None if info is None else self._reveal(info)

    def _rename_plan(self, key: SessionKey, title: str | None) -> Plan[bool]:
        sealed = self._seal(key, _text(title, "title"))
        return (yield from self._op(sql.rename_session, key, sealed, write=True, single=True))

    def _summary_plan(self, key: SessionKey, summary: str | None) -> Plan[None]:
        sealed = self._seal(key, _text(summary, "summary"))
        yield from self._op(sql.set_summary, key, sealed, clock.now_ms(), write=True)

    def _prune_plan(self, days: float, user_id: IdLike | None) -> Plan[int]:
        cutoff = idle_cutoff(days)
        uid = None if user_id is None else check_id(user_id, "user_id")
        return (yield from self._op(sql.delete_idle_sessions, cutoff, uid, write=True))

    # -- reading ---------------------------------------------------------------------------------

    def get_messages(
        self, session_id: IdLike, *, user_id: IdLike | None = None, limit: int | None = None
    ) -> list[BaseMessage]:
        """The session's messages in order; only the most recent `limit` if given (in SQL)."""
        return [m for _, m in self.db.drive(self._get_plan(self.key(session_id, user_id), limit))]

    async def aget_messages(
        self, session_id: IdLike, *, user_id: IdLike | None = None, limit: int | None = None
    ) -> list[BaseMessage]:
        """Async [`get_messages`][langmem_sqlite.history.store.ConversationStore.get_messages]."""
        plan = self._get_plan(self.key(session_id, user_id), limit)
        return [m for _, m in await self.db.adrive(plan)]

    def get_token_window(
        self, session_id: IdLike, max_tokens: int, *, user_id: IdLike | None = None
    ) -> list[BaseMessage]:
        """The longest recent run of messages whose stored token counts fit `max_tokens`,
        selected in SQL, never starting on a tool result whose call was cut off."""
        plan = self._window_plan(self.key(session_id, user_id), max_tokens)
        return [m for _, m in self.db.drive(plan)]

    async def aget_token_window(
        self, session_id: IdLike, max_tokens: int, *, user_id: IdLike | None = None
    ) -> list[BaseMessage]:
        """Async
        [`get_token_window`][langmem_sqlite.history.store.ConversationStore.get_token_window]."""
        plan = self._window_plan(self.key(session_id, user_id), max_tokens)
        return [m for _, m in await self.db.adrive(plan)]

    def load_window(
        self,
        session_id: IdLike,
        *,
        user_id: IdLike | None = None,
        limit: int | None = None,
        max_tokens: int | None = None,
    ) -> list[BaseMessage]:
        """Recent messages for a model call: the last `limit` and/or those within
        `max_tokens` (stored counts), never starting on an orphan tool result."""
        return self.db.drive(self._load_plan(self.key(session_id, user_id), limit, max_tokens))

    async def aload_window(
        self,
        session_id: IdLike,
        *,
        user_id: IdLike | None = None,
        limit: int | None = None,
        max_tokens: int | None = None,
    ) -> list[BaseMessage]:
        """Async [`load_window`][langmem_sqlite.history.store.ConversationStore.load_window]."""
        plan = self._load_plan(self.key(session_id, user_id), limit, max_tokens)
        return await self.db.adrive(plan)

    def count_messages(self, session_id: IdLike, *, user_id: IdLike | None = None) -> int:
        """Number of messages stored for the session."""
        key = self.key(session_id, user_id)
        return self.db.drive(self._op(sql.count_messages, key, single=True))

    async def acount_messages(self, session_id: IdLike, *, user_id: IdLike | None = None) -> int:
        """Async
        [`count_messages`][langmem_sqlite.history.store.ConversationStore.count_messages]."""
        key = self.key(session_id, user_id)
        return await self.db.adrive(self._op(sql.count_messages, key, single=True))

    # -- writing ---------------------------------------------------------------------------------

    def add_messages(
        self,
        session_id: IdLike,
        messages: Sequence[BaseMessage],
        *,
        user_id: IdLike | None = None,
        skip_existing: bool = False,
    ) -> int:
        """Append messages in one transaction, in order; return how many were written.

        Every message is validated and serialized before anything is written. With
        `skip_existing=True`, messages whose `id` the session already holds (or that repeat
        an id within `messages`) are left out; messages without an id are always appended.
        That suits LangGraph nodes, which see the whole state on every step. The check and the
        insert are one atomic step: writers appending the same ids at once (threads,
        processes) store each id once. Without it, every message is appended, a repeated id
        included (the first message stored with an id is the one `skip_existing` finds).
        """
        plan = self._add_plan(self.key(session_id, user_id), messages, skip_existing)
        return self.db.drive(plan)

    async def aadd_messages(
        self,
        session_id: IdLike,
        messages: Sequence[BaseMessage],
        *,
        user_id: IdLike | None = None,
        skip_existing: bool = False,
    ) -> int:
        """Async [`add_messages`][langmem_sqlite.history.store.ConversationStore.add_messages]."""
        plan = self._add_plan(self.key(session_id, user_id), messages, skip_existing)
        return await self.db.adrive(plan)

    def clear(self, session_id: IdLike, *, user_id: IdLike | None = None) -> int:
        """Delete the session's messages (and summary), keep the session; return the count."""
        key = self.key(session_id, user_id)
        return self.db.drive(self._op(sql.clear_session, key, clock.now_ms(), write=True))

    async def aclear(self, session_id: IdLike, *, user_id: IdLike | None = None) -> int:
        """Async [`clear`][langmem_sqlite.history.store.ConversationStore.clear]."""
        key = self.key(session_id, user_id)
        return await self.db.adrive(self._op(sql.clear_session, key, clock.now_ms(), write=True))

    # -- sessions --------------------------------------------------------------------------------

    def list_sessions(
        self, user_id: IdLike | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[SessionInfo]:
        """Sessions, most recently active first, with title, counts and times (ms since epoch).

        With `user_id`, only that user's sessions; without, every session.
        """
        return self.db.drive(self._list_plan(user_id, limit, offset))

    async def alist_sessions(
        self, user_id: IdLike | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[SessionInfo]:
        """Async [`list_sessions`][langmem_sqlite.history.store.ConversationStore.list_sessions]."""
        return await self.db.adrive(self._list_plan(user_id, limit, offset))

    def get_session(
        self, session_id: IdLike, *, user_id: IdLike | None = None
    ) -> SessionInfo | None:
        """One session's details, or `None` if it does not exist."""
        return self.db.drive(self._session_plan(self.key(session_id, user_id)))

    async def aget_session(
        self, session_id: IdLike, *, user_id: IdLike | None = None
    ) -> SessionInfo | None:
        """Async [`get_session`][langmem_sqlite.history.store.ConversationStore.get_session]."""
        return await self.db.adrive(self._session_plan(self.key(session_id, user_id)))

    def rename_session(
        self, session_id: IdLike, title: str | None, *, user_id: IdLike | None = None
    ) -> bool:
        """Set a session's title; `False` if the session does not exist."""
        return self.db.drive(self._rename_plan(self.key(session_id, user_id), title))

    async def arename_session(
        self, session_id: IdLike, title: str | None, *, user_id: IdLike | None = None
    ) -> bool:
        """Async
        [`rename_session`][langmem_sqlite.history.store.ConversationStore.rename_session]."""
        return await self.db.adrive(self._rename_plan(self.key(session_id, user_id), title))

    def delete_session(self, session_id: IdLike, *, user_id: IdLike | None = None) -> bool:
        """Delete a session and its messages; `False` if it did not exist."""
        key = self.key(session_id, user_id)
        return self.db.drive(self._op(sql.delete_session, key, write=True))

    async def adelete_session(self, session_id: IdLike, *, user_id: IdLike | None = None) -> bool:
        """Async
        [`delete_session`][langmem_sqlite.history.store.ConversationStore.delete_session]."""
        key = self.key(session_id, user_id)
        return await self.db.adrive(self._op(sql.delete_session, key, write=True))

    def delete_sessions_older_than(self, days: float, *, user_id: IdLike | None = None) -> int:
        """Delete sessions not active for `days` days (one user's, if given); return the count.

        Raises:
            ValueError: `days` is not a finite number from 0 to
                [`MAX_DAYS`][langmem_sqlite.history.store.MAX_DAYS] (nothing is deleted).
        """
        return self.db.drive(self._prune_plan(days, user_id))

    async def adelete_sessions_older_than(
        self, days: float, *, user_id: IdLike | None = None
    ) -> int:
        """Async
        [`delete_sessions_older_than`][langmem_sqlite.history.store.ConversationStore.delete_sessions_older_than]."""
        return await self.db.adrive(self._prune_plan(days, user_id))

    # -- running summary (used by the context-window policy) -------------------------------------

    def get_summary(self, session_id: IdLike, *, user_id: IdLike | None = None) -> str | None:
        """The session's stored summary record (JSON text), if any."""
        info = self.get_session(session_id, user_id=user_id)
        return None if info is None else info.summary

    async def aget_summary(
        self, session_id: IdLike, *, user_id: IdLike | None = None
    ) -> str | None:
        """Async [`get_summary`][langmem_sqlite.history.store.ConversationStore.get_summary]."""
        info = await self.aget_session(session_id, user_id=user_id)
        return None if info is None else info.summary

    def set_summary(
        self, session_id: IdLike, summary: str | None, *, user_id: IdLike | None = None
    ) -> None:
        """Store the session's summary record (JSON text), creating the session if needed."""
        self.db.drive(self._summary_plan(self.key(session_id, user_id), summary))

    async def aset_summary(
        self, session_id: IdLike, summary: str | None, *, user_id: IdLike | None = None
    ) -> None:
        """Async [`set_summary`][langmem_sqlite.history.store.ConversationStore.set_summary]."""
        await self.db.adrive(self._summary_plan(self.key(session_id, user_id), summary))
