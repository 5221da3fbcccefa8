"""The store's searches without a vector query: newest first, by namespace prefix and filter,
with pages re-checked in Python where the filter is not exact in SQL."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import sqlalchemy as sa

from ..engine.schema import Tables
from ..engine.unit import Unit
from .filter_sql import SearchQuery, search_params, search_where, statement_key
from .filters import matches
from .rows import ItemRow, item_columns, item_row, newest_first

__all__ = ["search_items"]


def matching_pages(
    unit: Unit,
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
    paged = unit.statement(
        ("paged", key), lambda: stmt.limit(sa.bindparam("lim")).offset(sa.bindparam("off"))
    )
    if exact:
        return [
            item_row(r, None, q.sealer)
            for r in unit.execute(paged, {**params, "lim": want, "off": 0})
        ]
    kept: list[ItemRow] = []
    start, size = 0, max(want, 100)
    while len(kept) < want:
        rows = unit.execute(paged, {**params, "lim": size, "off": start}).all()
        found = (item_row(r, None, q.sealer) for r in rows)
        kept.extend(item for item in found if matches(item.value, q.filter))
        if len(rows) < size:
            break
        start, size = start + size, size * 2
    return kept[:want]


def search_items(unit: Unit, t: Tables, q: SearchQuery, now: int) -> list[ItemRow]:
    """Items under `q.prefix` matching `q.filter`, most recently updated first.

    Where the dialect reads each namespace newest first (SQLite) and the filter is exact in
    SQL, a prefix is read through the `(ns, updated_at, id)` index (`_newest_under`), which
    stops at `offset + limit` matches instead of reading and sorting every item under it."""

    def build() -> tuple[Any, bool]:
        where, exact = search_where(unit, t, q)
        if exact and q.prefix and unit.rules.store_newest_per_namespace:
            return _newest_under(t, where[1:]), exact
        stmt = sa.select(*item_columns(t)).where(*where).order_by(*newest_first(t))
        if exact:
            stmt = stmt.limit(sa.bindparam("lim")).offset(sa.bindparam("off"))
        return stmt, exact

    key = statement_key(t, q, "search")
    stmt, exact = unit.statement(key, build)
    params = search_params(unit.rules, q, now)
    if exact:
        page = {"lim": q.limit, "off": q.offset, "want": q.limit + q.offset}
        return [item_row(r, None, q.sealer) for r in unit.execute(stmt, {**params, **page})]
    return matching_pages(unit, key, stmt, params, q, q.offset + q.limit, exact)[q.offset :]


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
        part = sa.select(*item_columns(t)).where(*where, *conditions).order_by(*newest_first(t))
        return sa.select(*part.limit(sa.bindparam("want")).subquery().c)

    lo, hi = sa.bindparam("lo", type_=c.ns.type), sa.bindparam("hi", type_=c.ns.type)
    both = sa.union_all(newest(c.ns == lo), newest(c.ns > lo, c.ns < hi)).subquery()
    return (
        sa.select(*both.c)
        .order_by(both.c.updated_at.desc(), both.c.id.desc())
        .limit(sa.bindparam("lim"))
        .offset(sa.bindparam("off"))
    )
