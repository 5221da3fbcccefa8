"""The SQL of the conversation store: functions run in one `Unit` on the given `Tables`; the
statements of appends and reads are built once per set of tables, bound to `uid` and `sid`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, func, insert, select, update
from sqlalchemy.sql.elements import ColumnElement

from ..engine.schema import Tables
from ..engine.unit import Unit


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
_CHUNK = 10_000  # ids per IN list (SQLite binds up to 32,766 parameters a statement)


def _key(key: SessionKey, max_seq: int | None = None) -> dict[str, Any]:
    """The bound values naming the session (and the snapshot's last position)."""
    upto = _NO_MAX if max_seq is None else max_seq
    return {"uid": key.user_id, "sid": key.session_id, "max_seq": upto}


def _match(t: Tables) -> ColumnElement[bool]:
    s = t.sessions.c
    return and_(s.user_id == bindparam("uid"), s.session_id == bindparam("sid"))


def _pk(t: Tables) -> Any:
    """The session's primary key, as a subquery."""
    return select(t.sessions.c.id).where(_match(t)).scalar_subquery()


def _in_session(t: Tables) -> ColumnElement[bool]:
    """The session's messages up to `max_seq` (which hides messages added after a snapshot)."""
    m = t.messages.c
    return and_(m.session_pk == _pk(t), m.seq <= bindparam("max_seq"))


class _Statements:
    """The statements of appends and reads for one set of tables, built once per engine."""

    def __init__(self, unit: Unit, t: Tables) -> None:
        s, m = t.sessions.c, t.messages.c
        in_session = _in_session(t)
        self.create = unit.rules.insert_ignore(t.sessions, ("user_id", "session_id"))
        self.bump = _add_counts(t, _match(t)).values(updated_at=bindparam("now"))
        if unit.connection.dialect.update_returning:
            self.bump = self.bump.returning(s.id, s.message_count, s.token_total)
        self.counts = select(s.id, s.message_count, s.token_total).where(_match(t))
        self.unbump = _add_counts(t, s.id == bindparam("pk"))
        mine = and_(m.session_pk == bindparam("pk"), m.write_token == bindparam("token"))
        self.written = select(m.id).where(mine).limit(1)
        ids = m.message_id.in_(bindparam("ids", expanding=True))
        self.ids = select(m.message_id).where(m.session_pk == _pk(t), ids)
        self.insert = insert(t.messages)
        rows = select(m.seq, m.body).where(in_session)
        self.all = rows.order_by(m.seq)
        self.last = rows.order_by(m.seq.desc()).limit(bindparam("limit"))
        self.summary = select(s.summary).where(_match(t))
        self.after = rows.where(m.seq > bindparam("after")).order_by(m.seq)
        self.window = _window(t, False)
        self.snapshot_window = _window(t, True)


def _statements(unit: Unit, t: Tables) -> _Statements:
    return unit.statement((t.key, "history"), partial(_Statements, unit, t))  # type: ignore[no-any-return]


def _window(t: Tables, snapshot: bool) -> Any:
    """The messages from where `tokens_before >= total - :budget` (see `read_token_window`)."""
    s, m = t.sessions.c, t.messages.c
    if snapshot:
        at_snapshot = and_(m.session_pk == _pk(t), m.seq == bindparam("max_seq"))
        total = select(m.tokens_before + m.token_count).where(at_snapshot).scalar_subquery()
        where = _in_session(t)
    else:
        total = select(s.token_total).where(_match(t)).scalar_subquery()
        where = m.session_pk == _pk(t)
    q = select(m.seq, m.type, m.body)
    return q.where(where, m.tokens_before >= total - bindparam("budget")).order_by(m.seq)


def _add_counts(t: Tables, where: Any) -> Any:
    """Add `:n` messages and `:tokens` to the counts of the session `where` selects."""
    s = t.sessions.c
    n, tokens = s.message_count + bindparam("n"), s.token_total + bindparam("tokens")
    return update(t.sessions).where(where).values(message_count=n, token_total=tokens)


def _create_session(unit: Unit, t: Tables, key: SessionKey, now: int, **extra: Any) -> None:
    """Create a session row unless it exists (another writer may create it concurrently)."""
    new = {"message_count": 0, "token_total": 0, "created_at": now, "updated_at": now}
    values = {"user_id": key.user_id, "session_id": key.session_id, **new, **extra}
    unit.execute(_statements(unit, t).create, values)


def _bump(unit: Unit, t: Tables, key: SessionKey, n: int, tokens: int, now: int) -> Any:
    """Reserve `n` positions in the session; return (pk, count_after, tokens_after) or None."""
    stmts = _statements(unit, t)
    params = {**_key(key), "n": n, "tokens": tokens, "now": now}
    res = unit.execute(stmts.bump, params)
    if res.returns_rows:
        return res.first()
    if res.rowcount == 0:
        return None
    return unit.execute(stmts.counts, params).first()


def _unbump(unit: Unit, t: Tables, pk: int, n: int, tokens: int) -> None:
    """Give back `n` positions and `tokens` reserved by `_bump`."""
    unit.execute(_statements(unit, t).unbump, {"pk": pk, "n": -n, "tokens": -tokens})


@dataclass
class Append:
    """One append, across the attempts [`Database.run`][langmem_sqlite.engine.Database.run] may
    make of it: after a connection lost during COMMIT, a later attempt that finds the `token`
    the first row carries does not write the messages again (it reports what was written)."""

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


def add_messages(
    unit: Unit,
    t: Tables,
    key: SessionKey,
    rows: Sequence[MessageRow],
    now: int,
    append: Append | None = None,
    skip_existing: bool = False,
) -> Appended:
    """Append `rows` to the session (created if missing), positions contiguous and in order.

    One session update reserves the positions and locks the session row, so appends to one
    session take turns; the session's ids among those of `rows` are read under that lock, then
    one executemany insert writes the messages. With `skip_existing`, a message whose id the
    session holds (or that repeats an earlier id of `rows`) is left out; without it, a repeated
    id is kept in the message but not in the unique `message_id` column. With `append`, a
    repeated attempt of an append already stored writes nothing.
    """
    tokens = sum(r.token_count for r in rows)
    got = _bump(unit, t, key, len(rows), tokens, now)
    if got is None:
        _create_session(unit, t, key, now)
        got = _bump(unit, t, key, len(rows), tokens, now)
    pk, count, total = got
    if append is not None:
        append.tries += 1
        mine = {"pk": pk, "token": append.token}
        if append.tries > 1 and unit.execute(_statements(unit, t).written, mine).first():
            # the earlier attempt committed: give back the positions just reserved
            _unbump(unit, t, pk, len(rows), tokens)
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
        _unbump(unit, t, pk, len(rows) - len(kept), tokens - kept_tokens)
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
        unit.execute(_statements(unit, t).insert, params)
    return Appended(len(kept), int(count))


def read_messages(
    unit: Unit, t: Tables, key: SessionKey, limit: int | None, max_seq: int | None = None
) -> list[tuple[int, str]]:
    """`(seq, body)` of the session's messages in order; the last `limit` if given (`max_seq`
    hides messages added after a snapshot)."""
    stmts = _statements(unit, t)
    if limit is None:
        return unit.execute(stmts.all, _key(key, max_seq)).all()
    return unit.execute(stmts.last, {**_key(key, max_seq), "limit": limit}).all()[::-1]


def read_after_summary(
    unit: Unit, t: Tables, key: SessionKey, max_seq: int | None = None
) -> tuple[str | None, list[tuple[int, str]]]:
    """The session's summary record and `(seq, body)` of the messages it does not cover yet.

    The record's `upto_seq` (the position of the last summarized message, if the record has
    one) bounds the read, so its cost follows what is not yet summarized, not the history.
    """
    stmts = _statements(unit, t)
    params = _key(key, max_seq)
    summary = unit.execute(stmts.summary, params).scalar()
    after = -1
    if summary:
        try:
            after = int(json.loads(summary).get("upto_seq", -1))
        except (ValueError, TypeError, AttributeError, OverflowError):
            after = -1  # not a record of ours: read everything, the policy validates it
        if not -1 <= after < _NO_MAX:
            after = -1  # no position of this session: read everything
    return summary, unit.execute(stmts.after, {**params, "after": after}).all()


def read_token_window(
    unit: Unit, t: Tables, key: SessionKey, budget: int, max_seq: int | None = None
) -> list[tuple[int, str, str]]:
    """`(seq, type, body)` of the longest recent suffix whose stored token counts
    sum to at most `budget`; found through the `tokens_before` index, not by a scan.

    The suffix starts where `tokens_before >= total - budget`, the total being the session's,
    or (under a snapshot) the running sum at the snapshot's last message."""
    stmts = _statements(unit, t)
    stmt = stmts.window if max_seq is None else stmts.snapshot_window
    return unit.execute(stmt, {**_key(key, max_seq), "budget": budget}).all()


def existing_message_ids(
    unit: Unit, t: Tables, key: SessionKey, message_ids: Sequence[str]
) -> set[str]:
    """Which of `message_ids` the session already holds (read a chunk of ids at a time)."""
    known = set[str]()
    stmt = _statements(unit, t).ids
    for i in range(0, len(message_ids), _CHUNK):
        chunk = list(message_ids[i : i + _CHUNK])
        known.update(unit.execute(stmt, {**_key(key), "ids": chunk}).scalars())
    return known


def clear_session(unit: Unit, t: Tables, key: SessionKey, now: int) -> int:
    """Delete the session's messages (the session row stays); return how many were deleted."""
    params = _key(key)
    n = unit.execute(delete(t.messages).where(t.messages.c.session_pk == _pk(t)), params).rowcount
    cleared = {"message_count": 0, "token_total": 0, "summary": None, "updated_at": now}
    unit.execute(update(t.sessions).where(_match(t)).values(cleared), params)
    return int(n)


def _delete_sessions(
    unit: Unit, t: Tables, where: ColumnElement[bool], params: dict[str, Any] | None = None
) -> int:
    """Delete the sessions `where` selects, and their messages (explicitly: SQLite may run
    without foreign keys), by lists of their ids."""
    s, m = t.sessions.c, t.messages.c
    ids = unit.execute(select(s.id).where(where), params).scalars().all()
    deleted = 0
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        unit.execute(delete(t.messages).where(m.session_pk.in_(chunk)))
        deleted += int(unit.execute(delete(t.sessions).where(s.id.in_(chunk))).rowcount)
    return deleted


def delete_session(unit: Unit, t: Tables, key: SessionKey) -> bool:
    """Delete one session and its messages; `False` if it did not exist."""
    return _delete_sessions(unit, t, _match(t), _key(key)) > 0


def delete_idle_sessions(unit: Unit, t: Tables, cutoff: int, user_id: str | None = None) -> int:
    """Delete sessions (of one user, if given) last active before `cutoff` (ms); the count."""
    s = t.sessions.c
    idle = s.updated_at < cutoff
    return _delete_sessions(unit, t, idle if user_id is None else and_(idle, s.user_id == user_id))


def user_counts(unit: Unit, t: Tables, user_id: str) -> tuple[int, int, int]:
    """A user's `(sessions, messages, summaries)`."""
    s, m = t.sessions.c, t.messages.c
    q = select(func.count(), func.count(s.summary)).where(s.user_id == user_id)
    sessions, summaries = unit.execute(q).one()
    joined = t.sessions.join(t.messages, m.session_pk == s.id)
    q = select(func.count()).select_from(joined).where(s.user_id == user_id)
    return int(sessions), int(unit.execute(q).scalar() or 0), int(summaries)


def delete_user(unit: Unit, t: Tables, user_id: str) -> tuple[int, int, int]:
    """Delete every session of `user_id` (messages, titles, summaries), overwriting the
    deleted rows where the database can (`overwriting_deletes`); return `user_counts`."""
    counts = user_counts(unit, t, user_id)
    if not counts[0]:
        return counts
    with unit.rules.overwriting_deletes(unit):
        _delete_sessions(unit, t, t.sessions.c.user_id == user_id)
    return counts


def rename_session(unit: Unit, t: Tables, key: SessionKey, title: str | None) -> bool:
    """Set the session's title; `False` if it does not exist."""
    res = unit.execute(update(t.sessions).where(_match(t)).values(title=title), _key(key))
    return bool(res.rowcount)


def set_summary(unit: Unit, t: Tables, key: SessionKey, summary: str | None, now: int) -> None:
    """Store the running-summary record (JSON text) on the session row, creating the session."""
    stmt = update(t.sessions).where(_match(t)).values(summary=summary)
    if not unit.execute(stmt, _key(key)).rowcount:
        _create_session(unit, t, key, now, summary=summary)


def _info_query(t: Tables) -> Any:
    return select(*(t.sessions.c[f.name] for f in fields(SessionInfo)))


def _info(row: Any) -> SessionInfo:
    return SessionInfo(row[0] or None, *row[1:])  # "" stands for "no user"


def get_session(unit: Unit, t: Tables, key: SessionKey) -> SessionInfo | None:
    """One session's row, or `None`."""
    row = unit.execute(_info_query(t).where(_match(t)), _key(key)).first()
    return None if row is None else _info(row)


def list_sessions(
    unit: Unit, t: Tables, user_id: str | None, limit: int | None, offset: int
) -> list[SessionInfo]:
    """Sessions, most recently active first; one user's when `user_id` is given."""
    s = t.sessions.c
    q = _info_query(t).order_by(s.updated_at.desc(), s.id.desc()).limit(limit).offset(offset)
    if user_id is not None:
        q = q.where(s.user_id == user_id)
    return [_info(r) for r in unit.execute(q)]


def count_messages(unit: Unit, t: Tables, key: SessionKey) -> int:
    """Number of messages in the session (from the session row)."""
    q = select(t.sessions.c.message_count).where(_match(t))
    return int(unit.execute(q, _key(key)).scalar() or 0)
