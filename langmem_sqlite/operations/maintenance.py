"""What the CLI's inspection and maintenance commands compute: users, table stats, retention
(through the public classes, but for the table statistics)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..engine import Database
from ..engine.schema import Tables
from ..engine.unit import Unit
from ..history.store import ConversationStore, idle_cutoff
from ..validation import check_id
from .erasure import threads_of_user
from .ownership import thread_users
from .per_database import table_bytes, table_names

__all__ = [
    "PruneReport",
    "TableStat",
    "list_users",
    "prune",
    "table_stats",
    "users_with_session",
]

_USERS_NAMESPACE = "users"


@dataclass(frozen=True)
class TableStat:
    """One table: its name, row count and size in bytes (`None` where not measurable)."""

    table: str
    rows: int
    bytes: int | None


def _table_stats(unit: Unit, tables: Tables) -> list[TableStat]:
    present = table_names(unit, tables.schema)
    out = []
    for table in tables.metadata.sorted_tables:
        if table.name in present:
            rows = unit.execute(sa.select(sa.func.count()).select_from(table)).scalar()
            out.append(TableStat(table.name, int(rows or 0), table_bytes(unit, table)))
    return out


def table_stats(db: Database, tables: Tables) -> list[TableStat]:
    """Row counts and sizes of this package's tables (those that exist) in `db`."""
    return db.run(_table_stats, tables)  # type: ignore[no-any-return]


def _users_with_session(unit: Unit, tables: Tables, session_id: str) -> list[str]:
    c = tables.sessions.c
    stmt = sa.select(c.user_id).where(c.session_id == session_id).order_by(c.user_id)
    return [str(u) for u in unit.execute(stmt).scalars()]


def users_with_session(store: ConversationStore, session_id: str) -> list[str]:
    """The users who have a session called `session_id` (`""`: the one without a user)."""
    return store.db.run(  # type: ignore[no-any-return]
        _users_with_session, store.tables, session_id, single=True
    )


def list_users(store: ConversationStore, saver: Any, facts_store: Any) -> list[dict[str, Any]]:
    """Every user id seen in sessions, checkpointer threads or facts, with how many sessions,
    threads and facts each has.

    A thread counts for each user its checkpoints name, by the rule of
    [`ownership`][langmem_sqlite.operations.ownership] that
    [`forget_user`][langmem_sqlite.forget_user] deletes by.
    """
    users: dict[str, dict[str, Any]] = {}

    def row(uid: str) -> dict[str, Any]:
        return users.setdefault(uid, {"user_id": uid, "sessions": 0, "threads": 0, "facts": 0})

    for s in store.list_sessions(None):
        if s.user_id is not None:
            row(s.user_id)["sessions"] += 1
    for named in thread_users(saver).values():
        for uid in named:
            row(uid)["threads"] += 1
    for ns in facts_store.list_namespaces(prefix=(_USERS_NAMESPACE,), max_depth=3):
        if len(ns) == 3 and ns[2] == "facts":
            row(ns[1])["facts"] += len(facts_store.search(ns, limit=10_000))
    return sorted(users.values(), key=lambda r: r["user_id"])


@dataclass(frozen=True)
class PruneReport:
    """What a retention run deletes (or would delete, in a dry run)."""

    older_than_days: float
    dry_run: bool
    sessions: list[str]
    threads: list[str]


def prune(
    store: ConversationStore,
    saver: Any,
    days: float,
    *,
    user_id: str | None = None,
    dry_run: bool = False,
) -> PruneReport:
    """Delete sessions and checkpointer threads idle for more than `days` days.

    With `user_id`, only that user's sessions and threads (a thread is the user's by the rule
    of [`ownership`][langmem_sqlite.operations.ownership], the one
    [`forget_user`][langmem_sqlite.forget_user] deletes by). `dry_run` lists what would go and
    deletes nothing.

    Raises:
        ValueError: `days` is not a finite number from 0 to
            [`MAX_DAYS`][langmem_sqlite.history.store.MAX_DAYS] (nothing is deleted).
    """
    cutoff = idle_cutoff(days)
    if user_id is not None:
        user_id = check_id(user_id, "user_id")
    sessions = [
        f"{s.user_id or ''}/{s.session_id}"
        for s in store.list_sessions(user_id)
        if s.updated_at < cutoff
    ]
    mine = threads_of_user(saver, user_id) if user_id is not None else None
    idle = [
        t
        for t in saver.list_threads()
        if t.updated_at < cutoff and (mine is None or t.thread_id in mine)
    ]
    threads = [t.thread_id for t in idle]
    if not dry_run:
        store.delete_sessions_older_than(days, user_id=user_id)
        if user_id is None:
            saver.delete_idle_threads(days)
        else:
            for t in idle:
                saver.delete_thread(t.thread_id)
    return PruneReport(days, dry_run, sessions, threads)
