"""Whose thread is it: the one rule that ties checkpointer threads to users.

A thread is a user's when **any** of its checkpoints' metadata names the user under one of
[`THREAD_USER_KEYS`][langmem_sqlite.operations.ownership.THREAD_USER_KEYS] (LangGraph's
`user_id`, the LangGraph API server's `langgraph_auth_user_id`), as a string or, for a numeric
id, as an integer; a thread may belong to several users. `forget-user` deletes by this rule,
and `users`, `threads --user`, `prune --user` and `copy --user` select by it. Without
searchable metadata (an encrypting saver) the saver decodes each checkpoint's metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Text, and_, cast, or_, select
from sqlalchemy.engine import Connection

from ..checkpoint.meta import matches, prefilter
from ..engine.schema import Tables
from ..engine.unit import Unit

if TYPE_CHECKING:
    from ..checkpoint import SQLSaver

__all__ = [
    "THREAD_USER_KEYS",
    "named_users",
    "thread_users",
    "threads_named",
    "user_filters",
    "user_values",
    "users_by_thread",
]

THREAD_USER_KEYS: tuple[str, ...] = ("user_id", "langgraph_auth_user_id")
"""Checkpoint metadata keys that name a thread's user."""


def user_values(user_id: str) -> list[str | int]:
    """The metadata values naming `user_id`: the string, and for a numeric id the integer
    (LangGraph copies `configurable` ints into metadata as ints)."""
    values: list[str | int] = [user_id]
    try:
        number = int(user_id)
    except ValueError:
        return values
    if str(number) == user_id:
        values.append(number)
    return values


def user_filters(user_id: str, keys: Sequence[str] = THREAD_USER_KEYS) -> list[dict[str, Any]]:
    """One metadata filter per key and value that names `user_id`."""
    return [{k: v} for k in keys for v in user_values(user_id)]


def named_users(
    metadata: Mapping[str, Any] | None, keys: Sequence[str] = THREAD_USER_KEYS
) -> set[str]:
    """The user ids one checkpoint's metadata names (the inverse of
    [`user_values`][langmem_sqlite.operations.ownership.user_values])."""
    out: set[str] = set()
    if not isinstance(metadata, Mapping):
        return out
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            out.add(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            out.add(str(value))
    return out


def threads_named(unit: Unit, t: Tables, filters: list[dict[str, Any]]) -> tuple[set[str], int]:
    """Threads any of whose checkpoints' JSON metadata matches one of `filters`, and how
    many other threads have checkpoints without a JSON copy (an encrypting saver's)."""
    c = t.checkpoints.c
    wanted = or_(*(and_(*prefilter(c.metadata_json, f, unit.rules.name)) for f in filters))
    found = {
        row.thread_id
        for row in unit.execute(
            select(c.thread_id, c.metadata_json).where(c.metadata_json.is_not(None), wanted)
        )
        if any(matches(row.metadata_json, f) for f in filters)
    }
    # no JSON copy: SQL NULL, or the JSON null a saver without searchable metadata writes
    no_copy = or_(c.metadata_json.is_(None), cast(c.metadata_json, Text) == "null")
    opaque = set(unit.execute(select(c.thread_id).where(no_copy).distinct()).scalars())
    return found, len(opaque - found)


def users_by_thread(
    conn: Unit | Connection, t: Tables, keys: Sequence[str] = THREAD_USER_KEYS
) -> dict[str, set[str]]:
    """Every thread whose checkpoints' JSON metadata names a user, with the users named: on a
    `Unit`, or on a SQLAlchemy `Connection` (`copy_database` streams it with
    `execution_options(yield_per=...)`)."""
    c = t.checkpoints.c
    rows = conn.execute(select(c.thread_id, c.metadata_json).where(c.metadata_json.is_not(None)))
    return _by_thread(((row.thread_id, row.metadata_json) for row in rows), keys)


def _by_thread(metadata: Iterable[tuple[str, Any]], keys: Sequence[str]) -> dict[str, set[str]]:
    """Each thread of `(thread_id, metadata)` pairs with the users its metadata names."""
    out: dict[str, set[str]] = {}
    for thread_id, meta in metadata:
        named = named_users(meta, keys)
        if named:
            out.setdefault(thread_id, set()).update(named)
    return out


def thread_users(saver: SQLSaver, keys: Sequence[str] = THREAD_USER_KEYS) -> dict[str, set[str]]:
    """Every thread that names a user, with the users its checkpoints name (a saver without
    searchable metadata decodes every checkpoint for it)."""
    if saver.searchable_metadata:
        return saver.db.run(users_by_thread, saver.tables, tuple(keys))  # type: ignore[no-any-return]
    tuples = saver.list(None)
    return _by_thread(
        ((tp.config["configurable"]["thread_id"], tp.metadata) for tp in tuples), keys
    )
