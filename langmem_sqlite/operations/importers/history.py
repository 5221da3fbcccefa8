"""langchain-community `SQLChatMessageHistory` tables ->
[`ConversationStore`][langmem_sqlite.ConversationStore]."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict

from ...history.store import ConversationStore
from ...validation import IdLike, check_positive
from .report import ImportMismatchError, ImportReport, progress_bar, source_connection, source_name

MAX_BATCH_SIZE = 100_000
"""The largest `batch_size` of
[`import_chat_history`][langmem_sqlite.operations.importers.import_chat_history] (messages per
transaction)."""


def _reflect(conn: sa.Connection, table: str, session_column: str) -> sa.Table:
    if not isinstance(table, str) or not table:
        raise ValueError("table: expected a table name")
    if not sa.inspect(conn).has_table(table):
        raise ValueError(f"table: no table {table!r} in {source_name(conn)}")
    t = sa.Table(table, sa.MetaData(), autoload_with=conn)
    for col in ("id", session_column, "message"):
        if col not in t.c:
            raise ValueError(f"table: {table!r} has no {col!r} column (not a chat history table)")
    return t


def _sessions(conn: sa.Connection, t: sa.Table, scol: str) -> list[tuple[str, int]]:
    stmt = sa.select(t.c[scol], sa.func.count()).group_by(t.c[scol]).order_by(t.c[scol])
    return [(str(s), int(n)) for s, n in conn.execute(stmt) if s is not None]


def _page(
    conn: sa.Connection, t: sa.Table, scol: str, session: str, offset: int, limit: int
) -> list[BaseMessage]:
    stmt = (
        sa.select(t.c.message)
        .where(t.c[scol] == session)
        .order_by(t.c.id)
        .offset(offset)
        .limit(limit)
    )
    return messages_from_dict([json.loads(body) for (body,) in conn.execute(stmt)])


def _same(a: list[BaseMessage], b: list[BaseMessage]) -> bool:
    return messages_to_dict(a) == messages_to_dict(b)


def import_chat_history(
    source: Any,
    target: ConversationStore,
    *,
    table: str = "message_store",
    session_column: str = "session_id",
    user_id: IdLike | None = None,
    batch_size: int = 500,
    progress: bool = False,
) -> ImportReport:
    """Copy every session of a `SQLChatMessageHistory` table into `target`.

    Messages are appended in the source's `id` order. A session already (partly) in the
    target is checked against the source and only its missing tail is copied, so running again
    after an interruption resumes and running twice changes nothing. Every session is read back
    and compared after the copy.

    Args:
        source: the source database: URL, SQLite path, `Engine` or `Database`.
        target: where to import.
        table: the source table (langchain-community's default `message_store`).
        session_column: its session column.
        user_id: the user the imported sessions belong to in `target` (default: none).
        batch_size: messages per read and per write transaction (1 to
            `MAX_BATCH_SIZE`).
        progress: show a progress bar (stderr).

    Both databases are reached before anything is written or a progress bar is shown.

    Raises:
        ValueError: `batch_size` out of range, no such table, or not a chat history table
            (nothing is written).
        ImportMismatchError: a target session holds messages that differ from the source.
    """
    check_positive(batch_size, "batch_size", high=MAX_BATCH_SIZE)
    if not isinstance(target, ConversationStore):
        raise TypeError(f"target: expected a ConversationStore, got {type(target).__name__}")
    report = ImportReport("chat_history")
    with source_connection(source) as conn:
        t = _reflect(conn, table, session_column)
        sessions = _sessions(conn, t, session_column)
        report.containers = len(sessions)
        target.list_sessions(limit=1)  # the target answers (and has its tables) before any bar
        total = sum(n for _, n in sessions)
        with progress_bar(f"importing {table}", total, progress) as advance:
            for session, count in sessions:
                done = target.count_messages(session, user_id=user_id)
                if done > count or (
                    done
                    and not _same(
                        target.get_messages(session, user_id=user_id),
                        _page(conn, t, session_column, session, 0, done),
                    )
                ):
                    raise ImportMismatchError(
                        f"session {session!r}: the target already holds different messages "
                        "(import under another user_id, or clear it first)"
                    )
                report.skipped += done
                advance(done)
                while done < count:
                    batch = _page(conn, t, session_column, session, done, batch_size)
                    target.add_messages(session, batch, user_id=user_id)
                    done += len(batch)
                    report.imported += len(batch)
                    advance(len(batch))
                stored = target.get_messages(session, user_id=user_id)
                if not _same(stored, _page(conn, t, session_column, session, 0, count)):
                    raise ImportMismatchError(f"session {session!r}: read-back differs")
    report.verified = True
    return report
