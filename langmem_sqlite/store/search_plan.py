"""How the store's searches without a vector query are planned and run: newest first, by
namespace prefix and filter, the database's planner steered where it needs it (PostgreSQL's
custom plans for large stores; SQLite's newest-first reads of one namespace or of the whole
store, see `search_items`), and pages re-checked in Python where the filter is not
exact in SQL."""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import UnaryExpression

from ..engine.schema import Tables
from ..engine.session import Session
from . import namespaces
from .filter_sql import SearchQuery, _params, _shape, _where
from .filters import matches
from .rows import ItemRow, _columns, _item, _ordered, _strictly_under, _under

__all__ = ["BROAD_PREFIX", "LARGE_ITEMS_TABLE", "PlanMode", "search_items", "search_now"]


def _paged(
    conn: Session,
    key: Hashable,
    stmt: Any,
    params: dict[str, Any],
    q: SearchQuery,
    want: int,
    exact: bool,
) -> list[ItemRow]:
    """The first `want` rows of an ordered select (kept under `key`) that match
    `q.filter`: one query when the SQL is exact, else pages re-checked in Python."""
    if want <= 0:
        return []
    paged = conn.statement(
        ("paged", key), lambda: stmt.limit(sa.bindparam("lim")).offset(sa.bindparam("off"))
    )
    if exact:
        return [
            _item(r, None, q.sealer) for r in conn.execute(paged, {**params, "lim": want, "off": 0})
        ]
    kept: list[ItemRow] = []
    start, size = 0, max(want, 100)
    while len(kept) < want:
        rows = conn.execute(paged, {**params, "lim": size, "off": start}).all()
        found = (_item(r, None, q.sealer) for r in rows)
        kept.extend(item for item in found if matches(item.value, q.filter))
        if len(rows) < size:
            break
        start, size = start + size, size * 2
    return kept[:want]


@dataclass
class PlanMode:
    """A store's planning choices for its searches, re-checked every minute.

    `custom`: PostgreSQL plans each search for its actual values (once the items table is
    large). `broad`: per namespace prefix, whether its sub-namespaces hold at least
    `BROAD_PREFIX` items (SQLite then reads the store newest first, see
    `search_items`); under `()`, whether the store does."""

    custom: bool = True
    checked: float = -math.inf
    rows: float = -1.0
    """PostgreSQL: the planner's estimate of the items table's rows (-1: not known yet)."""
    broad: dict[tuple[str, ...], tuple[bool, float]] = field(default_factory=dict)
    exact: dict[tuple[Any, ...], tuple[bool, float]] = field(default_factory=dict)
    """pgvector with HNSW, per prefix, filter shape and number of items wanted: whether a
    search ranks exactly without the index (its prefix is too narrow for it, or its scan ran
    dry), and since when (see `_pg_top`)."""


LARGE_ITEMS_TABLE = 4 << 20  # bytes: about 25,000 small items
_RECHECK_S = 60.0


def use_custom_plans(conn: Session, t: Tables, mode: PlanMode) -> None:
    """PostgreSQL: let large stores' searches be planned for their actual values.

    psycopg prepares statements run often; PostgreSQL then may switch to a generic plan, which
    cannot see how much of the table a namespace prefix or a filter selects, and so is slow on
    a large store. On a small table the generic plan is as good and saves the planning. So
    custom plans are forced once the items table holds `LARGE_ITEMS_TABLE` bytes. No-op
    elsewhere.
    """
    if not conn.rules.store_custom_plans:
        return
    clock = time.monotonic()
    if clock - mode.checked > _RECHECK_S:
        name = conn.connection.dialect.identifier_preparer.format_table(t.store_items)
        size, rows = conn.execute(_TABLE_STATS, {"name": name}).first() or (0, -1.0)
        mode.custom, mode.checked = (size or 0) >= LARGE_ITEMS_TABLE, clock
        mode.rows = float(rows)
    if not conn.rules.prepares_statements(conn.connection.connection.dbapi_connection):
        return  # no prepared statements (a transaction pooler): every plan is a custom one
    if conn.in_transaction:
        if mode.custom:
            conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
        return
    # A read in autocommit mode on a direct connection (it prepares statements: no pooler):
    # the setting stays with the connection; set it when it changes (its pool record remembers).
    _set_on_connection(conn, "plan_cache_mode", "force_custom_plan" if mode.custom else "auto")


_SET_CONFIG = sa.select(sa.func.set_config(sa.bindparam("name"), sa.bindparam("value"), False))
_SET_LOCAL = sa.select(sa.func.set_config(sa.bindparam("name"), sa.bindparam("value"), True))
_DEFAULTS = {"plan_cache_mode": "auto"}


def _set_on_connection(conn: Session, name: str, value: str) -> None:
    """Set a PostgreSQL setting for the session of this pooled connection, unless it already
    has `value`: its pool record remembers what was set (else the server's default)."""
    info = conn.connection.info
    key = f"langmem_setting_{name}"
    if info.get(key, _DEFAULTS[name]) != value:
        conn.execute(_SET_CONFIG, {"name": name, "value": value})
        info[key] = value


_pg_class = sa.table("pg_class", sa.column("oid"), sa.column("reltuples"))
_TABLE_STATS = sa.select(sa.func.pg_relation_size(_pg_class.c.oid), _pg_class.c.reltuples).where(
    _pg_class.c.oid == sa.func.to_regclass(sa.bindparam("name"))
)


def search_now(conn: Session, t: Tables, q: SearchQuery, now: int, mode: PlanMode) -> list[ItemRow]:
    """`search_items` as a transaction of its own (plans as `mode` says)."""
    use_custom_plans(conn, t, mode)
    return search_items(conn, t, q, now, mode)


BROAD_PREFIX = 2000  # items: a prefix holding this many is read newest first on SQLite


def _broad(conn: Session, t: Tables, q: SearchQuery, mode: PlanMode) -> bool:
    """Whether SQLite should read `q.prefix` newest first: its sub-namespaces hold at least
    `BROAD_PREFIX` items (live or not; counted through the namespace index up to that
    many; the prefix's own namespace is read newest first either way) and it holds half of the
    newest items (`_dense`). Remembered for a minute per prefix; no prefix is broad in a
    store holding fewer items (checked once a minute, no count per prefix then)."""
    clock = time.monotonic()
    store = mode.broad.get(())
    if store is None or clock - store[1] >= _RECHECK_S:
        store = mode.broad[()] = (_count_under(conn, t, ()) >= BROAD_PREFIX, clock)
    if not store[0]:
        return False
    known = mode.broad.get(q.prefix)
    if known is None or clock - known[1] >= _RECHECK_S:
        if len(mode.broad) >= 1024:
            mode.broad.clear()
            mode.broad[()] = store
        broad = _count_under(conn, t, q.prefix) >= BROAD_PREFIX and _dense(conn, t, q.prefix)
        known = mode.broad[q.prefix] = (broad, clock)
    return known[0]


_SAMPLE = 1000


def _dense(conn: Session, t: Tables, prefix: tuple[str, ...]) -> bool:
    """Whether at least half of the store's newest `_SAMPLE` items are under `prefix`:
    reading newest first then finds the prefix's items at least half as often as reading the
    prefix's own (for a big prefix in a far bigger store it would not: the namespace index then
    reads only the prefix's items)."""
    c = t.store_items.c

    def build() -> Any:
        newest = sa.select(c.ns).order_by(*_ordered(t)).limit(_SAMPLE).subquery()
        under = sa.case((_under(newest.c.ns, prefix), 1), else_=0)
        return sa.select(sa.func.count(), sa.func.sum(under))

    stmt = conn.statement(("dense", t.key), build)
    lo, hi = namespaces.prefix_range(prefix)  # type: ignore[misc]
    sampled, under = conn.execute(stmt, {"lo": lo, "hi": hi}).one()
    return 2 * int(under or 0) >= int(sampled)


def _count_under(conn: Session, t: Tables, prefix: tuple[str, ...]) -> int:
    """Items in the sub-namespaces of `prefix` (all items for `()`), up to BROAD_PREFIX."""
    c = t.store_items.c
    stmt = conn.statement(
        ("count_under", t.key, bool(prefix)),
        lambda: sa.select(sa.func.count()).select_from(
            sa.select(c.id)
            .where(*_strictly_under(c.ns, prefix))
            .limit(sa.bindparam("n"))
            .subquery()
        ),
    )
    params: dict[str, Any] = {"n": BROAD_PREFIX}
    if prefix:
        params["lo"], params["hi"] = namespaces.prefix_range(prefix)  # type: ignore[misc]
    return int(conn.execute(stmt, params).scalar() or 0)


def _no_index(column: Any) -> Any:
    """SQLite's `+column`: the same value and collation, but no index is chosen for it."""
    return UnaryExpression(column, operator=operators.custom_op("+"), type_=column.type)


def search_items(
    conn: Session, t: Tables, q: SearchQuery, now: int, mode: PlanMode | None = None
) -> list[ItemRow]:
    """Items under `q.prefix` matching `q.filter`, most recently updated first.

    On SQLite, a prefix holding few items is read through the `(ns, updated_at, id)` index
    (`_newest_under`); a broad one (`mode` says) is read newest first through the
    `(updated_at, id)` index, stopping at `offset + limit` matches, instead of reading and
    sorting every item under it. (Either way each row read is looked up in the table, so when
    the filter matches almost nothing both read everything.)"""
    apart = conn.rules.store_newest_per_namespace
    broad = apart and bool(q.prefix) and mode is not None and _broad(conn, t, q, mode)

    def build() -> tuple[Any, bool]:
        where, exact = _where(conn, t, q)
        if exact and q.prefix and apart:
            if not broad:
                return _newest_under(t, where[1:]), exact
            where[0] = _under(_no_index(t.store_items.c.ns), q.prefix)
        stmt = sa.select(*_columns(t)).where(*where).order_by(*_ordered(t))
        if exact:
            stmt = stmt.limit(sa.bindparam("lim")).offset(sa.bindparam("off"))
        return stmt, exact

    key = (*_shape(t, q, "search"), broad)
    stmt, exact = conn.statement(key, build)
    params = _params(conn.rules, q, now)
    if exact:
        page = {"lim": q.limit, "off": q.offset, "want": q.limit + q.offset}
        return [_item(r, None, q.sealer) for r in conn.execute(stmt, {**params, **page})]
    return _paged(conn, key, stmt, params, q, q.offset + q.limit, exact)[q.offset :]


def _newest_under(t: Tables, conditions: list[Any]) -> Any:
    """The `lim` newest items (after `off`) under the `lo`/`hi` prefix matching
    `conditions`: the items of the prefix's own namespace and those of its sub-namespaces,
    each part newest first and cut at `want` = `off + lim`, then merged.

    On SQLite, the first part walks the `(ns, updated_at, id)` index of one namespace from its
    newest item and stops after `want` matches, instead of reading and sorting every item of
    the namespace.
    """
    c = t.store_items.c

    def newest(*where: Any) -> Any:
        part = sa.select(*_columns(t)).where(*where, *conditions).order_by(*_ordered(t))
        return sa.select(*part.limit(sa.bindparam("want")).subquery().c)

    lo, hi = sa.bindparam("lo", type_=c.ns.type), sa.bindparam("hi", type_=c.ns.type)
    both = sa.union_all(newest(c.ns == lo), newest(c.ns > lo, c.ns < hi)).subquery()
    return (
        sa.select(*both.c)
        .order_by(both.c.updated_at.desc(), both.c.id.desc())
        .limit(sa.bindparam("lim"))
        .offset(sa.bindparam("off"))
    )
