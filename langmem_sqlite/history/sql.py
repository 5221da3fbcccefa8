"""The SQL of the conversation store: sessions and their messages.

Every function here takes a [`Session`][langmem_sqlite.engine.Session] (one unit of work of
the execution seam) and the [`Tables`][langmem_sqlite.store.rows.Tables] to use. They are written
once and run by [`Database.run`][langmem_sqlite.engine.Database.run] (sync) or
[`Database.arun`][langmem_sqlite.engine.Database.arun] (async), on the seam's
[`Session`][langmem_sqlite.engine.Session]. Statements are built once per engine and set of tables
([`Session.statement`][langmem_sqlite.engine.Session.statement]), with bound parameters only; what
differs between databases comes from the session's dialect object (`session.rules`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, func, insert, select, update

from ..engine.dialects import Dialect
from ..engine.schema import Tables
from ..engine.session import Session

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
    "max_statement_bytes",
    "read_messages",
    "read_token_window",
    "rename_session",
    "set_summary",
    "user_counts",
]


@dataclass(frozen=True)
class SessionKey:
    """A conversation: `session_id` within `user_id` (`""` when there is no user)."""

    user_id: str
    session_id: str


@dataclass(frozen=True)
class MessageRow:
    """One message ready to insert (its position is assigned by `add_messages`)."""

    type: str
    message_id: str | None
    content_text: str
    body: str
    token_count: int


@dataclass(frozen=True)
class SessionInfo:
    """A session as listed by `list_sessions` (no message bodies are read)."""

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
_NO_LIMIT = 2**63 - 1  # a LIMIT every database takes, for "no limit"
_ID_CHUNK = 10_000  # session ids per IN list where sessions are deleted by their ids


class _Statements:
    """Every statement of the conversation store for one set of tables and one database, with
    bound parameters only: built once per engine and kept in the seam's statement cache
    ([`Session.statement`][langmem_sqlite.engine.Session.statement]), so each is compiled once."""

    def __init__(self, t: Tables, rules: Dialect) -> None:
        s, m = t.sessions.c, t.messages.c
        match = and_(s.user_id == bindparam("k_user"), s.session_id == bindparam("k_session"))
        pk = select(s.id).where(match).scalar_subquery()
        self.create = rules.insert_ignore(t.sessions, key=("user_id", "session_id"))
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
        self.clear_messages = delete(t.messages).where(m.session_pk == pk)
        self.clear = (
            update(t.sessions)
            .where(match)
            .values(message_count=0, token_total=0, summary=None, updated_at=bindparam("k_now"))
        )
        self.rename = update(t.sessions).where(match).values(title=bindparam("k_title"))
        self.set_summary = update(t.sessions).where(match).values(summary=bindparam("k_summary"))
        self.session = select(t.sessions).where(match)
        order = (s.updated_at.desc(), s.id.desc())
        listing = select(t.sessions).order_by(*order)
        listing = listing.limit(bindparam("k_limit")).offset(bindparam("k_offset"))
        self.list_all = listing
        self.list_user = listing.where(s.user_id == bindparam("k_user"))
        user_sessions = t.sessions.join(t.messages, m.session_pk == s.id)
        self.user_sessions = select(func.count(), func.count(s.summary)).where(
            s.user_id == bindparam("k_user")
        )
        self.user_messages = (
            select(func.count()).select_from(user_sessions).where(s.user_id == bindparam("k_user"))
        )
        # Sessions deleted by a condition: the one session, those idle since a time (of every
        # user or of one), or a user's.
        idle = s.updated_at < bindparam("k_cutoff")
        self.deletes: dict[str, tuple[Any, Any, Any]] = {}
        for name, where in (
            ("session", match),
            ("idle", idle),
            ("idle_user", and_(idle, s.user_id == bindparam("k_user"))),
            ("user", s.user_id == bindparam("k_user")),
        ):
            pks = select(s.id).where(where)
            self.deletes[name] = (
                pks,
                delete(t.messages).where(m.session_pk.in_(pks)),
                delete(t.sessions).where(where),
            )
        self.delete_messages_of = delete(t.messages).where(
            m.session_pk.in_(bindparam("k_ids", expanding=True))
        )
        self.delete_sessions_of = delete(t.sessions).where(
            s.id.in_(bindparam("k_ids", expanding=True))
        )


def _statements(session: Session, t: Tables) -> _Statements:
    return session.statement(  # type: ignore[no-any-return]
        ("history", t.key), lambda: _Statements(t, session.rules)
    )


def _params(key: SessionKey, **extra: Any) -> dict[str, Any]:
    return {"k_user": key.user_id, "k_session": key.session_id, **extra}


def _create_session(session: Session, t: Tables, key: SessionKey, now: int, **extra: Any) -> None:
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
    session.execute(_statements(session, t).create, values)


def _bump(session: Session, t: Tables, key: SessionKey, n: int, tokens: int, now: int) -> Any:
    """Reserve `n` positions in the session; return (pk, count_after, tokens_after) or None."""
    st = _statements(session, t)
    params = _params(key, k_n=n, k_tokens=tokens, k_now=now)
    if session.connection.dialect.update_returning:
        return session.execute(st.bump_returning, params).first()
    if session.execute(st.bump, params).rowcount == 0:
        return None
    return session.execute(st.after_bump, _params(key)).first()


@dataclass
class Append:
    """One append, across the attempts [`Database.run`][langmem_sqlite.engine.Database.run] may make
    of it.

    A connection lost while COMMIT was in flight leaves the outcome unknown: the transaction
    may have committed. The first row of the append carries `token`; a later attempt looks
    for it first and, when found, does not write the messages a second time (and reports what
    the attempt that committed wrote).
    """

    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    tries: int = 0
    written: int = 0
    """Messages the latest attempt wrote (or was about to commit)."""


class Appended(NamedTuple):
    """What `add_messages` did."""

    written: int
    """Messages stored by this append."""
    total: int
    """The session's message count after it."""


_IN_CHUNK = 30_000  # ids per IN list: PostgreSQL binds 65,535 parameters a statement, SQLite 32,766


def _ids_in(session: Session, stmt: Any, params: dict[str, Any], ids: Sequence[str]) -> set[str]:
    """The message ids `stmt` finds among `ids` (bound as `k_ids`, a chunk at a time)."""
    known = set[str]()
    for i in range(0, len(ids), _IN_CHUNK):
        chunk = list(ids[i : i + _IN_CHUNK])
        known.update(session.execute(stmt, {**params, "k_ids": chunk}).scalars())
    return known


def add_messages(
    session: Session,
    t: Tables,
    key: SessionKey,
    rows: Sequence[MessageRow],
    now: int,
    metadata: dict[str, Any] | None = None,
    append: Append | None = None,
    skip_existing: bool = False,
    read_ids: bool = True,
) -> Appended:
    """Append `rows` to the session (created if missing).

    One session update reserves the positions and locks the session row (SQLite: the
    transaction holds the write lock from its start), so appends to one session take turns;
    then one executemany insert writes the messages. A message id names at most one row of a
    session (the unique key on `(session_pk, message_id)`): with `skip_existing`, a message
    whose id the session holds, or that repeats an earlier id of `rows`, is left out; without
    it, every message is appended, and a repeated id is kept in the stored message but not in
    the `message_id` column (which names the first message that carried it). Positions stay
    contiguous and in the order of `rows`.

    `read_ids` reads the session's ids under the lock to do so. Without it, only repeats
    within `rows` are handled, and an id the session holds makes the insert fail with
    `IntegrityError` (nothing is written): the caller then tries again
    with `read_ids`, which costs a read only when needed. With `append`, a repeated attempt
    of the same append that finds it already stored writes nothing (see `Append`).
    """
    retry = False
    if append is not None and rows:
        append.tries += 1
        retry = append.tries > 1
    tokens = sum(r.token_count for r in rows)
    got = _bump(session, t, key, len(rows), tokens, now)
    if got is None:
        _create_session(session, t, key, now, metadata=metadata)
        got = _bump(session, t, key, len(rows), tokens, now)
    pk, count_after, tokens_after = got
    st = _statements(session, t)
    if retry:
        assert append is not None
        if session.execute(st.token_row, {"k_pk": pk, "k_token": append.token}).first():
            # the earlier attempt committed: give back the positions just reserved
            session.execute(st.unbump, {"k_pk": pk, "k_n": len(rows), "k_tokens": tokens})
            return Appended(append.written, int(count_after) - len(rows))
    known: set[str] = set()
    if read_ids:
        ids = [r.message_id for r in rows if r.message_id is not None]
        known = _ids_in(session, st.known_ids_at, {"k_pk": pk}, ids) if ids else known
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
        session.execute(st.unbump, {"k_pk": pk, "k_n": dropped, "k_tokens": dropped_tokens})
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
        session.execute(st.insert, params)
    return Appended(len(kept), int(count_after))


def read_messages(
    session: Session,
    t: Tables,
    key: SessionKey,
    limit: int | None = None,
    max_seq: int | None = None,
) -> list[tuple[int, str]]:
    """`(seq, body)` of the session's messages in order; the last `limit` if given.

    `max_seq` hides messages added after a snapshot.
    """
    st = _statements(session, t)
    params = _params(key, k_max_seq=_NO_MAX if max_seq is None else max_seq)
    if limit is None:
        return [(r[0], r[1]) for r in session.execute(st.read_all, params)]
    rows = session.execute(st.read_last, {**params, "k_limit": limit}).all()
    return [(r[0], r[1]) for r in reversed(rows)]


def read_after_summary(
    session: Session, t: Tables, key: SessionKey, max_seq: int | None = None
) -> tuple[str | None, list[tuple[int, str]]]:
    """The session's summary record and `(seq, body)` of the messages it does not cover yet.

    The record's `upto_seq` (the position of the last summarized message, if the record has
    one) bounds the read, so its cost follows what is not yet summarized, not the history.
    """
    st = _statements(session, t)
    found = session.execute(st.summary, _params(key)).all()
    summary = found[0][0] if found else None
    after = -1
    if summary:
        try:
            after = int(json.loads(summary).get("upto_seq", -1))
        except (ValueError, TypeError, AttributeError, OverflowError):
            after = -1  # not a record of ours: read everything, the policy validates it
        if not -1 <= after < _NO_MAX:
            after = -1  # no position of this session: read everything
    params = _params(key, k_max_seq=_NO_MAX if max_seq is None else max_seq, k_after=after)
    return summary, [(r[0], r[1]) for r in session.execute(st.read_after, params)]


def read_token_window(
    session: Session, t: Tables, key: SessionKey, budget: int, max_seq: int | None = None
) -> list[tuple[int, str, str, int]]:
    """`(seq, type, body, token_count)` of the longest recent suffix whose stored token counts
    sum to at most `budget`; found through the `tokens_before` index, not by a scan."""
    st = _statements(session, t)
    if max_seq is None:
        rows = session.execute(st.window, _params(key, k_budget=budget)).all()
    else:
        params = _params(key, k_budget=budget, k_max_seq=max_seq)
        rows = session.execute(st.window_snapshot, params).all()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def existing_message_ids(
    session: Session, t: Tables, key: SessionKey, message_ids: Sequence[str]
) -> set[str]:
    """Which of `message_ids` the session already holds."""
    return _ids_in(session, _statements(session, t).known_ids, _params(key), message_ids)


def clear_session(session: Session, t: Tables, key: SessionKey, now: int) -> int:
    """Delete the session's messages (the session row stays); return how many were deleted."""
    st = _statements(session, t)
    n = session.execute(st.clear_messages, _params(key)).rowcount
    session.execute(st.clear, _params(key, k_now=now))
    return int(n)


def _delete_sessions(session: Session, t: Tables, which: str, params: dict[str, Any]) -> int:
    """Delete the sessions `which` (a condition of `_Statements`) selects, and their
    messages (explicitly: SQLite may run without foreign keys)."""
    pks, messages, sessions = _statements(session, t).deletes[which]
    if session.rules.deletes_sessions_by_subquery:
        session.execute(messages, params)
        return int(session.execute(sessions, params).rowcount)
    st = _statements(session, t)
    ids = [r[0] for r in session.execute(pks, params)]
    deleted = 0
    for i in range(0, len(ids), _ID_CHUNK):
        chunk = {"k_ids": ids[i : i + _ID_CHUNK]}
        session.execute(st.delete_messages_of, chunk)
        deleted += int(session.execute(st.delete_sessions_of, chunk).rowcount)
    return deleted


def delete_session(session: Session, t: Tables, key: SessionKey) -> bool:
    """Delete one session and its messages; `False` if it did not exist."""
    return _delete_sessions(session, t, "session", _params(key)) > 0


def delete_idle_sessions(
    session: Session, t: Tables, cutoff: int, user_id: str | None = None
) -> int:
    """Delete sessions last active before `cutoff` (ms); return how many."""
    if user_id is None:
        return _delete_sessions(session, t, "idle", {"k_cutoff": cutoff})
    return _delete_sessions(session, t, "idle_user", {"k_cutoff": cutoff, "k_user": user_id})


def user_counts(session: Session, t: Tables, user_id: str) -> tuple[int, int, int]:
    """A user's `(sessions, messages, summaries)`."""
    st = _statements(session, t)
    sessions, summaries = session.execute(st.user_sessions, {"k_user": user_id}).one()
    messages = session.execute(st.user_messages, {"k_user": user_id}).scalar_one()
    return int(sessions), int(messages), int(summaries)


def delete_user(session: Session, t: Tables, user_id: str) -> tuple[int, int, int]:
    """Delete every session of `user_id` (messages, titles, summaries); return what
    `user_counts` counted.

    Where the database can (SQLite's `secure_delete`), the deleted rows are overwritten in
    the pages they leave before the transaction commits (see
    `overwriting_deletes`).
    """
    counts = user_counts(session, t, user_id)
    if not counts[0]:
        return counts
    with session.rules.overwriting_deletes(session):
        _delete_sessions(session, t, "user", {"k_user": user_id})
    return counts


def rename_session(session: Session, t: Tables, key: SessionKey, title: str | None) -> bool:
    """Set the session's title; `False` if it does not exist."""
    res = session.execute(_statements(session, t).rename, _params(key, k_title=title))
    return bool(res.rowcount)


def set_summary(
    session: Session, t: Tables, key: SessionKey, summary: str | None, now: int
) -> bool:
    """Store the running-summary record (JSON text) on the session row, creating the session."""
    st = _statements(session, t)
    if session.execute(st.set_summary, _params(key, k_summary=summary)).rowcount:
        return True
    _create_session(session, t, key, now, summary=summary)
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


def get_session(session: Session, t: Tables, key: SessionKey) -> SessionInfo | None:
    """One session's row, or `None`."""
    row = session.execute(_statements(session, t).session, _params(key)).first()
    return None if row is None else _info(row)


def list_sessions(
    session: Session,
    t: Tables,
    user_id: str | None,
    limit: int | None,
    offset: int,
) -> list[SessionInfo]:
    """Sessions, most recently active first; one user's when `user_id` is given."""
    st = _statements(session, t)
    params = {"k_limit": _NO_LIMIT if limit is None else limit, "k_offset": offset}
    if user_id is None:
        return [_info(r) for r in session.execute(st.list_all, params)]
    return [_info(r) for r in session.execute(st.list_user, {**params, "k_user": user_id})]


def count_messages(session: Session, t: Tables, key: SessionKey) -> int:
    """Number of messages in the session (from the session row)."""
    found = session.execute(_statements(session, t).count, _params(key)).all()
    return int(found[0][0] or 0) if found else 0


def max_statement_bytes(session: Session) -> int | None:
    """The server's largest statement in bytes, where it has such a limit (MySQL/MariaDB's
    `max_allowed_packet`)."""
    return session.rules.max_statement_bytes(session)
