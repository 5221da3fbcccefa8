"""Forgetting a user: [`forget_user`][langmem_sqlite.forget_user] (and
[`aforget_user`][langmem_sqlite.aforget_user]) deletes everything the package stores about one
user id: the user's **sessions** with their messages and summaries; the checkpointer **threads**
that are the user's by [`ownership`][langmem_sqlite.operations.ownership]'s rule, and those
named in `thread_ids`; the store's **items** under the user's namespaces (by default everything
under `("users", user_id)`: facts, pending facts and the rest, expired items included).

On a SQLite file no byte of the deleted content stays in the file or its `-wal`: sessions are
deleted with `PRAGMA secure_delete` on, `VACUUM` rewrites the file, and
`PRAGMA wal_checkpoint(TRUNCATE)` empties the log. PostgreSQL and MariaDB keep deleted rows'
bytes in their files until their own vacuum or purge reuses the space (and in their logs and
backups): see the README.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from langgraph.store.base import PutOp, SearchItem
from sqlalchemy import func, select

from ..engine import Database, DatabaseLike, get_database
from ..engine.migrations import schema_plan
from ..engine.schema import DEFAULT_PREFIX, Tables, get_tables
from ..engine.unit import Unit
from ..history import sql
from ..plans import adrive, drive
from ..validation import IdLike, check_id
from .ownership import THREAD_USER_KEYS, threads_named, user_filters
from .per_database import scrub

if TYPE_CHECKING:
    from ..checkpoint import SQLSaver
    from ..memory import Memory
    from ..store import SQLStore

__all__ = [
    "DEFAULT_STORE_PREFIXES",
    "THREAD_USER_KEYS",
    "ForgetReport",
    "aforget_user",
    "forget_user",
    "threads_of_user",
]

T = TypeVar("T")

USER = "{user_id}"
"""The placeholder for the user id in
[`DEFAULT_STORE_PREFIXES`][langmem_sqlite.operations.erasure.DEFAULT_STORE_PREFIXES] and
`store_prefixes`."""

DEFAULT_STORE_PREFIXES: tuple[tuple[str, ...], ...] = (("users", USER),)
"""Store namespaces holding a user's items: everything under `("users", user_id)`, where
[`UserFacts`][langmem_sqlite.store.UserFacts] keeps facts by default."""


_FACT_NAMESPACES = ("facts", "pending_facts")
_PAGE = 1000


@dataclass(frozen=True)
class ForgetReport:
    """What [`forget_user`][langmem_sqlite.forget_user] deleted (or, with `dry_run`, would delete),
    per kind."""

    user_id: str
    dry_run: bool
    sessions: int = 0
    messages: int = 0
    summaries: int = 0
    """Sessions that had a running summary."""
    threads: int = 0
    checkpoints: int = 0
    facts: int = 0
    """Store items in a `facts` or `pending_facts` namespace of the user."""
    store_items: int = 0
    """The user's other store items."""
    thread_ids: list[str] = field(default_factory=list)
    namespaces: list[tuple[str, ...]] = field(default_factory=list)
    """The store namespaces emptied."""
    other_namespaces: list[tuple[str, ...]] = field(default_factory=list)
    """Store namespaces that have the user id as a label but are outside `store_prefixes`:
    kept (they may be shared); add their prefix to delete them."""
    unreadable_threads: int = 0
    """Threads whose checkpoint metadata is encrypted (no JSON copy) and could not be matched:
    pass the application's saver (`saver=`) to search them."""
    vacuumed: bool = False
    """SQLite file: `VACUUM` rewrote it, so no free page or free space within a page keeps a
    copy (of these rows, or left earlier by updates and deletes)."""
    wal_emptied: bool | None = None
    """SQLite file: the write-ahead log was checkpointed and truncated to 0 bytes (`False`: a
    reader kept it busy, run the call again). `None`: a server, an in-memory database, or a
    dry run."""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


class _Call(NamedTuple):
    """One step of a job: `obj.name(*args, **kwargs)`, or in async code `obj.aname(...)`."""

    obj: Any
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


_Job = Generator[_Call, Any, T]


def _call(obj: Any, name: str, *args: Any, **kwargs: Any) -> _Call:
    return _Call(obj, name, args, kwargs)


def _sync(call: _Call) -> Any:
    return getattr(call.obj, call.name)(*call.args, **call.kwargs)


async def _async(call: _Call) -> Any:
    result = getattr(call.obj, "a" + call.name)(*call.args, **call.kwargs)
    if hasattr(result, "__aiter__"):  # `alist`: its items
        return [x async for x in result]
    return await result


# -- checkpointer threads ---------------------------------------------------------------------


def _checkpoint_count(unit: Unit, t: Tables, thread_ids: Sequence[str]) -> int:
    c = t.checkpoints.c
    total = 0
    for i in range(0, len(thread_ids), 500):
        part = c.thread_id.in_(thread_ids[i : i + 500])
        total += int(unit.execute(select(func.count()).where(part)).scalar() or 0)
    return total


def _find_threads(saver: SQLSaver, db: Database, user_id: str, keys: Sequence[str]) -> _Job[Any]:
    filters = user_filters(user_id, keys)
    if saver.searchable_metadata:
        found, opaque = yield _call(db, "run", threads_named, saver.tables, filters)
        return found, opaque
    # metadata only in the serializer's (encrypted) form: the saver decodes and matches it
    found = set()
    for f in filters:
        tuples = yield _call(saver, "list", None, filter=f)
        found.update(tp.config["configurable"]["thread_id"] for tp in tuples)
    return found, 0


def threads_of_user(
    saver: SQLSaver, user_id: IdLike, keys: Sequence[str] = THREAD_USER_KEYS
) -> set[str]:
    """The ids of the threads that are `user_id`'s by
    [`ownership`][langmem_sqlite.operations.ownership]'s rule (what
    [`forget_user`][langmem_sqlite.forget_user] deletes, but for `thread_ids`).

    Raises:
        ValueError, TypeError: `user_id` is not a valid id.
    """
    found, _ = drive(_find_threads(saver, saver.db, check_id(user_id, "user_id"), keys), _sync)
    return found  # type: ignore[no-any-return]


# -- store items --------------------------------------------------------------------------------


def _prefixes(user_id: str, templates: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    if isinstance(templates, str) or not isinstance(templates, Sequence):
        raise TypeError("store_prefixes: expected a sequence of namespace prefixes")
    out = []
    for template in templates:
        if isinstance(template, str) or not isinstance(template, Sequence) or not template:
            raise TypeError(
                f"store_prefixes: each prefix is a non-empty tuple of labels, got {template!r}"
            )
        labels = []
        for label in template:
            if not isinstance(label, str) or not label:
                raise ValueError(f"store_prefixes: labels are non-empty strings, got {label!r}")
            labels.append(label.replace(USER, user_id))
        out.append(tuple(labels))
    return out


def _items_under(store: SQLStore, prefix: tuple[str, ...]) -> _Job[list[SearchItem]]:
    items: list[SearchItem] = []
    while True:
        page = yield _call(store, "search", prefix, limit=_PAGE, offset=len(items))
        items.extend(page)
        if len(page) < _PAGE:
            return items


def _user_items(
    store: SQLStore, prefixes: list[tuple[str, ...]]
) -> _Job[dict[tuple[tuple[str, ...], str], SearchItem]]:
    found: dict[tuple[tuple[str, ...], str], SearchItem] = {}
    for prefix in prefixes:
        for item in (yield from _items_under(store, prefix)):
            found[(tuple(item.namespace), item.key)] = item
    return found


def _other_namespaces(
    store: SQLStore, user_id: str, prefixes: list[tuple[str, ...]]
) -> _Job[list[tuple[str, ...]]]:
    out: list[tuple[str, ...]] = []
    offset = 0
    while True:
        page = yield _call(store, "list_namespaces", limit=_PAGE, offset=offset)
        offset += len(page)
        for ns in page:
            ns = tuple(ns)
            if user_id in ns and not any(ns[: len(p)] == p for p in prefixes):
                out.append(ns)
        if len(page) < _PAGE:
            return out


# -- the operation ---------------------------------------------------------------------------


def _forget(
    db: Database,
    tables: Tables,
    saver: SQLSaver,
    store: SQLStore,
    user_id: str,
    dry_run: bool,
    prefixes: list[tuple[str, ...]],
    thread_ids: Sequence[str],
    thread_keys: Sequence[str],
    vacuum: bool,
) -> _Job[ForgetReport]:
    yield _call(db, "drive", schema_plan(db, tables))
    counts = yield _call(
        db, "run", sql.user_counts if dry_run else sql.delete_user, tables, user_id
    )
    sessions, messages, summaries = counts

    found, unreadable = yield from _find_threads(saver, db, user_id, thread_keys)
    threads = sorted(found | set(thread_ids))
    checkpoints = yield _call(db, "run", _checkpoint_count, tables, threads)
    if not dry_run:
        for tid in threads:
            yield _call(saver, "delete_thread", tid)

    items = yield from _user_items(store, prefixes)
    pending = {} if dry_run else dict(items)
    for _ in range(3):  # and what the user's running agent writes meanwhile
        if not pending:
            break
        keys = list(pending)
        for i in range(0, len(keys), _PAGE):
            yield _call(store, "batch", [PutOp(ns, key, None) for ns, key in keys[i : i + _PAGE]])
        pending = yield from _user_items(store, prefixes)
        items.update(pending)
    facts = sum(1 for ns, _ in items if len(ns) >= 2 and ns[-1] in _FACT_NAMESPACES)
    others = yield from _other_namespaces(store, user_id, prefixes)

    wal_emptied = None
    if not dry_run and db.rules.file_path(db.url) is not None:  # an embedded database's file
        # `own_transaction`: on a connection that commits as it goes, for `VACUUM`
        wal_emptied = yield _call(db, "run", scrub, vacuum, write=True, own_transaction=True)
    return ForgetReport(
        user_id=user_id,
        dry_run=dry_run,
        sessions=sessions,
        messages=messages,
        summaries=summaries,
        threads=len(threads),
        checkpoints=checkpoints,
        facts=facts,
        store_items=len(items) - facts,
        thread_ids=threads,
        namespaces=sorted({ns for ns, _ in items}),
        other_namespaces=others,
        unreadable_threads=unreadable,
        vacuumed=bool(wal_emptied is not None and vacuum),
        wal_emptied=wal_emptied,
    )


def _job(
    target: Memory | DatabaseLike | Database | None,
    user_id: IdLike,
    dry_run: bool,
    table_prefix: str,
    schema: str | None,
    store_prefixes: Sequence[Sequence[str]],
    thread_ids: Sequence[IdLike],
    thread_keys: Sequence[str],
    vacuum: bool,
    saver: SQLSaver | None,
    store: SQLStore | None,
) -> _Job[ForgetReport]:
    """`_forget` on the checked arguments and the resolved database, tables, saver and store."""
    from ..checkpoint import SQLSaver
    from ..defaults import default_connection
    from ..memory import Memory
    from ..store import SQLStore

    uid = check_id(user_id, "user_id")
    if isinstance(thread_ids, str) or not isinstance(thread_ids, Sequence):
        raise TypeError("thread_ids: expected a sequence of thread ids")
    tids = [check_id(t, "thread_ids") for t in thread_ids]
    if isinstance(thread_keys, str) or not all(isinstance(k, str) and k for k in thread_keys):
        raise TypeError("thread_keys: expected a sequence of non-empty metadata keys")
    prefixes = _prefixes(uid, store_prefixes)
    if isinstance(target, Memory):
        db, tables = target.db, get_tables(target.table_prefix, target.schema)
        saver = saver if saver is not None else target.checkpointer
    else:
        db = get_database(default_connection() if target is None else target)
        tables = get_tables(table_prefix, schema)
    if saver is None:
        saver = SQLSaver(db, table_prefix=tables.prefix, schema=tables.schema)
    if store is None:  # expired items too, and no TTL refreshed by the searches
        ttl: Any = {"omit_expired": False, "refresh_on_read": False}
        store = SQLStore(db, ttl=ttl, table_prefix=tables.prefix, schema=tables.schema)
    for part, name in ((saver, "saver"), (store, "store")):
        if part.db is not db or part.tables.key != tables.key:  # type: ignore[attr-defined]
            raise ValueError(f"{name}: must use the same database and tables")
    return _forget(
        db, tables, saver, store, uid, bool(dry_run), prefixes, tids, thread_keys, bool(vacuum)
    )


def forget_user(
    target: Memory | DatabaseLike | Database | None,
    user_id: IdLike,
    *,
    dry_run: bool = False,
    table_prefix: str = DEFAULT_PREFIX,
    schema: str | None = None,
    store_prefixes: Sequence[Sequence[str]] = DEFAULT_STORE_PREFIXES,
    thread_ids: Sequence[IdLike] = (),
    thread_keys: Sequence[str] = THREAD_USER_KEYS,
    vacuum: bool = True,
    saver: SQLSaver | None = None,
    store: SQLStore | None = None,
) -> ForgetReport:
    """Delete everything stored about `user_id`; return the counts per kind.

    Args:
        target: a [`Memory`][langmem_sqlite.Memory], a URL, a path, an engine or a
            [`Database`][langmem_sqlite.Database] (default: `$LANGMEM_SQLITE_URL` or
            `langmem.db`).
        user_id: the user (str, int or UUID, as given to the history and the facts).
        dry_run: count what would be deleted; delete nothing.
        table_prefix: the tables' prefix (ignored when `target` is a `Memory`).
        schema: the tables' PostgreSQL schema (ignored when `target` is a `Memory`).
        store_prefixes: store namespaces holding the user's items, with `"{user_id}"` for the
            user id (default: everything under `("users", user_id)`). Namespaces elsewhere
            that have the user id as a label are listed in the report, not deleted.
        thread_ids: more checkpointer threads of the user, deleted with those found by their
            metadata (see [`langmem_sqlite.operations.erasure`][langmem_sqlite.operations.erasure]).
        thread_keys: the metadata keys naming a thread's user.
        vacuum: SQLite: rewrite the file after deleting (`VACUUM`), so that no copy stays
            in free space, including copies left by earlier updates and deletes. It holds the
            write lock while it copies the live data (a large file: seconds; other writers
            wait up to their 30 s busy timeout) and needs that much free disk. With `False`,
            the sessions and messages are still overwritten as they are deleted and the WAL is
            emptied, but checkpoint and store rows, and older copies, may stay in free pages
            (and do on SQLite builds without `SQLITE_SECURE_DELETE`).
        saver: the application's [`SQLSaver`][langmem_sqlite.SQLSaver], to search threads with
            its serializer (an `EncryptedSerializer` keeps metadata out of JSON) and to clear
            its cache of the deleted threads.
        store: the [`SQLStore`][langmem_sqlite.SQLStore] to delete through (default: one on the
            same tables that also sees expired items).

    Raises:
        ValueError, TypeError: a bad argument (nothing is deleted).
    """
    return drive(_job(**locals()), _sync)


async def aforget_user(
    target: Memory | DatabaseLike | Database | None,
    user_id: IdLike,
    *,
    dry_run: bool = False,
    table_prefix: str = DEFAULT_PREFIX,
    schema: str | None = None,
    store_prefixes: Sequence[Sequence[str]] = DEFAULT_STORE_PREFIXES,
    thread_ids: Sequence[IdLike] = (),
    thread_keys: Sequence[str] = THREAD_USER_KEYS,
    vacuum: bool = True,
    saver: SQLSaver | None = None,
    store: SQLStore | None = None,
) -> ForgetReport:
    """Async [`forget_user`][langmem_sqlite.forget_user] (the same steps, on the async APIs)."""
    return await adrive(_job(**locals()), _async)
