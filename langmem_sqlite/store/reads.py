"""Reading items by key, and the namespaces that hold live items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ..engine.schema import Tables
from ..engine.unit import Unit
from . import namespaces
from .rows import CHUNK, ItemRow, item_columns, item_row, not_lapsed, within_prefix
from .sealed import Sealer

__all__ = ["get_item", "get_items", "list_namespaces"]

_PAIR = ("ns", "key")
"""The columns of an item's key (see `Rules.at_pairs`)."""


def _get_one_stmt(unit: Unit, t: Tables, omit_expired: bool) -> Any:
    """One item by (ns, key) (built once per tables: the hot path)."""
    c = t.store_items.c

    def build() -> Any:
        return sa.select(*item_columns(t)).where(
            c.ns == sa.bindparam("ns", type_=c.ns.type),
            c.key == sa.bindparam("key", type_=c.key.type),
            not_lapsed(t, omit_expired),
        )

    return unit.statement(("get", t.key, omit_expired), build)


def get_item(
    unit: Unit,
    t: Tables,
    ns: str,
    key: str,
    now: int,
    omit_expired: bool,
    sealer: Sealer | None = None,
) -> ItemRow | None:
    """The live item at `(encoded ns, key)`, if any."""
    params = {"ns": ns, "key": key, "now": now}
    row = unit.execute(_get_one_stmt(unit, t, omit_expired), params).first()
    return item_row(row, None, sealer) if row is not None else None


def get_items(
    unit: Unit,
    t: Tables,
    keys: Sequence[tuple[str, str]],
    now: int,
    omit_expired: bool,
    sealer: Sealer | None = None,
) -> dict[tuple[str, str], ItemRow]:
    """The live items at `(encoded ns, key)` pairs, keyed by that pair (looked up through
    the `(ns, key)` index: see the dialect's `at_pairs`)."""
    out: dict[tuple[str, str], ItemRow] = {}
    unique = list(dict.fromkeys(keys))
    if len(unique) == 1:
        one = get_item(unit, t, *unique[0], now, omit_expired, sealer)
        return {unique[0]: one} if one is not None else {}
    rules = unit.rules
    stmt = unit.statement(
        ("get_many", t.key, omit_expired),
        lambda: sa.select(*item_columns(t)).where(
            rules.at_pairs(t.store_items, _PAIR), not_lapsed(t, omit_expired)
        ),
    )
    for i in range(0, len(unique), CHUNK):
        params = {**rules.pairs_params(unique[i : i + CHUNK]), "now": now}
        rows: Sequence[Any] = unit.execute(stmt, params).all()
        for row in rows:
            out[(row[1], row[2])] = item_row(row, None, sealer)
    return out


def list_namespaces(
    unit: Unit, t: Tables, prefix: tuple[str, ...], now: int, omit_expired: bool
) -> list[tuple[str, ...]]:
    """Distinct namespaces holding a live item, under `prefix`, in tuple order."""
    c = t.store_items.c
    stmt = unit.statement(
        ("namespaces", t.key, bool(prefix), omit_expired),
        lambda: (
            sa.select(c.ns)
            .where(within_prefix(c.ns, prefix), not_lapsed(t, omit_expired))
            .group_by(c.ns)
            .order_by(c.ns)
        ),
    )
    params: dict[str, Any] = {"now": now}
    bounds = namespaces.prefix_range(prefix)
    if bounds is not None:
        params["lo"], params["hi"] = bounds
    return [namespaces.decode(ns) for ns in unit.execute(stmt, params).scalars()]
