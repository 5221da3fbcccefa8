"""The SQL of the conversation store: sessions and their messages.

Every function here takes a sync :class:`~sqlalchemy.engine.Connection` already inside a
transaction and the :class:`~langmem_sqlite.engine.schema.Tables` to use. They are written once and
run by :meth:`Database.run` (sync) or :meth:`Database.arun` (async, via ``run_sync``).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, func, insert, select, text, update
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from ..engine.schema import Tables

__all__ = [
    "Append",
    "Appended",
    "MessageRow",
    "SessionInfo",
    "SessionKey",
    "add_messages",
    "clear_session",
    "count_messages",
    "delete_idle_sessions",
    "delete_session",
    "delete_user",
    "existing_message_ids",
    "get_session",
    "list_sessions",
    "read_messages",
    "read_token_window",
    "rename_session",
    "set_summary",
    "user_counts",
]


@dataclass(frozen=True)
class SessionKey:
    """A conversation: ``session_id`` within ``user_id`` (``""`` when there is no user)."""

    user_id: str
    session_id: str


@dataclass(frozen=True)
class MessageRow:
    """One message ready to insert (its position is assigned by :func:`add_messages`)."""

    type: str
    message_id: str | None
    content_text: str
    body: str
    token_count: int


@dataclass(frozen=True)
class SessionInfo:
    """A session as listed by :func:`list_sessions` (no message bodies are read)."""

    user_id: str | None
    session_id: str
    title: str | None
    created_at: int
    updated_at: int
    message_count: int
    token_total: int
    metadata: dict[str, Any] | None
    summary: str | None = None


_NO_MAX = 2**62  # "no snapshot": larger than any position


class _Hot:
    """The statements of the hot paths, built once per set of tables with bound parameters
    (building a statement costs more than executing a cached one on SQLite)."""

    def __init__(self, t: Tables) -> None:
        s, m = t.sessions.c, t.messages.c
        match = and_(s.user_id == bindparam("k_user"), s.session_id == bindparam("k_session"))
        pk = select(s.id).where(match).scalar_subquery()
        self.bump = (
            update(t.sessions)
            .where(match)
            .values(
                message_count=s.message_count + bindparam("k_n"),
                token_total=s.token_total + bindparam("k_tokens"),
                updated_at=bindparam("k_now"),
            )
        )
        self.bump_returning = self.bump.returning(s.id, s.message_count, s.token_total)
        self.after_bump = select(s.id, s.message_count, s.token_total).where(match)
        self.insert = insert(t.messages)
        in_session = and_(m.session_pk == pk, m.seq <= bindparam("k_max_seq"))
        self.read_all = select(m.seq, m.body).where(in_session).order_by(m.seq)
        self.read_after = (
            select(m.seq, m.body).where(in_session, m.seq > bindparam("k_after")).order_by(m.seq)
        )
        self.summary = select(s.summary).where(match)
        self.read_last = (
            select(m.seq, m.body)
            .where(in_session)
            .order_by(m.seq.desc())
            .limit(bindparam("k_limit"))
        )
        # The budget window: tokens_before >= total - budget, with the total either the
        # session's, or (under a snapshot) the running sum at the snapshot's last message.
        snap_total = (
            select(m.tokens_before + m.token_count)
            .where(m.session_pk == pk, m.seq == bindparam("k_max_seq"))
            .scalar_subquery()
        )
        total = select(s.token_total).where(match).scalar_subquery()
        cols = (m.seq, m.type, m.body, m.token_count)
        self.window = (
            select(*cols)
            .where(m.session_pk == pk, m.tokens_before >= total - bindparam("k_budget"))
            .order_by(m.seq)
        )
        self.window_snapshot = (
            select(*cols)
            .where(in_session, m.tokens_before >= snap_total - bindparam("k_budget"))
            .order_by(m.seq)
        )
        self.known_ids = select(m.message_id).where(
            m.session_pk == pk, m.message_id.in_(bindparam("k_ids", expanding=True))
        )
        # inside an append, once the session row is locked (its primary key known)
        self.known_ids_at = select(m.message_id).where(
            m.session_pk == bindparam("k_pk"),
            m.message_id.in_(bindparam("k_ids", expanding=True)),
        )
        self.unbump = (
            update(t.sessions)
            .where(s.id == bindparam("k_pk"))
            .values(
                message_count=s.message_count - bindparam("k_n"),
                token_total=s.token_total - bindparam("k_tokens"),
            )
        )
        self.token_row = (
            select(m.id)
            .where(m.session_pk == bindparam("k_pk"), m.write_token == bindparam("k_token"))
            .limit(1)
        )
        self.count = select(s.message_count).where(match)


@functools.lru_cache(maxsize=32)
def _hot(t: Tables) -> _Hot:
    return _Hot(t)


def _params(key: SessionKey, **extra: Any) -> dict[str, Any]:
    return {"k_user": key.user_id, "k_session": key.session_id, **extra}


def _match(t: Tables, key: SessionKey) -> ColumnElement[bool]:
    s = t.sessions.c
    return and_(s.user_id == key.user_id, s.session_id == key.session_id)


def _session_pk(t: Tables, key: SessionKey) -> Any:
    return select(t.sessions.c.id).where(_match(t, key)).scalar_subquery()


def _create_session(conn: Connection, t: Tables, key: SessionKey, now: int, **extra: Any) -> None:
    """Create a session row unless it exists (another writer may create it concurrently)."""
    values = {
        "user_id": key.user_id,
        "session_id": key.session_id,
        "created_at": now,
        "updated_at": now,
        "message_count": 0,
        "token_total": 0,
        **extra,
    }
    name = conn.dialect.name
    if name == "postgresql":
        stmt: Any = postgresql.insert(t.sessions).values(values).on_conflict_do_nothing()
    elif name == "sqlite":
        stmt = sqlite.insert(t.sessions).values(values).on_conflict_do_nothing()
    elif name in ("mysql", "mariadb"):
        stmt = mysql.insert(t.sessions).values(values)
        stmt = stmt.on_duplicate_key_update(id=stmt.table.c.id)
    else:  # pragma: no cover - other dialects: plain insert (unique violation re-raised)
        stmt = insert(t.sessions).values(values)
    conn.execute(stmt)


def _bump(conn: Connection, t: Tables, key: SessionKey, n: int, tokens: int, now: int) -> Any:
    """Reserve ``n`` positions in the session; return (pk, count_after, tokens_after) or None."""
    hot = _hot(t)
    params = _params(key, k_n=n, k_tokens=tokens, k_now=now)
    if conn.dialect.update_returning:
        return conn.execute(hot.bump_returning, params).first()
    if conn.execute(hot.bump, params).rowcount == 0:
        return None
    return conn.execute(hot.after_bump, _params(key)).first()


@dataclass
class Append:
    """One append, across the attempts :meth:`Database.run` may make of it.

    A connection lost while COMMIT was in flight leaves the outcome unknown: the transaction
    may have committed. The first row of the append carries ``token``; a later attempt looks
    for it first and, when found, does not write the messages a second time (and reports what
    the attempt that committed wrote).
    """

    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    tries: int = 0
    written: int = 0
    """Messages the latest attempt wrote (or was about to commit)."""


class Appended(NamedTuple):
    """What :func:`add_messages` did."""

    written: int
    """Messages stored by this append."""
    total: int
    """The session's message count after it."""


_IN_CHUNK = 30_000  # ids per IN list: PostgreSQL binds 65,535 parameters a statement, SQLite 32,766


def _ids_in(conn: Connection, stmt: Any, params: dict[str, Any], ids: Sequence[str]) -> set[str]:
    """The message ids ``stmt`` finds among ``ids`` (bound as ``k_ids``, a chunk at a time)."""
    known = set[str]()
    for i in range(0, len(ids), _IN_CHUNK):
        chunk = list(ids[i : i + _IN_CHUNK])
        known.update(conn.execute(stmt, {**params, "k_ids": chunk}).scalars())
    return known


def add_messages(
    conn: Connection,
    t: Tables,
    key: SessionKey,
    rows: Sequence[MessageRow],
    now: int,
    metadata: dict[str, Any] | None = None,
    append: Append | None = None,
    skip_existing: bool = False,
    read_ids: bool = True,
) -> Appended:
    """Append ``rows`` to the session (created if missing).

    One session update reserves the positions and locks the session row (SQLite: the
    transaction holds the write lock from its start), so appends to one session take turns;
    then one executemany insert writes the messages. A message id names at most one row of a
    session (the unique key on ``(session_pk, message_id)``): with ``skip_existing``, a message
    whose id the session holds, or that repeats an earlier id of ``rows``, is left out; without
    it, every message is appended, and a repeated id is kept in the stored message but not in
    the ``message_id`` column (which names the first message that carried it). Positions stay
    contiguous and in the order of ``rows``.

    ``read_ids`` reads the session's ids under the lock to do so. Without it, only repeats
    within ``rows`` are handled, and an id the session holds makes the insert fail with
    :class:`~sqlalchemy.exc.IntegrityError` (nothing is written): the caller then tries again
    with ``read_ids``, which costs a read only when needed. With ``append``, a repeated attempt
    of the same append that finds it already stored writes nothing (see :class:`Append`).
    """
    retry = False
    if append is not None and rows:
        append.tries += 1
        retry = append.tries > 1
    tokens = sum(r.token_count for r in rows)
    got = _bump(conn, t, key, len(rows), tokens, now)
    if got is None:
        _create_session(conn, t, key, now, metadata=metadata)
        got = _bump(conn, t, key, len(rows), tokens, now)
    pk, count_after, tokens_after = got
    hot = _hot(t)
    if retry:
        assert append is not None
        if conn.execute(hot.token_row, {"k_pk": pk, "k_token": append.token}).first():
            # the earlier attempt committed: give back the positions just reserved
            conn.execute(hot.unbump, {"k_pk": pk, "k_n": len(rows), "k_tokens": tokens})
            return Appended(append.written, int(count_after) - len(rows))
    known: set[str] = set()
    if read_ids:
        ids = [r.message_id for r in rows if r.message_id is not None]
        known = _ids_in(conn, hot.known_ids_at, {"k_pk": pk}, ids) if ids else known
    kept: list[tuple[MessageRow, str | None]] = []
    for r in rows:
        mid = r.message_id
        if mid is not None and mid in known:
            if skip_existing:
                continue
            mid = None  # stored again, found under its first copy
        elif mid is not None:
            known.add(mid)
        kept.append((r, mid))
    if len(kept) < len(rows):
        dropped = len(rows) - len(kept)
        dropped_tokens = tokens - sum(r.token_count for r, _ in kept)
        conn.execute(hot.unbump, {"k_pk": pk, "k_n": dropped, "k_tokens": dropped_tokens})
        count_after -= dropped
        tokens_after -= dropped_tokens
        tokens -= dropped_tokens
    if append is not None:
        append.written = len(kept)
    if kept:
        seq = count_after - len(kept)
        before = tokens_after - tokens
        params: list[dict[str, Any]] = []
        for r, mid in kept:
            params.append(
                {
                    "session_pk": pk,
                    "seq": seq,
                    "type": r.type,
                    "message_id": mid,
                    "content_text": r.content_text,
                    "body": r.body,
                    "token_count": r.token_count,
                    "tokens_before": before,
                    "created_at": now,
                    "write_token": append.token if append is not None and not params else None,
                }
            )
            seq += 1
            before += r.token_count
        conn.execute(hot.insert, params)
    return Appended(len(kept), int(count_after))


def read_messages(
    conn: Connection,
    t: Tables,
    key: SessionKey,
    limit: int | None = None,
    max_seq: int | None = None,
) -> list[tuple[int, str]]:
    """``(seq, body)`` of the session's messages in order; the last ``limit`` if given.

    ``max_seq`` hides messages added after a snapshot.
    """
    hot = _hot(t)
    params = _params(key, k_max_seq=_NO_MAX if max_seq is None else max_seq)
    if limit is None:
        return [(r[0], r[1]) for r in conn.execute(hot.read_all, params)]
    rows = conn.execute(hot.read_last, {**params, "k_limit": limit}).all()
    return [(r[0], r[1]) for r in reversed(rows)]


def read_after_summary(
    conn: Connection, t: Tables, key: SessionKey, max_seq: int | None = None
) -> tuple[str | None, list[tuple[int, str]]]:
    """The session's summary record and ``(seq, body)`` of the messages it does not cover yet.

    The record's ``upto_seq`` (the position of the last summarized message, if the record has
    one) bounds the read, so its cost follows what is not yet summarized, not the history.
    """
    hot = _hot(t)
    summary = conn.execute(hot.summary, _params(key)).scalar()
    after = -1
    if summary:
        try:
            after = int(json.loads(summary).get("upto_seq", -1))
        except (ValueError, TypeError, AttributeError, OverflowError):
            after = -1  # not a record of ours: read everything, the policy validates it
        if not -1 <= after < _NO_MAX:
            after = -1  # no position of this session: read everything
    params = _params(key, k_max_seq=_NO_MAX if max_seq is None else max_seq, k_after=after)
    return summary, [(r[0], r[1]) for r in conn.execute(hot.read_after, params)]


def read_token_window(
    conn: Connection, t: Tables, key: SessionKey, budget: int, max_seq: int | None = None
) -> list[tuple[int, str, str, int]]:
    """``(seq, type, body, token_count)`` of the longest recent suffix whose stored token counts
    sum to at most ``budget``; found through the ``tokens_before`` index, not by a scan."""
    hot = _hot(t)
    if max_seq is None:
        rows = conn.execute(hot.window, _params(key, k_budget=budget))
    else:
        rows = conn.execute(hot.window_snapshot, _params(key, k_budget=budget, k_max_seq=max_seq))
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def existing_message_ids(
    conn: Connection, t: Tables, key: SessionKey, message_ids: Sequence[str]
) -> set[str]:
    """Which of ``message_ids`` the session already holds."""
    return _ids_in(conn, _hot(t).known_ids, _params(key), message_ids)


def clear_session(conn: Connection, t: Tables, key: SessionKey, now: int) -> int:
    """Delete the session's messages (the session row stays); return how many were deleted."""
    n = conn.execute(delete(t.messages).where(t.messages.c.session_pk == _session_pk(t, key)))
    conn.execute(
        update(t.sessions)
        .where(_match(t, key))
        .values(message_count=0, token_total=0, summary=None, updated_at=now)
    )
    return int(n.rowcount)


def _delete_sessions(conn: Connection, t: Tables, where: ColumnElement[bool]) -> int:
    """Delete sessions and their messages (explicitly: SQLite may run without foreign keys)."""
    pks = select(t.sessions.c.id).where(where)
    if conn.dialect.name in ("mysql", "mariadb"):  # no DELETE from a table it subqueries
        ids = list(conn.execute(pks).scalars())
        if not ids:
            return 0
        conn.execute(delete(t.messages).where(t.messages.c.session_pk.in_(ids)))
        return int(conn.execute(delete(t.sessions).where(t.sessions.c.id.in_(ids))).rowcount)
    conn.execute(delete(t.messages).where(t.messages.c.session_pk.in_(pks)))
    return int(conn.execute(delete(t.sessions).where(where)).rowcount)


def delete_session(conn: Connection, t: Tables, key: SessionKey) -> bool:
    """Delete one session and its messages; ``False`` if it did not exist."""
    return _delete_sessions(conn, t, _match(t, key)) > 0


def delete_idle_sessions(
    conn: Connection, t: Tables, cutoff: int, user_id: str | None = None
) -> int:
    """Delete sessions last active before ``cutoff`` (ms); return how many."""
    where = t.sessions.c.updated_at < cutoff
    if user_id is not None:
        where = and_(where, t.sessions.c.user_id == user_id)
    return _delete_sessions(conn, t, where)


def user_counts(conn: Connection, t: Tables, user_id: str) -> tuple[int, int, int]:
    """A user's ``(sessions, messages, summaries)``."""
    s, m = t.sessions.c, t.messages.c
    sessions, summaries = conn.execute(
        select(func.count(), func.count(s.summary)).where(s.user_id == user_id)
    ).one()
    messages = conn.execute(
        select(func.count())
        .select_from(t.messages.join(t.sessions, m.session_pk == s.id))
        .where(s.user_id == user_id)
    ).scalar_one()
    return int(sessions), int(messages), int(summaries)


_SECURE_DELETE = {0: "OFF", 1: "ON", 2: "FAST"}


def delete_user(conn: Connection, t: Tables, user_id: str) -> tuple[int, int, int]:
    """Delete every session of ``user_id`` (messages, titles, summaries); return what
    :func:`user_counts` counted.

    On SQLite the deleted rows are overwritten with zeros in the pages they leave
    (``secure_delete``, which builds without ``SQLITE_SECURE_DELETE`` leave off) before the
    transaction commits.
    """
    counts = user_counts(conn, t, user_id)
    if not counts[0]:
        return counts
    was = None
    if conn.dialect.name == "sqlite":
        was = _SECURE_DELETE.get(int(conn.exec_driver_sql("PRAGMA secure_delete").scalar_one()))
        conn.exec_driver_sql("PRAGMA secure_delete = ON")
    try:
        _delete_sessions(conn, t, t.sessions.c.user_id == user_id)
    finally:
        if was is not None:
            conn.exec_driver_sql(f"PRAGMA secure_delete = {was}")
    return counts


def rename_session(conn: Connection, t: Tables, key: SessionKey, title: str | None) -> bool:
    """Set the session's title; ``False`` if it does not exist."""
    res = conn.execute(update(t.sessions).where(_match(t, key)).values(title=title))
    return bool(res.rowcount)


def set_summary(
    conn: Connection, t: Tables, key: SessionKey, summary: str | None, now: int
) -> bool:
    """Store the running-summary record (JSON text) on the session row, creating the session."""
    res = conn.execute(update(t.sessions).where(_match(t, key)).values(summary=summary))
    if res.rowcount:
        return True
    _create_session(conn, t, key, now, summary=summary)
    return True


def _info(row: Any) -> SessionInfo:
    return SessionInfo(
        user_id=row.user_id or None,
        session_id=row.session_id,
        title=row.title,
        created_at=int(row.created_at),
        updated_at=int(row.updated_at),
        message_count=int(row.message_count),
        token_total=int(row.token_total),
        metadata=row.metadata,
        summary=row.summary,
    )


def get_session(conn: Connection, t: Tables, key: SessionKey) -> SessionInfo | None:
    """One session's row, or ``None``."""
    row = conn.execute(select(t.sessions).where(_match(t, key))).first()
    return None if row is None else _info(row)


def list_sessions(
    conn: Connection,
    t: Tables,
    user_id: str | None,
    limit: int | None,
    offset: int,
) -> list[SessionInfo]:
    """Sessions, most recently active first; one user's when ``user_id`` is given."""
    s = t.sessions.c
    stmt = select(t.sessions).order_by(s.updated_at.desc(), s.id.desc()).offset(offset)
    if user_id is not None:
        stmt = stmt.where(s.user_id == user_id)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [_info(r) for r in conn.execute(stmt)]


def count_messages(conn: Connection, t: Tables, key: SessionKey) -> int:
    """Number of messages in the session (from the session row)."""
    return int(conn.execute(_hot(t).count, _params(key)).scalar() or 0)


def max_allowed_packet(conn: Connection) -> int:
    """The MySQL/MariaDB server's largest statement, in bytes."""
    return int(conn.execute(select(text("@@max_allowed_packet"))).scalar_one())
