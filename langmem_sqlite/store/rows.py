"""What every statement of the store shares: the items' columns, the rows they are read into,
the "not lapsed" and "under the prefix" conditions and the newest-first order.

Every storage function of the store takes a [`Unit`][langmem_sqlite.engine.Unit]
and the [`Tables`][langmem_sqlite.store.rows.Tables]; [`SQLStore`][langmem_sqlite.SQLStore]
runs them with [`Database.run`][langmem_sqlite.engine.Database.run] (sync) or
[`Database.arun`][langmem_sqlite.engine.Database.arun] (async). Statements built per set of tables
(and per shape of a search) are kept by
[`Unit.statement`][langmem_sqlite.engine.Unit.statement]. Times are microseconds since the
epoch.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from ..engine.schema import Tables
from . import namespaces
from .sealed import Sealer, plain_value

__all__ = ["CHUNK", "ItemRow"]

CHUNK = 500
"""Rows per statement for lists of ids or keys."""
_NEVER = 2**63 - 1  # an expiry time after every other (microseconds)


class ItemRow(NamedTuple):
    """A stored item as read (`ns` decoded; a named tuple: one is made per row read)."""

    id: int
    ns: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int
    ttl_us: int | None
    score: float | None = None


def item_columns(t: Tables) -> list[Any]:
    c = t.store_items.c
    return [c.id, c.ns, c.key, c.value, c.created_at, c.updated_at, c.ttl_us]


def item_row(row: Any, score: float | None = None, sealer: Sealer | None = None) -> ItemRow:
    value = row[3]
    if sealer is not None:
        value = sealer.open(row[1], row[2], value)
    elif isinstance(value, str):  # MariaDB hands JSON back as text on some drivers
        value = plain_value(row[2], value)
    return ItemRow(row[0], namespaces.decode(row[1]), row[2], value, row[4], row[5], row[6], score)


def not_lapsed(t: Tables, omit_expired: bool, or_form: bool = False) -> ColumnElement[bool]:
    """Not lapsed at the `now` parameter (`or_form`: the dialect's `store_expiry_as_or`).

    PostgreSQL's searches test `expires_at IS NULL OR expires_at > now`, which its planner
    estimates from the column's statistics (the share of items without a TTL); for a test of
    an expression it guesses a third, which makes a large filtered search sort the whole
    table instead of reading the newest items through the `(updated_at, id)` index. Its
    expiry index holds only items with a TTL (migration 6), so the `IS NULL` test cannot read
    the whole index either."""
    c = t.store_items.c
    if not omit_expired:
        return sa.true()
    if or_form:
        return sa.or_(c.expires_at.is_(None), c.expires_at > sa.bindparam("now", sa.BigInteger))
    # "NULL or later than now", written so that no planner ANDs the expiry index into a search
    # (which would read every entry of the index for "expires_at IS NULL")
    never = sa.literal(_NEVER, sa.BigInteger)
    return sa.func.coalesce(c.expires_at, never) > sa.bindparam("now", type_=sa.BigInteger)


def within_prefix(column: Any, prefix: tuple[str, ...]) -> ColumnElement[bool]:
    """Within the `lo`/`hi` parameters (see `search_params`), unless the prefix is empty."""
    if not prefix:
        return sa.true()
    return sa.and_(
        column >= sa.bindparam("lo", type_=column.type),
        column < sa.bindparam("hi", type_=column.type),
    )


def newest_first(t: Tables) -> tuple[Any, Any]:
    c = t.store_items.c
    return c.updated_at.desc(), c.id.desc()
