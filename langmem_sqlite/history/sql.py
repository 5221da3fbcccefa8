"""The SQL of the conversation store: sessions and their messages.

Every function here takes a [`Unit`][langmem_sqlite.engine.Unit] and the
[`Tables`][langmem_sqlite.engine.schema.Tables] to use, and runs as one unit of work of
[`Database.run`][langmem_sqlite.engine.Database.run] or `arun`. Statements are built once per
engine and set of tables ([`Unit.statement`][langmem_sqlite.engine.Unit.statement]), with
bound parameters only; what differs between databases comes from `unit.rules`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, func, insert, select, update

from ..engine.dialects import Rules
from ..engine.schema import Tables
from ..engine.unit import Unit

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
    bound parameters only: built once per engine
    ([`Unit.statement`][langmem_sqlite.engine.Unit.statement]), so SQLAlchemy compiles each once."""

    def __init__(self, t: Tables, rules: Rules) -> None:
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
        info = select(*(s[f.name] for f in fields(SessionInfo)))
        self.session = info.where(match)
        listing = info.order_by(s.updated_at.desc(), s.id.desc())
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
        # The sessions to delete, by a condition: the one session, those idle since a time (of
        # every user or of one), or a user's.
        idle = s.updated_at < bindparam("k_cutoff")
        user = s.user_id == bindparam("k_user")
        self.doomed = {
            name: select(s.id).where(where)
            for name, where in (
                ("session", match),
                ("idle", idle),
                ("idle_user", and_(idle, user)),
                ("user", user),
            )
        }
        self.delete_messages_of = delete(t.messages).where(
            m.session_pk.in_(bindparam("k_ids", expanding=True))
        )
        self.delete_sessions_of = delete(t.sessions).where(
            s.id.in_(bindparam("k_ids", expanding=True))
        )


def _statements(unit: Unit, t: Tables) -> _Statements:
    return unit.statement(  # type: ignore[no-any-return]
        ("history", t.key), lambda: _Statements(t, unit.rules)
    )


def _params(key: SessionKey, **extra: Any) -> dict[str, Any]:
    return {"k_user": key.user_id, "k_session": key.session_id, **extra}


def _create_session(unit: Unit, t: Tables, key: SessionKey, now: int, **extra: Any) -> None:
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
    unit.execute(_statements(unit, t).create, values)


def _bump(unit: Unit, t: Tables, key: SessionKey, n: int, tokens: int, now: int) -> Any:
    """Reserve `n` positions in the session; return (pk, count_after, tokens_after) or None."""
    st = _statements(unit, t)
    params = _params(key, k_n=n, k_tokens=tokens, k_now=now)
    if unit.connection.dialect.update_returning:
        return unit.execute(st.bump_returning, params).first()
    if unit.execute(st.bump, params).rowcount == 0:
        return None
    return unit.execute(st.after_bump, _params(key)).first()


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


def add_messages(
    unit: Unit,
    t: Tables,
    key: SessionKey,
    rows: Sequence[MessageRow],
    now: int,
    append: Append | None = None,
    skip_existing: bool = False,
) -> Appended:
    """Append `rows` to the session (created if missing).

    One session update reserves the positions and locks the session row (SQLite: the
    transaction holds the write lock from its start), so appends to one session take turns;
    the session's ids among those of `rows` are read under that lock, then one executemany
    insert writes the messages. A message id names at most one row of a session (the unique
    key on `(session_pk, message_id)`): with `skip_existing`, a message whose id the session
    holds, or that repeats an earlier id of `rows`, is left out; without it, every message is
    appended, and a repeated id is kept in the stored message but not in the `message_id`
    column (which names the first message that carried it). Positions stay contiguous and in
    the order of `rows`. With `append`, a repeated attempt of the same append that finds it
    already stored writes nothing (see `Append`).
    """
    st = _statements(unit, t)
    tokens = sum(r.token_count for r in rows)
    got = _bump(unit, t, key, len(rows), tokens, now)
    if got is None:
        _create_session(unit, t, key, now)
        got = _bump(unit, t, key, len(rows), tokens, now)
    pk, count, total = got
    if append is not None:
        append.tries += 1
        mine = {"k_pk": pk, "k_token": append.token}
        if append.tries > 1 and unit.execute(st.token_row, mine).first():
            # the earlier attempt committed: give back the positions just reserved
            unit.execute(st.unbump, {"k_pk": pk, "k_n": len(rows), "k_tokens": tokens})
            return Appended(append.written, int(count) - len(rows))
    known = existing_message_ids(unit, t, key, [r.message_id for r in rows if r.message_id])
    kept: list[tuple[MessageRow, str | None]] = []
    for r in rows:
        mid = r.message_id
        if mid in known:
            if skip_existing:
                continue
            mid = None  # stored again, found under its first copy
        elif mid is not None:
            known.add(mid)
        kept.append((r, mid))
    kept_tokens = sum(r.token_count for r, _ in kept)
    if len(kept) < len(rows):
        left_out = {"k_pk": pk, "k_n": len(rows) - len(kept), "k_tokens": tokens - kept_tokens}
        unit.execute(st.unbump, left_out)
        count -= len(rows) - len(kept)
        total -= tokens - kept_tokens
    if append is not None:
        append.written = len(kept)
    seq, before = count - len(kept), total - kept_tokens
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
    if params:
        unit.execute(st.insert, params)
    return Appended(len(kept), int(count))


def read_messages(
    unit: Unit, t: Tables, key: SessionKey, limit: int | None, max_seq: int | None = None
) -> list[tuple[int, str]]:
    """`(seq, body)` of the session's messages in order; the last `limit` if given (`max_seq`
    hides messages added after a snapshot)."""
    st = _statements(unit, t)
    params = _params(key, k_max_seq=_NO_MAX if max_seq is None else max_seq)
    if limit is None:
        return unit.execute(st.read_after, {**params, "k_after": -1}).all()
    return unit.execute(st.read_last, {**params, "k_limit": limit}).all()[::-1]


def read_after_summary(
    unit: Unit, t: Tables, key: SessionKey, max_seq: int | None = None
) -> tuple[str | None, list[tuple[int, str]]]:
    """The session's summary record and `(seq, body)` of the messages it does not cover yet.

    The record's `upto_seq` (the position of the last summarized message, if the record has
    one) bounds the read, so its cost follows what is not yet summarized, not the history.
    """
    st = _statements(unit, t)
    summary = unit.execute(st.summary, _params(key)).scalar()
    after = -1
    if summary:
        try:
            after = int(json.loads(summary).get("upto_seq", -1))
        except (ValueError, TypeError, AttributeError, OverflowError):
            after = -1  # not a record of ours: read everything, the policy validates it
        if not -1 <= after < _NO_MAX:
            after = -1  # no position of this session: read everything
    params = _params(key, k_max_seq=_NO_MAX if max_seq is None else max_seq, k_after=after)
    return summary, unit.execute(st.read_after, params).all()


def read_token_window(
    unit: Unit, t: Tables, key: SessionKey, budget: int, max_seq: int | None = None
) -> list[tuple[int, str, str, int]]:
    """`(seq, type, body, token_count)` of the longest recent suffix whose stored token counts
    sum to at most `budget`; found through the `tokens_before` index, not by a scan."""
    st = _statements(unit, t)
    if max_seq is None:
        return unit.execute(st.window, _params(key, k_budget=budget)).all()
    params = _params(key, k_budget=budget, k_max_seq=max_seq)
    return unit.execute(st.window_snapshot, params).all()


def existing_message_ids(
    unit: Unit, t: Tables, key: SessionKey, message_ids: Sequence[str]
) -> set[str]:
    """Which of `message_ids` the session already holds (read a chunk of ids at a time)."""
    st, known = _statements(unit, t), set[str]()
    for i in range(0, len(message_ids), _IN_CHUNK):
        chunk = list(message_ids[i : i + _IN_CHUNK])
        known.update(unit.execute(st.known_ids, _params(key, k_ids=chunk)).scalars())
    return known


def clear_session(unit: Unit, t: Tables, key: SessionKey, now: int) -> int:
    """Delete the session's messages (the session row stays); return how many were deleted."""
    st = _statements(unit, t)
    n = unit.execute(st.clear_messages, _params(key)).rowcount
    unit.execute(st.clear, _params(key, k_now=now))
    return int(n)


def _delete_sessions(unit: Unit, t: Tables, which: str, params: dict[str, Any]) -> int:
    """Delete the sessions `which` (a condition of `_Statements.doomed`) selects, and their
    messages (explicitly: SQLite may run without foreign keys), by lists of their ids."""
    st = _statements(unit, t)
    ids = unit.execute(st.doomed[which], params).scalars().all()
    deleted = 0
    for i in range(0, len(ids), _ID_CHUNK):
        chunk = {"k_ids": ids[i : i + _ID_CHUNK]}
        unit.execute(st.delete_messages_of, chunk)
        deleted += int(unit.execute(st.delete_sessions_of, chunk).rowcount)
    return deleted


def delete_session(unit: Unit, t: Tables, key: SessionKey) -> bool:
    """Delete one session and its messages; `False` if it did not exist."""
    return _delete_sessions(unit, t, "session", _params(key)) > 0


def delete_idle_sessions(unit: Unit, t: Tables, cutoff: int, user_id: str | None = None) -> int:
    """Delete sessions last active before `cutoff` (ms); return how many."""
    which = "idle" if user_id is None else "idle_user"
    return _delete_sessions(unit, t, which, {"k_cutoff": cutoff, "k_user": user_id})


def user_counts(unit: Unit, t: Tables, user_id: str) -> tuple[int, int, int]:
    """A user's `(sessions, messages, summaries)`."""
    st = _statements(unit, t)
    sessions, summaries = unit.execute(st.user_sessions, {"k_user": user_id}).one()
    messages = unit.execute(st.user_messages, {"k_user": user_id}).scalar()
    return int(sessions), int(messages), int(summaries)


def delete_user(unit: Unit, t: Tables, user_id: str) -> tuple[int, int, int]:
    """Delete every session of `user_id` (messages, titles, summaries), overwriting the
    deleted rows where the database can (`overwriting_deletes`); return `user_counts`."""
    counts = user_counts(unit, t, user_id)
    if not counts[0]:
        return counts
    with unit.rules.overwriting_deletes(unit):
        _delete_sessions(unit, t, "user", {"k_user": user_id})
    return counts


def rename_session(unit: Unit, t: Tables, key: SessionKey, title: str | None) -> bool:
    """Set the session's title; `False` if it does not exist."""
    res = unit.execute(_statements(unit, t).rename, _params(key, k_title=title))
    return bool(res.rowcount)


def set_summary(unit: Unit, t: Tables, key: SessionKey, summary: str | None, now: int) -> None:
    """Store the running-summary record (JSON text) on the session row, creating the session."""
    st = _statements(unit, t)
    if not unit.execute(st.set_summary, _params(key, k_summary=summary)).rowcount:
        _create_session(unit, t, key, now, summary=summary)


def _info(row: Any) -> SessionInfo:
    return SessionInfo(row[0] or None, *row[1:])  # "" stands for "no user"


def get_session(unit: Unit, t: Tables, key: SessionKey) -> SessionInfo | None:
    """One session's row, or `None`."""
    row = unit.execute(_statements(unit, t).session, _params(key)).first()
    return None if row is None else _info(row)


def list_sessions(
    unit: Unit,
    t: Tables,
    user_id: str | None,
    limit: int | None,
    offset: int,
) -> list[SessionInfo]:
    """Sessions, most recently active first; one user's when `user_id` is given."""
    st = _statements(unit, t)
    params = {"k_limit": _NO_LIMIT if limit is None else limit, "k_offset": offset}
    if user_id is None:
        return [_info(r) for r in unit.execute(st.list_all, params)]
    return [_info(r) for r in unit.execute(st.list_user, {**params, "k_user": user_id})]


def count_messages(unit: Unit, t: Tables, key: SessionKey) -> int:
    """Number of messages in the session (from the session row)."""
    return int(unit.execute(_statements(unit, t).count, _params(key)).scalar() or 0)
