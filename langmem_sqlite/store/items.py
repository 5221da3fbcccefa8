"""The store's items in SQL: what differs between databases (`StoreSQL`), reads by key,
namespace listings, puts and deletes (with the vectors of indexed items), TTL refreshes and the
sweep. Times are microseconds since the epoch; namespaces are stored encoded (see `namespaces`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from ..engine.dialects import Rules
from ..engine.dialects.postgresql import jsonb_text
from ..engine.schema import Tables
from ..engine.unit import Unit
from . import namespaces
from .pgvector_schema import pgvector_rows, pgvector_table
from .sealed import Sealer, plain_value

CHUNK = 500
"""Rows per statement for lists of ids or keys."""
_NEVER = 2**63 - 1  # an expiry time after every other (microseconds)
_CHANGING = ("value", "updated_at", "ttl_us", "expires_at")


@dataclass(frozen=True)
class StoreSQL:
    """The store's rules for one kind of database.

    Attributes:
        json: how filters read JSON: `"jsonb"` (PostgreSQL), `"json1"` (SQLite) or
            `"json_value"` (MySQL's `JSON_VALUE`: a superset, re-checked in Python).
        expiry_as_or: "not lapsed" as `IS NULL OR >` rather than `COALESCE` (see
            `not_lapsed`).
    """

    json: str
    expiry_as_or: bool = False

    def value(self, bind: Any) -> Any:
        """A bound JSON text as the value column's value (PostgreSQL casts it to `jsonb`)."""
        return sa.cast(bind, postgresql.JSONB) if self.json == "jsonb" else bind

    def text(self, text: str) -> str:
        """JSON text as the value column stores it without changing a number."""
        return jsonb_text(text) if self.json == "jsonb" else text

    def number(self, value: int | float) -> int | float:
        """A filter's number, bound for comparison with a JSON number read in SQL."""
        if self.json == "jsonb":
            return value  # bound as jsonb
        if self.json == "json1" and type(value) is int and -(2**63) <= value < 2**63:
            return value  # SQLite reads integers beyond 64 bits as floats
        return float(value)


_POSTGRESQL = StoreSQL("jsonb", expiry_as_or=True)
_SQLITE = StoreSQL("json1")
_MYSQL = StoreSQL("json_value")


def store_sql(name: str) -> StoreSQL:
    """The rules for SQLAlchemy's dialect `name` (`"postgresql"`, `"sqlite"`, else MySQL's)."""
    return {"postgresql": _POSTGRESQL, "sqlite": _SQLITE}.get(name, _MYSQL)


class ItemRow(NamedTuple):
    """A stored item as read (`ns` decoded)."""

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
    """Not lapsed at the `now` parameter. `or_form` (PostgreSQL, whose expiry index holds only
    items with a TTL): `IS NULL OR >`; elsewhere `COALESCE` keeps planners from ANDing the
    expiry index into a search."""
    c = t.store_items.c
    if not omit_expired:
        return sa.true()
    now = sa.bindparam("now", type_=sa.BigInteger)
    if or_form:
        return sa.or_(c.expires_at.is_(None), c.expires_at > now)
    return sa.func.coalesce(c.expires_at, sa.literal(_NEVER, sa.BigInteger)) > now


def within_prefix(column: Any, prefix: tuple[str, ...]) -> ColumnElement[bool]:
    """Within the `lo`/`hi` parameters (`namespaces.prefix_range`), unless no prefix."""
    if not prefix:
        return sa.true()
    return sa.and_(
        column >= sa.bindparam("lo", type_=column.type),
        column < sa.bindparam("hi", type_=column.type),
    )


def newest_first(t: Tables) -> tuple[Any, Any]:
    c = t.store_items.c
    return c.updated_at.desc(), c.id.desc()


def _by_namespace(pairs: Sequence[tuple[str, str]]) -> Iterator[dict[str, Any]]:
    """The parameters `ns` and `keys` (at most `CHUNK`) of the `(ns, key)` pairs."""
    grouped: dict[str, list[str]] = {}
    for ns, key in pairs:
        grouped.setdefault(ns, []).append(key)
    for ns, keys in grouped.items():
        for i in range(0, len(keys), CHUNK):
            yield {"ns": ns, "keys": keys[i : i + CHUNK]}


def _at_keys(t: Tables) -> list[ColumnElement[bool]]:
    """The items of the `ns` parameter whose key is in the `keys` parameter."""
    c = t.store_items.c
    return [
        c.ns == sa.bindparam("ns", type_=c.ns.type),
        c.key.in_(sa.bindparam("keys", expanding=True)),
    ]


class ItemStatements:
    """The statements on one store's items by key, built on first use (values bound per call)."""

    def __init__(self, t: Tables, rules: Rules, omit_expired: bool) -> None:
        self.t = t
        self.rules = rules
        self.omit_expired = omit_expired
        self.sql = store_sql(rules.name)

    @cached_property
    def get(self) -> Any:
        """The live items of `ns` and `keys`."""
        t = self.t
        return sa.select(*item_columns(t)).where(*_at_keys(t), not_lapsed(t, self.omit_expired))

    @cached_property
    def get_one(self) -> Any:
        """The live item at `ns` and `key` (an `IN` list would be rendered per execution)."""
        t = self.t
        c = t.store_items.c
        at = c.ns == sa.bindparam("ns", type_=c.ns.type), c.key == sa.bindparam("key")
        return sa.select(*item_columns(t)).where(*at, not_lapsed(t, self.omit_expired))

    @cached_property
    def ids(self) -> Any:
        """`(id, ns, key)` of the items of `ns` and `keys`."""
        c = self.t.store_items.c
        return sa.select(c.id, c.ns, c.key).where(*_at_keys(self.t))

    @cached_property
    def delete(self) -> Any:
        """Delete the items of `ns` and `keys`."""
        return sa.delete(self.t.store_items).where(*_at_keys(self.t))

    @cached_property
    def upsert(self) -> Any:
        """Insert or replace an item by `(ns, key)` (inline: no RETURNING of the new id)."""
        upsert = self.rules.upsert(self.t.store_items, _CHANGING, ("ns", "key")).inline()
        return upsert.values(value=self.sql.value(sa.bindparam("value", type_=sa.Text)))

    @cached_property
    def refresh(self) -> Any:
        """Restart the TTL of the items `ids` (those that have one) from `now`."""
        c = self.t.store_items.c
        return (
            sa.update(self.t.store_items)
            .where(c.id.in_(sa.bindparam("ids", expanding=True)), c.ttl_us.is_not(None))
            .values(expires_at=c.ttl_us + sa.bindparam("now", type_=sa.BigInteger))
        )


def get_items(
    unit: Unit,
    s: ItemStatements,
    pairs: Sequence[tuple[str, str]],
    now: int,
    sealer: Sealer | None = None,
) -> dict[tuple[str, str], ItemRow]:
    """The live items at `(encoded ns, key)` pairs, keyed by that pair."""
    out: dict[tuple[str, str], ItemRow] = {}
    for params in _by_namespace(list(dict.fromkeys(pairs))):
        if len(params["keys"]) == 1:
            found = unit.execute(
                s.get_one, {"ns": params["ns"], "key": params["keys"][0], "now": now}
            )
        else:
            found = unit.execute(s.get, {**params, "now": now})
        for row in found:
            out[(row[1], row[2])] = item_row(row, None, sealer)
    return out


def list_namespaces(
    unit: Unit, t: Tables, prefix: tuple[str, ...], now: int, omit_expired: bool
) -> list[tuple[str, ...]]:
    """Distinct namespaces holding a live item, under `prefix`, in tuple order."""
    c = t.store_items.c
    stmt = (
        sa.select(c.ns)
        .where(within_prefix(c.ns, prefix), not_lapsed(t, omit_expired))
        .group_by(c.ns)
        .order_by(c.ns)
    )
    params: dict[str, Any] = {"now": now}
    bounds = namespaces.prefix_range(prefix)
    if bounds is not None:
        params["lo"], params["hi"] = bounds
    return [namespaces.decode(ns) for ns in unit.execute(stmt, params).scalars()]


class Put(NamedTuple):
    """One validated write (`ns` encoded; `value=None` deletes)."""

    ns: str
    key: str
    value: dict[str, Any] | None
    ttl_us: int | None
    text: str | None
    """The value's JSON text as stored (sealed with a cipher)."""
    texts: tuple[tuple[str, str], ...] = ()
    """`(field, text)` pairs to embed."""
    vectors: tuple[tuple[str, bytes, float], ...] = ()
    """`(field, unit vector as float32 bytes, its length)` of each embedded text."""


def refresh_ttl(unit: Unit, s: ItemStatements, ids: Sequence[int], now: int) -> None:
    """Restart the TTL of the items `ids` (those that have one) from `now`."""
    for i in range(0, len(ids), CHUNK):
        unit.execute(s.refresh, {"ids": list(ids[i : i + CHUNK]), "now": now})


def apply_puts(
    unit: Unit,
    s: ItemStatements,
    rows: Sequence[Put],
    now: int,
    index: bool,
    pgvector: bool,
    sealer: Sealer | None = None,
) -> None:
    """Apply writes (one per `(ns, key)`); with `index`, replace the written items' vectors."""
    for params in _by_namespace([(r.ns, r.key) for r in rows if r.value is None]):
        unit.execute(s.delete, params)
    puts = [r for r in rows if r.value is not None]
    if not puts:
        return
    unit.execute(
        s.upsert,
        [
            {
                "ns": r.ns,
                "key": r.key,
                "value": s.sql.text(r.text),  # type: ignore[arg-type]
                "created_at": now,
                "updated_at": now,
                "ttl_us": r.ttl_us,
                "expires_at": None if r.ttl_us is None else now + r.ttl_us,
            }
            for r in puts
        ],
    )
    if index:
        _replace_vectors(unit, s, puts, pgvector, sealer)


def _replace_vectors(
    unit: Unit, s: ItemStatements, puts: list[Put], pgvector: bool, sealer: Sealer | None
) -> None:
    t = s.t
    ids: dict[tuple[str, str], int] = {}
    for params in _by_namespace([(r.ns, r.key) for r in puts]):
        ids.update({(ns, key): item_id for item_id, ns, key in unit.execute(s.ids, params)})
    targets = [t.store_vectors, *([pgvector_table(t)] if pgvector else [])]
    id_list = list(ids.values())
    for table in targets:
        stmt = sa.delete(table).where(table.c.item_id.in_(sa.bindparam("ids", expanding=True)))
        for i in range(0, len(id_list), CHUNK):
            unit.execute(stmt, {"ids": id_list[i : i + CHUNK]})
    vectors: list[dict[str, Any]] = [
        {"item_id": ids[(r.ns, r.key)], "field": f, "ns": r.ns, "embedding": blob, "norm": norm}
        for r in puts
        for f, blob, norm in r.vectors
    ]
    if not vectors:
        return
    if pgvector:
        unit.execute(sa.insert(pgvector_table(t)), pgvector_rows(vectors))
    if sealer is not None:
        for v in vectors:
            v["embedding"] = sealer.seal_vector(v["ns"], v["item_id"], v["field"], v["embedding"])
    unit.execute(sa.insert(t.store_vectors), vectors)


def sweep_expired(conn: Connection, t: Tables, now: int) -> int:
    """Delete items whose TTL lapsed (their vectors go with them); return how many."""
    c = t.store_items.c
    result = conn.execute(
        sa.delete(t.store_items).where(c.expires_at.is_not(None), c.expires_at <= now)
    )
    return int(result.rowcount or 0)
