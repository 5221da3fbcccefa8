"""The SQL of the long-term store: items, their vectors, TTL.

Every function takes a sync :class:`~sqlalchemy.engine.Connection` already inside a transaction
and the :class:`~langmem_sqlite.engine.schema.Tables`; :class:`~langmem_sqlite.store.SQLStore` runs them
with :meth:`Database.run` (sync) or :meth:`Database.arun` (async). Times are microseconds since
the epoch.

Search filters go to SQL where the database can evaluate them without losing a match
(:func:`prefilter`). :func:`.filters.matches` defines the result: when the SQL is exactly the
filter, LIMIT/OFFSET run in the database; otherwise candidates are read page by page and
re-checked until ``offset + limit`` matched. Statements are cached by the shape of the search.
Vector search ranks the (unit-length) vectors under the prefix exactly: with numpy after reading
them, or in the database with pgvector (inner products, grouped per item, cut at ``offset +
limit`` when the filter is exact in SQL); then it reads only the best items. Both give the same
items and scores (to float32 rounding).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import ColumnElement, UnaryExpression
from sqlalchemy.types import UserDefinedType

from ..engine.dialects.postgresql import jsonb_text
from ..engine.schema import NamespacePath, Tables
from ..engine.session import Session
from . import namespaces
from .filters import is_finite_json, is_operator_dict, matches
from .sealed import Sealer, plain_value
from .vectors import ANN, from_blob, rank_max_pool

logger = logging.getLogger(__name__)

__all__ = [
    "ItemRow",
    "PlanMode",
    "PutRow",
    "SearchQuery",
    "apply_puts",
    "enable_pgvector",
    "get_item",
    "get_items",
    "list_namespaces",
    "prefilter",
    "refresh_ttl",
    "search_items",
    "sweep_expired",
    "upgrade_pgvector",
    "use_custom_plans",
    "vector_search",
]

T = TypeVar("T")

CHUNK = 500
"""Rows per statement for lists of ids or keys."""
_NEVER = 2**63 - 1  # an expiry time after every other (microseconds)


class ItemRow(NamedTuple):
    """A stored item as read (``ns`` decoded; a named tuple: one is made per row read)."""

    id: int
    ns: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int
    ttl_us: int | None
    score: float | None = None


@dataclass(frozen=True)
class PutRow:
    """One write: ``value=None`` deletes. ``vectors`` are ``(field, unit vector as float32
    bytes, its length before scaling)``."""

    ns: str
    key: str
    value: dict[str, Any] | None
    ttl_us: int | None
    vectors: tuple[tuple[str, bytes, float | None], ...] = ()
    text: str | None = None
    """The value's JSON text, when the caller has it (stored as is outside PostgreSQL)."""


@dataclass(frozen=True)
class SearchQuery:
    """A validated search."""

    prefix: tuple[str, ...]
    filter: dict[str, Any] | None
    limit: int
    offset: int
    omit_expired: bool
    sealer: Sealer | None = field(default=None, compare=False)
    """The store's cipher, if its values are encrypted (filters then run in Python)."""
    leaves: tuple[tuple[tuple[str, ...], str, Any], ...] = field(init=False, compare=False)
    """``(path, op, operand)`` of each leaf condition of the filter."""
    shape: tuple[Any, ...] = field(init=False, compare=False)
    """What of the filter shapes the SQL (paths, operators, kinds of values)."""

    def __post_init__(self) -> None:
        leaves = tuple(_conditions(self.filter or {}))
        object.__setattr__(self, "leaves", leaves)
        object.__setattr__(self, "shape", tuple((p, op, _kind(v)) for p, op, v in leaves))


def _columns(t: Tables) -> list[Any]:
    c = t.store_items.c
    return [c.id, c.ns, c.key, c.value, c.created_at, c.updated_at, c.ttl_us]


def _item(row: Any, score: float | None = None, sealer: Sealer | None = None) -> ItemRow:
    value = row[3]
    if sealer is not None:
        value = sealer.open(row[1], row[2], value)
    elif isinstance(value, str):  # MariaDB hands JSON back as text on some drivers
        value = plain_value(row[2], value)
    return ItemRow(row[0], namespaces.decode(row[1]), row[2], value, row[4], row[5], row[6], score)


def _live(t: Tables, omit_expired: bool, dialect: str = "") -> ColumnElement[bool]:
    """Not lapsed at the ``now`` parameter.

    PostgreSQL's searches test ``expires_at IS NULL OR expires_at > now``, which its planner
    estimates from the column's statistics (the share of items without a TTL), where it takes
    a third for a test of an expression: that third made a whole-store filtered search at
    100,000 items sort the whole table (21 ms) instead of reading the newest items through the
    ``(updated_at, id)`` index until it had enough (0.6 ms). Its expiry index holds only items
    with a TTL (migration 6), so the ``IS NULL`` test cannot read the whole index either."""
    c = t.store_items.c
    if not omit_expired:
        return sa.true()
    if dialect == "postgresql":
        return sa.or_(c.expires_at.is_(None), c.expires_at > sa.bindparam("now", sa.BigInteger))
    # "NULL or later than now", written so that no planner ANDs the expiry index into a search
    # (PostgreSQL did, reading every entry of the index for "expires_at IS NULL": 1.7 of 2.8 ms
    # of a one-user search at 100,000 items)
    never = sa.literal(_NEVER, sa.BigInteger)
    return sa.func.coalesce(c.expires_at, never) > sa.bindparam("now", type_=sa.BigInteger)


def _under(column: Any, prefix: tuple[str, ...]) -> ColumnElement[bool]:
    """Within the ``lo``/``hi`` parameters (see :func:`_params`), unless the prefix is empty."""
    if not prefix:
        return sa.true()
    return sa.and_(
        column >= sa.bindparam("lo", type_=column.type),
        column < sa.bindparam("hi", type_=column.type),
    )


# -- filters pushed into SQL --------------------------------------------------------------------
#
# Each leaf condition becomes a SQL condition that never rejects an item filters.matches
# accepts, and is flagged exact when it also never accepts one that matches() rejects. When the
# whole filter is exact, LIMIT/OFFSET go to the database; otherwise candidates are re-checked.
# Statements are cached by the filter's shape (fields, operators, kinds of values); the values
# are bound parameters ``f0``, ``f1``...


def _conditions(filter: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[Any]:
    """``(path, op, operand)`` for each leaf condition of a validated filter."""
    for name, cond in filter.items():
        here = (*path, name)
        if is_operator_dict(cond):
            for op, operand in cond.items():
                yield here, op, operand
        elif isinstance(cond, dict):
            yield from _conditions(cond, here) if cond else [(here, "$object", None)]
        else:
            yield here, "$eq", cond


_SQL_OP = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
#: for approximate (floating point) comparisons: never drop a boundary value
_LOOSE_OP = {"$eq": "=", "$gt": ">=", "$gte": ">=", "$lt": "<=", "$lte": "<="}
_RANGES = ("$gt", "$gte", "$lt", "$lte")

Pushed = tuple[Any, bool]
"""A SQL condition (or None: nothing pushed) and whether it is exact."""

_EXACT = 2**53
"""Numbers from this size on are compared loosely in SQL and re-checked in Python: beyond it
integers and floats no longer meet one for one (a float is stored as its shortest spelling, so
``float(2**70)``, exactly 1180591620717411303424, is stored as 1180591620717411300000.0)."""


def _kind(v: Any) -> Any:
    """The part of a filter value that shapes the SQL (the rest is a bound parameter)."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str) and v.startswith(("[", "{")):
        return "jsonish str"
    if isinstance(v, int) and abs(v) >= _EXACT:
        return "bigint"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if abs(v) >= _EXACT:
            return "bigfloat"
    if isinstance(v, str | int | float):
        return type(v).__name__
    return "json" if is_finite_json(v) else "nonfinite json"


_BIG = ("bigint", "bigfloat")


def _big_params(op: str, v: int | float) -> tuple[int, int]:
    """PostgreSQL's two parameters for a number of a :data:`_BIG` kind: for ``$eq`` its exact
    value and its nearest float (stored as that float's spelling); for a range, a bound two
    floats wider than ``v`` (no stored number on the right side of ``v`` lies beyond it)."""
    exact = int(v)
    try:
        near = float(v)
    except OverflowError:  # beyond every float: only integers can be near it
        return exact, exact
    if op == "$eq":
        return exact, near  # type: ignore[return-value]
    toward = -math.inf if op in ("$gt", "$gte") else math.inf
    bound = int(math.nextafter(math.nextafter(near, toward), toward))
    return (min(bound, exact), 0) if toward < 0 else (max(bound, exact), 0)


_SCALARS = ("str", "jsonish str", "int", "float", "bigint", "bigfloat")
_NONFINITE = ("nan", "inf", "-inf")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _nonfinite(op: str, kind: str) -> Pushed:
    """A NaN or infinite operand, by Python's rule (stored values are finite): the condition
    is a constant, or "is a number" (re-checked in Python)."""
    if op == "$ne":
        return None, True  # differs from every stored value (and from a missing one)
    if kind == "nan" or op == "$eq":
        return sa.false(), True
    if (kind == "inf") == (op in ("$gt", "$gte")):
        return sa.false(), True  # above +inf, below -inf: nothing
    return None, False  # below +inf, above -inf: every number


def _param(dialect: str, v: Any) -> Any:
    if dialect == "postgresql":
        return v  # bound as jsonb
    if isinstance(v, str) or (dialect == "sqlite" and _INT64_MIN <= v <= _INT64_MAX):
        return v
    return float(v)  # SQLite reads integers beyond 64 bits as floats, too


def _dotted(path: tuple[str, ...]) -> list[int]:
    """Positions of the path's names that hold a dot (read literally first, see filters)."""
    return [i for i, name in enumerate(path) if "." in name]


def _pg_at(doc: Any, path: tuple[str, ...]) -> Any:
    """The jsonb at ``path`` by the filters' rule: each name as a key (``->``: NULL on a
    non-object, as :func:`.filters.lookup` gives None); a dotted name as itself if present,
    else one object per dot."""
    at = doc
    for name in path:
        key = at.op("->")(sa.bindparam(None, name, type_=sa.Text))
        if "." in name:
            split = at
            for part in name.split("."):
                split = split.op("->")(sa.bindparam(None, part, type_=sa.Text))
            key = sa.func.coalesce(key, split)
        at = key
    return at


def _pg_condition(t: Tables, path: tuple[str, ...], op: str, v: Any, name: str) -> Pushed:
    # jsonb equality is JSON equality (numbers by value, strings byte for byte).
    doc = sa.type_coerce(t.store_items.c.value, postgresql.JSONB)
    at = _pg_at(doc, path)
    if v is None:
        cond = sa.or_(at.is_(None), sa.func.jsonb_typeof(at) == "null") if op == "$eq" else None
        return cond, cond is not None and len(path) == 1
    # a jsonb parameter (psycopg sends it typed): no text-to-jsonb cast per row in a generic plan
    operand = sa.bindparam(name, type_=postgresql.JSONB)
    if _kind(v) in _BIG:  # loosely, re-checked (see _EXACT and _big_params)
        if op == "$eq":
            near = sa.bindparam(f"{name}x", type_=postgresql.JSONB)
            return sa.or_(at.op("=")(operand), at.op("=")(near)), False
        if op in _RANGES:
            bound = at.op(">=" if op in ("$gt", "$gte") else "<=")(operand)
            return sa.and_(bound, sa.func.jsonb_typeof(at) == "number"), False
        return None, False
    if _contained(op, v) and not _dotted(path):
        # value @> {"a": {"b": v}} (the parameter, see _params): for a scalar, exactly JSON
        # equality at that path (arrays contain scalars only at the top level), and cheaper
        # than extracting and comparing (0.22 -> 0.16 ms of server time at 1,000 items)
        return doc.op("@>")(operand), True
    if op == "$eq":
        return at.op("=")(operand), True
    if op in _RANGES and _is_number(v):
        return sa.and_(at.op(_SQL_OP[op])(operand), sa.func.jsonb_typeof(at) == "number"), True
    return None, False


def _contained(op: str, v: Any) -> bool:
    """Whether PostgreSQL tests this leaf as containment (``$eq`` with a scalar operand)."""
    return op == "$eq" and isinstance(v, str | int | float | bool) and _kind(v) not in _BIG


def _nested(path: tuple[str, ...], v: Any) -> Any:
    """``{"a": {"b": v}}`` for the path ``("a", "b")``."""
    for name in reversed(path):
        v = {name: v}
    return v


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


_LABEL = re.compile(r'^[^"\\\x00-\x1f]{1,200}$')
"""A name that a quoted JSON path label can hold (SQLite's and MySQL's ``$."name"``)."""


def _json_path(path: tuple[str, ...]) -> str | None:
    if not all(_LABEL.match(p) for p in path):
        return None
    return "$" + "".join(f'."{p}"' for p in path)


def _sqlite_at(t: Tables, path: tuple[str, ...]) -> tuple[Any, Any] | None:
    """SQLite's ``(json_extract, json_type)`` at ``path`` by the filters' rule (None: not
    expressible, when several names hold dots)."""
    value = t.store_items.c.value
    dotted = _dotted(path)
    jp = _json_path(path)
    if jp is None or len(dotted) > 1:
        return None
    if not dotted:
        return sa.func.json_extract(value, jp), sa.func.json_type(value, jp)
    i = dotted[0]
    split = _json_path((*path[:i], *path[i].split("."), *path[i + 1 :]))
    if split is None:
        return None
    literal = sa.func.json_type(value, jp)
    at = sa.case(
        (literal.is_not(None), sa.func.json_extract(value, jp)),
        else_=sa.func.json_extract(value, split),
    )
    return at, sa.func.coalesce(literal, sa.func.json_type(value, split))


def _sqlite_condition(t: Tables, path: tuple[str, ...], op: str, v: Any, name: str) -> Pushed:
    found = _sqlite_at(t, path)
    if found is None or isinstance(v, list | dict) or op not in _SQL_OP:
        return None, False
    at, kind = found
    if v is None:
        cond = sa.or_(kind.is_(None), kind == "null") if op == "$eq" else None
        return cond, cond is not None and len(path) == 1
    if isinstance(v, bool):
        return (kind == ("true" if v else "false"), True) if op == "$eq" else (None, False)
    # The comparison first: the type check (a second JSON parse) runs only for rows it keeps.
    if isinstance(v, str):
        compare = at.op(_SQL_OP[op])(sa.bindparam(name, type_=sa.Text))
        if op == "$eq" and not v.startswith(("[", "{")):
            return compare, True  # only a JSON string extracts to this text
        return sa.and_(compare, kind == "text"), True
    if _kind(v) in _BIG:
        # compared as floats (SQLite reads integers beyond 64 bits as floats): several
        # integers meet at one float, re-checked
        operand = sa.bindparam(name, type_=sa.Float)
        return sa.and_(at.op(_LOOSE_OP[op])(operand), kind.in_(("integer", "real"))), False
    operand = sa.bindparam(name, type_=sa.Float if isinstance(v, float) else sa.BigInteger)
    return sa.and_(at.op(_SQL_OP[op])(operand), kind.in_(("integer", "real"))), True


def _mysql_condition(t: Tables, path: tuple[str, ...], op: str, v: Any, name: str) -> Pushed:
    jp = _json_path(path)
    if (
        jp is None
        or _dotted(path)
        or v is None
        or isinstance(v, list | dict | bool)
        or op not in _SQL_OP
    ):
        return None, False
    at = sa.func.json_value(t.store_items.c.value, jp)
    if isinstance(v, str):  # collations may equate more strings: a superset, re-checked
        return (at == sa.bindparam(name, type_=sa.Text) if op == "$eq" else None), False
    operand = sa.bindparam(name, type_=sa.Float)
    return sa.cast(at, mysql.DOUBLE).op(_LOOSE_OP[op])(operand), False


_BUILDERS = {"postgresql": _pg_condition, "sqlite": _sqlite_condition}
_cache: dict[Any, Any] = {}


def _cached(key: Any, build: Callable[[], T]) -> T:
    hit = _cache.get(key)
    if hit is None:
        if len(_cache) > 2000:
            _cache.clear()
        hit = _cache[key] = build()
    return hit  # type: ignore[no-any-return]


def prefilter(t: Tables, dialect: str, q: SearchQuery) -> tuple[list[Any], bool]:
    """SQL conditions implied by ``q.filter`` (values as parameters ``f0``...), and whether
    they are exactly the filter."""
    leaves = q.leaves
    shape = q.shape
    if q.sealer is not None:  # ciphertext: the filter runs in Python only
        return [], not q.filter

    def build() -> tuple[list[Any], bool]:
        make = _BUILDERS.get(dialect, _mysql_condition)
        out, exact = [], True
        for i, ((path, op, operand), (_, _, kind)) in enumerate(zip(leaves, shape, strict=True)):
            if kind in _NONFINITE:
                cond, is_exact = _nonfinite(op, kind)
            elif kind == "nonfinite json":
                cond, is_exact = None, False
            else:
                cond, is_exact = make(t, path, op, operand, f"f{i}")
            if cond is not None:
                out.append(cond)
            exact = exact and is_exact
        return out, exact

    return _cached(("filter", t.key, dialect, q.shape), build)


def _params(dialect: str, q: SearchQuery, now: int) -> dict[str, Any]:
    """Bound values for the statements built from ``q`` (prefix bounds, now, filter values)."""
    params: dict[str, Any] = {"now": now}
    bounds = namespaces.prefix_range(q.prefix)
    if bounds is not None:
        params["lo"], params["hi"] = bounds
    for i, ((path, op, v), (_, _, kind)) in enumerate(zip(q.leaves, q.shape, strict=True)):
        if v is None or kind in _NONFINITE or kind == "nonfinite json":
            continue
        if dialect == "postgresql" and _contained(op, v) and not _dotted(path):
            params[f"f{i}"] = _nested(path, v)
        elif dialect == "postgresql" and kind in _BIG:
            params[f"f{i}"], params[f"f{i}x"] = _big_params(op, v)
        elif dialect == "postgresql" or kind in _SCALARS:
            params[f"f{i}"] = _param(dialect, v)
    return params


def _where(conn: Session, t: Tables, q: SearchQuery) -> tuple[list[Any], bool]:
    """The conditions of a search: prefix (first: SQLite's newest-first search drops it), not
    lapsed, filter. (Filter first on PostgreSQL saved 0.03 ms at 1,000 items but cost 20% at
    100,000 items: one user's filtered search 1.65 -> 2.06 ms, the whole store's 13.5 -> 17 ms.)
    """
    conds, exact = prefilter(t, conn.dialect.name, q)
    live = _live(t, q.omit_expired, conn.dialect.name)
    return [_under(t.store_items.c.ns, q.prefix), live, *conds], exact


def _shape(conn: Session, t: Tables, q: SearchQuery, what: str) -> tuple[Any, ...]:
    sealed = q.sealer is not None
    return (what, t.key, conn.dialect.name, bool(q.prefix), q.omit_expired, q.shape, sealed)


# -- reads -------------------------------------------------------------------------------------


def _get_one_stmt(t: Tables, omit_expired: bool) -> Any:
    """One item by (ns, key) (built once per tables: the hot path)."""
    c = t.store_items.c

    def build() -> Any:
        return sa.select(*_columns(t)).where(
            c.ns == sa.bindparam("ns", type_=c.ns.type),
            c.key == sa.bindparam("key", type_=c.key.type),
            _live(t, omit_expired),
        )

    return _cached(("get", t.key, omit_expired), build)


def _at_pairs(t: Tables, dialect: str) -> ColumnElement[bool]:
    """``(ns, key)`` is one of the pairs of the parameters that :func:`_pairs` makes.

    SQLite does not use an index for a row-value ``IN`` list: it scans the table (16 ms per
    500 pairs at 50,000 items). There the pairs go as one JSON array, and each is looked up in
    the ``(ns, key)`` index. PostgreSQL takes them as two arrays (one statement text whatever
    their number: an ``IN`` list of 500 pairs cost psycopg 3 ms to parse per call, and the
    server as much to plan); MySQL, the ``IN`` list.
    """
    c = t.store_items.c
    if dialect == "postgresql":
        text = postgresql.ARRAY(sa.Text)
        want = (
            sa.func.unnest(
                sa.cast(sa.bindparam("pair_ns", type_=text), text),
                sa.cast(sa.bindparam("pair_key", type_=text), text),
            )
            .table_valued("ns", "key")
            .render_derived(name="want")
        )
        # the column's collation, so that the (ns, key) index serves the lookup
        return sa.tuple_(c.ns, c.key).in_(sa.select(sa.collate(want.c.ns, "C"), want.c.key))
    if dialect != "sqlite":
        return sa.tuple_(c.ns, c.key).in_(sa.bindparam("pairs", expanding=True))
    j = sa.func.json_each(sa.bindparam("pairs_json", type_=sa.Text)).table_valued("value")
    found = t.store_items.alias("found")
    match = sa.and_(
        found.c.ns == sa.func.json_extract(j.c.value, "$[0]"),
        found.c.key == sa.func.json_extract(j.c.value, "$[1]"),
    )
    return c.id.in_(sa.select(found.c.id).select_from(j.join(found, match)))


def _pairs(dialect: str, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The parameters of :func:`_at_pairs` for ``pairs``."""
    if dialect == "postgresql":
        return {"pair_ns": [p[0] for p in pairs], "pair_key": [p[1] for p in pairs]}
    if dialect != "sqlite":
        return {"pairs": list(pairs)}
    return {"pairs_json": json.dumps(list(pairs))}


def get_item(
    conn: Session,
    t: Tables,
    ns: str,
    key: str,
    now: int,
    omit_expired: bool,
    sealer: Sealer | None = None,
) -> ItemRow | None:
    """The live item at ``(encoded ns, key)``, if any."""
    params = {"ns": ns, "key": key, "now": now}
    row = conn.execute(_get_one_stmt(t, omit_expired), params).first()
    return _item(row, None, sealer) if row is not None else None


def get_items(
    conn: Session,
    t: Tables,
    keys: Sequence[tuple[str, str]],
    now: int,
    omit_expired: bool,
    sealer: Sealer | None = None,
) -> dict[tuple[str, str], ItemRow]:
    """The live items at ``(encoded ns, key)`` pairs, keyed by that pair."""
    out: dict[tuple[str, str], ItemRow] = {}
    unique = list(dict.fromkeys(keys))
    if len(unique) == 1:
        one = get_item(conn, t, *unique[0], now, omit_expired, sealer)
        return {unique[0]: one} if one is not None else {}
    name = conn.dialect.name
    stmt = _cached(
        ("get_many", t.key, name, omit_expired),
        lambda: sa.select(*_columns(t)).where(_at_pairs(t, name), _live(t, omit_expired)),
    )
    for i in range(0, len(unique), CHUNK):
        for row in conn.execute(stmt, {**_pairs(name, unique[i : i + CHUNK]), "now": now}):
            out[(row[1], row[2])] = _item(row, None, sealer)
    return out


def _paged(
    conn: Session, stmt: Any, params: dict[str, Any], q: SearchQuery, want: int, exact: bool
) -> list[ItemRow]:
    """The first ``want`` rows of an ordered select that match ``q.filter``: one query when the
    SQL is exact, else pages re-checked in Python."""
    if want <= 0:
        return []
    paged = _cached(
        ("paged", id(stmt)),
        lambda: (stmt, stmt.limit(sa.bindparam("lim")).offset(sa.bindparam("off"))),
    )[1]
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


def _ordered(t: Tables) -> tuple[Any, Any]:
    c = t.store_items.c
    return c.updated_at.desc(), c.id.desc()


@dataclass
class PlanMode:
    """A store's planning choices for its searches, re-checked every minute.

    ``custom``: PostgreSQL plans each search for its actual values (once the items table is
    large). ``broad``: per namespace prefix, whether its sub-namespaces hold at least
    :data:`BROAD_PREFIX` items (SQLite then reads the store newest first, see
    :func:`search_items`); under ``()``, whether the store does."""

    custom: bool = True
    checked: float = -math.inf
    rows: float = -1.0
    """PostgreSQL: the planner's estimate of the items table's rows (-1: not known yet)."""
    broad: dict[tuple[str, ...], tuple[bool, float]] = field(default_factory=dict)
    exact: dict[tuple[Any, ...], tuple[bool, float]] = field(default_factory=dict)
    """pgvector with HNSW, per prefix, filter shape and number of items wanted: whether a
    search ranks exactly without the index (its prefix is too narrow for it, or its scan ran
    dry), and since when (see :func:`_pg_top`)."""


LARGE_ITEMS_TABLE = 4 << 20  # bytes: about 25,000 small items
_RECHECK_S = 60.0


def use_custom_plans(conn: Session, t: Tables, mode: PlanMode) -> None:
    """PostgreSQL: let large stores' searches be planned for their actual values.

    psycopg prepares statements run often; PostgreSQL then may switch to a generic plan, which
    cannot see how much of the table a namespace prefix or a filter selects (measured at 100,000
    items: 21 instead of 13 ms for a whole-store filtered search). On a small table the generic
    plan is as good and saves the planning: measured at 1,000 items, 0.38 instead of 0.43 ms
    per search, and faster one-namespace searches at 10,000 and 30,000 items. So custom plans
    are forced once the items table holds :data:`LARGE_ITEMS_TABLE` bytes. No-op elsewhere.
    """
    if conn.dialect.name != "postgresql":
        return
    clock = time.monotonic()
    if clock - mode.checked > _RECHECK_S:
        name = conn.dialect.identifier_preparer.format_table(t.store_items)
        size, rows = conn.execute(_TABLE_STATS, {"name": name}).first() or (0, -1.0)
        mode.custom, mode.checked = (size or 0) >= LARGE_ITEMS_TABLE, clock
        mode.rows = float(rows)
    if not conn.rules.prepares_statements(conn.raw.dbapi_connection):
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
    has ``value``: its pool record remembers what was set (else the server's default)."""
    info = conn.raw.info  # type: ignore[attr-defined]
    key = f"langmem_setting_{name}"
    if info.get(key, _DEFAULTS[name]) != value:
        conn.execute(_SET_CONFIG, {"name": name, "value": value})
        info[key] = value


_pg_class = sa.table("pg_class", sa.column("oid"), sa.column("reltuples"))
_TABLE_STATS = sa.select(sa.func.pg_relation_size(_pg_class.c.oid), _pg_class.c.reltuples).where(
    _pg_class.c.oid == sa.func.to_regclass(sa.bindparam("name"))
)


def search_now(conn: Session, t: Tables, q: SearchQuery, now: int, mode: PlanMode) -> list[ItemRow]:
    """:func:`search_items` as a transaction of its own (plans as ``mode`` says)."""
    use_custom_plans(conn, t, mode)
    return search_items(conn, t, q, now, mode)


BROAD_PREFIX = 2000  # items: a prefix holding this many is read newest first on SQLite


def _broad(conn: Session, t: Tables, q: SearchQuery, mode: PlanMode) -> bool:
    """Whether SQLite should read ``q.prefix`` newest first: its sub-namespaces hold at least
    :data:`BROAD_PREFIX` items (live or not; counted through the namespace index up to that
    many; the prefix's own namespace is read newest first either way) and it holds half of the
    newest items (:func:`_dense`). Remembered for a minute per prefix; no prefix is broad in a
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
    """Whether at least half of the store's newest :data:`_SAMPLE` items are under ``prefix``:
    reading newest first then finds the prefix's items at least half as often as reading the
    prefix's own (for a big prefix in a far bigger store it would not: the namespace index then
    reads only the prefix's items)."""
    c = t.store_items.c

    def build() -> Any:
        newest = sa.select(c.ns).order_by(*_ordered(t)).limit(_SAMPLE).subquery()
        under = sa.case((_under(newest.c.ns, prefix), 1), else_=0)
        return sa.select(sa.func.count(), sa.func.sum(under))

    stmt = _cached(("dense", t.key), build)
    lo, hi = namespaces.prefix_range(prefix)  # type: ignore[misc]
    sampled, under = conn.execute(stmt, {"lo": lo, "hi": hi}).one()
    return 2 * int(under or 0) >= int(sampled)


def _count_under(conn: Session, t: Tables, prefix: tuple[str, ...]) -> int:
    """Items in the sub-namespaces of ``prefix`` (all items for ``()``), up to BROAD_PREFIX."""
    c = t.store_items.c
    stmt = _cached(
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


def _strictly_under(column: Any, prefix: tuple[str, ...]) -> list[Any]:
    if not prefix:
        return []
    lo, hi = sa.bindparam("lo", type_=column.type), sa.bindparam("hi", type_=column.type)
    return [column > lo, column < hi]


def _no_index(column: Any) -> Any:
    """SQLite's ``+column``: the same value and collation, but no index is chosen for it."""
    return UnaryExpression(column, operator=operators.custom_op("+"), type_=column.type)


def search_items(
    conn: Session, t: Tables, q: SearchQuery, now: int, mode: PlanMode | None = None
) -> list[ItemRow]:
    """Items under ``q.prefix`` matching ``q.filter``, most recently updated first.

    On SQLite, a prefix holding few items is read through the ``(ns, updated_at, id)`` index
    (:func:`_newest_under`); a broad one (``mode`` says) is read newest first through the
    ``(updated_at, id)`` index, stopping at ``offset + limit`` matches, instead of reading and
    sorting every item under it: a whole-store filtered search at 100,000 items went from 131
    to 0.4 ms. (Either way each row read is looked up in the table, so when the filter matches
    almost nothing both read everything.)"""
    sqlite = conn.dialect.name == "sqlite"
    broad = sqlite and bool(q.prefix) and mode is not None and _broad(conn, t, q, mode)

    def build() -> tuple[Any, bool]:
        where, exact = _where(conn, t, q)
        if exact and q.prefix and sqlite:
            if not broad:
                return _newest_under(t, where[1:]), exact
            where[0] = _under(_no_index(t.store_items.c.ns), q.prefix)
        stmt = sa.select(*_columns(t)).where(*where).order_by(*_ordered(t))
        if exact:
            stmt = stmt.limit(sa.bindparam("lim")).offset(sa.bindparam("off"))
        return stmt, exact

    stmt, exact = _cached((*_shape(conn, t, q, "search"), broad), build)
    params = _params(conn.dialect.name, q, now)
    if exact:
        page = {"lim": q.limit, "off": q.offset, "want": q.limit + q.offset}
        return [_item(r, None, q.sealer) for r in conn.execute(stmt, {**params, **page})]
    return _paged(conn, stmt, params, q, q.offset + q.limit, exact)[q.offset :]


def _newest_under(t: Tables, conditions: list[Any]) -> Any:
    """The ``lim`` newest items (after ``off``) under the ``lo``/``hi`` prefix matching
    ``conditions``: the items of the prefix's own namespace and those of its sub-namespaces,
    each part newest first and cut at ``want`` = ``off + lim``, then merged.

    On SQLite, the first part walks the ``(ns, updated_at, id)`` index of one namespace from its
    newest item and stops after ``want`` matches, instead of reading and sorting every item of
    the namespace (at 100,000 items: 1.65 ms to 0.09 ms for a user's 1,000).
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


_PG_OPS = {"cosine": "<=>", "inner_product": "<#>", "l2": "<->"}
"""pgvector's distance operators (lower is nearer) for each ``distance_type``."""


def _score(distance: str, d: float) -> float:
    """The score of a pgvector distance, as PostgresStore gives it."""
    return 1.0 - d if distance == "cosine" else -d


def _query32(query_vector: list[float]) -> list[float]:
    """The query as float32 values, as pgvector computes with them."""
    return np.asarray(query_vector, dtype=np.float32).tolist()  # type: ignore[no-any-return]


def _scored(
    conn: Session,
    t: Tables,
    q: SearchQuery,
    query_vector: list[float],
    now: int,
    pgv: Any,
    distance: str = "cosine",
) -> tuple[list[int], list[float]]:
    """Candidates with a vector, best score per item, best first (expiry checked later); with
    pgvector (``pgv``) ranked in the database (:func:`_pg_ranking`)."""
    items = t.store_items
    params = _params(conn.dialect.name, q, now)
    if pgv is not None:  # every item under the prefix, best first (the filter is re-checked)
        ranking = _cached(
            _shape(conn, t, q, f"pgvector ranking {distance}"),
            lambda: _pg_ranking(conn, t, q, None, distance),
        )
        pairs = conn.execute_raw(ranking[0], {**params, "q": _query32(query_vector)})
        return [r[0] for r in pairs], [_score(distance, float(r[1])) for r in pairs]
    lengths = distance != "cosine"

    def build() -> Any:
        v = t.store_vectors
        # The raw driver bytes (no per-row result processing: this can be every vector stored).
        raw = sa.type_coerce(v.c.embedding, sa.types.NullType())
        extra = [v.c.norm] if lengths else []
        if q.sealer is not None:
            extra += [v.c.ns, v.c.field]
        stmt = sa.select(v.c.item_id, raw, *extra).where(_under(v.c.ns, q.prefix))
        if q.filter:  # narrow in SQL with the item's value
            stmt = stmt.join(items, items.c.id == v.c.item_id).where(*_where(conn, t, q)[0])
        return stmt

    # Plain DBAPI tuples: building a Row per vector would cost more than the ranking.
    pairs = conn.execute_raw(_cached(_shape(conn, t, q, f"vectors {lengths}"), build), params)
    if q.sealer is not None:
        opened, at = q.sealer.open_vector, 3 if lengths else 2
        blobs = [opened(_text(r[at]), r[0], _text(r[at + 1]), r[1]) for r in pairs]
    else:
        blobs = [r[1] for r in pairs]
    norms = [r[2] for r in pairs] if lengths else None
    ids = [r[0] for r in pairs]
    return rank_max_pool(query_vector, ids, b"".join(blobs), norms, distance)


def _text(ns: Any) -> str:
    """An id column read raw (bytes on MySQL/MariaDB)."""
    return ns.decode("utf-8") if isinstance(ns, bytes | bytearray) else str(ns)


def _pg_distance(embedding: Any, distance: str, vector_type: Vector) -> Any:
    """pgvector's distance of ``embedding`` to the query (parameter ``q``, of ``vector_type``)."""
    op = embedding.op(_PG_OPS[distance], return_type=sa.Float)
    return op(sa.bindparam("q", type_=vector_type))


def _exact_distance(pgv: sa.Table, distance: str) -> Any:
    """The distance of the full-precision vectors, as the application ranks them: a zero
    vector's cosine is 0 (pgvector's ``<=>`` gives NaN)."""
    d = _pg_distance(pgv.c.embedding, distance, Vector())
    if distance != "cosine":
        return d
    return sa.func.coalesce(sa.func.nullif(d, sa.literal_column("'NaN'::float8")), 1.0)


def _pg_ranking(
    conn: Session,
    t: Tables,
    q: SearchQuery,
    ann: ANN | None = None,
    distance: str = "cosine",
) -> tuple[Any, bool]:
    """pgvector: ``(item_id, neg)`` per item matching the prefix and filter, best first, where
    ``neg`` is the item's smallest distance (``distance``) to the query (parameter ``q``):
    :func:`_score` turns it into the score :func:`.vectors.rank_max_pool` computes; and whether
    the filter is exact in SQL. With ``ann``, only the ``candidates`` nearest vectors of the
    whole table, through its index, are grouped and then tested (prefix, expiry, filter), as
    pgvector 0.6 would test them after its scan anyway. The nearest vectors are taken from the
    vectors alone so that the index is the only way to rank them: with the tests inside, a
    plan made without the values (PostgreSQL's generic plan, after five runs) ranked every
    vector instead, 1.27-1.43 ms per whole-store search at 1,000 items against 0.86-1.01 with
    the index."""
    pgv, items = pgvector_table(t), t.store_items
    where, exact = _where(conn, t, q)
    if ann is None:
        neg = _exact_distance(pgv, distance)
        joined = sa.select(pgv.c.item_id).join(items, items.c.id == pgv.c.item_id).where(*where)
        best = sa.func.min(neg).label("neg")
        return joined.add_columns(best).group_by(pgv.c.item_id).order_by(best, pgv.c.item_id), exact
    typed = Vector(ann.dims, ann.vector_type)
    neg = _pg_distance(sa.cast(pgv.c.embedding, typed), ann.distance, typed)
    nearest = sa.select(pgv.c.item_id, neg.label("neg")).order_by(neg)
    near = nearest.limit(sa.bindparam("candidates")).subquery()
    best = sa.func.min(near.c.neg).label("neg")
    top = (
        sa.select(near.c.item_id, best)
        .join(items, items.c.id == near.c.item_id)
        .where(*where)
        .group_by(near.c.item_id)
    )
    return top.order_by(best, near.c.item_id), exact


def _pg_top(
    conn: Session,
    t: Tables,
    q: SearchQuery,
    query_vector: list[float],
    now: int,
    want: int,
    ann: ANN | None,
    mode: PlanMode | None = None,
    full: bool = False,
    distance: str = "cosine",
) -> list[ItemRow] | None:
    """pgvector: the best ``want`` items with their rows, in one statement; None when the
    filter is not exact in SQL (then :func:`_scored` ranks and Python re-checks).

    Exact: every vector under the prefix is scored and grouped per item; without a filter,
    from the vectors alone (:func:`_pg_first`), else (or with ``full``) joined with the items
    first. With ``ann``, its
    index yields the nearest vectors (two per wanted item per field, as PostgresStore),
    filtered afterwards; when that leaves fewer than ``want`` items because the scan ran dry
    (a selective prefix or filter), the exact ranking answers instead, so the approximation
    may reorder or swap near neighbours but never returns fewer items than match.

    The scan is not tried under a prefix holding too small a share of the store for the
    ``ef_search`` nearest vectors to include ``want`` of its items (see :func:`_narrow`), nor
    where it ran dry: both are decided once a minute per prefix, filter shape and ``want``
    (in ``mode``), and such searches rank exactly at once instead of paying for a scan that
    finds too little (one user's namespace among 100 at 100,000 items: 7.1 ms with the scan,
    4.3 without). A prefix not decided yet takes its siblings' decision (same parent and
    depth), which its first exact search then replaces with its own, from the count of items
    it ranked: one question to the planner a minute for all users' namespaces, not one per
    user."""
    items = t.store_items
    plan = (q.prefix, q.shape, want)
    # siblings (same parent, same depth: other users' namespaces) are alike: one EXPLAIN a
    # minute serves them all, until a prefix's own search says otherwise
    kin = (q.prefix[:-1], len(q.prefix), q.shape, want) if q.prefix else None
    hnsw, guessed = ann, False
    if ann is not None and mode is not None:
        clock = time.monotonic()
        known = mode.exact.get(plan)
        if known is None or clock - known[1] >= _RECHECK_S:
            known = mode.exact.get(kin) if kin is not None else None
            if known is None or clock - known[1] >= _RECHECK_S:
                vectors = want * ann.per_item
                narrow = _narrow(conn, t, q.prefix, mode, vectors, _ef_search(ann, want))
                known = _remember(mode.exact, plan, narrow)
                if kin is not None:
                    _remember(mode.exact, kin, narrow)
            else:
                guessed = True
        if known[0]:
            ann = None

    first = ann is None and not q.filter and not full

    def build() -> tuple[Any, bool]:
        if first:
            return _pg_first(conn, t, q, distance), True
        top, exact = _pg_ranking(conn, t, q, ann, distance)
        ranked = top.limit(sa.bindparam("lim")).subquery()
        stmt = (
            sa.select(*_columns(t), ranked.c.neg)
            .join_from(ranked, items, items.c.id == ranked.c.item_id)
            .order_by(ranked.c.neg, ranked.c.item_id)
        )
        return stmt, exact

    what = "pgvector first" if first else "pgvector" if ann is None else ann_index_name(t, ann)
    stmt, exact = _cached(_shape(conn, t, q, f"{what} {distance}"), build)
    if not exact:
        return None
    params = {**_params(conn.dialect.name, q, now), "q": _query32(query_vector)}
    params["lim"] = want
    if first:
        params["candidates"] = candidates = 2 * want + 8
        rows = conn.execute(stmt, params).all()
        if len(rows) < want and (not rows or rows[0][8] > candidates):
            # lapsed items among the candidates: rank every item (joined with the items)
            return _pg_top(conn, t, q, query_vector, now, want, None, full=True, distance=distance)
        if guessed and rows and hnsw is not None and mode is not None:
            # narrow as its siblings? The items just ranked tell (as _narrow's estimate would)
            vectors = want * hnsw.per_item
            narrow = rows[0][8] * _ef_search(hnsw, want) < mode.rows * vectors
            _remember(mode.exact, plan, narrow)
        return [_item(r, _score(distance, r[7])) for r in rows]
    if ann is not None:
        params["candidates"] = _candidates(ann, want)
        # an HNSW scan yields at most ef_search vectors, an IVFFlat one reads `probes` lists:
        # set for this transaction only (the store runs such searches as one)
        if ann.kind == "hnsw":
            conn.execute(
                _SET_LOCAL, {"name": "hnsw.ef_search", "value": str(_ef_search(ann, want))}
            )
        else:
            conn.execute(_SET_LOCAL, {"name": "ivfflat.probes", "value": str(ann.probes)})
    found = [_item(r, _score(distance, r[7])) for r in conn.execute(stmt, params)]
    if ann is not None and len(found) < want:
        # the index scan ran dry (ef_search, then the filter) or its vectors were of fewer
        # items: rank exactly, so that a search never returns fewer items than match
        if mode is not None:
            _remember(mode.exact, plan, True)
            if kin is not None:  # and its siblings' scans would likely run dry too
                _remember(mode.exact, kin, True)
        return _pg_top(conn, t, q, query_vector, now, want, None, distance=distance)
    return found


def _pg_first(conn: Session, t: Tables, q: SearchQuery, distance: str = "cosine") -> Any:
    """pgvector, exact, without a filter: the ``candidates`` best-ranked items by their vectors
    under the prefix (the vectors' own ``ns``, without reading the items), then the live ones
    of them (at most ``lim``) with their rows, each followed by its ``neg`` score and the
    number of items ranked. Joining every item under the prefix before ranking read each of its
    items and probed the vectors' key once per item: 6.4 instead of 1.8 ms for one user's
    1,000 items of 100,000. When lapsed items leave fewer than ``lim`` rows of more ranked,
    the caller ranks again with the join."""
    pgv, items = pgvector_table(t), t.store_items
    best = sa.func.min(_exact_distance(pgv, distance)).label("neg")
    ranked = (
        sa.select(pgv.c.item_id, best, sa.func.count().over().label("ranked"))
        .where(_under(pgv.c.ns, q.prefix))
        .group_by(pgv.c.item_id)
        .order_by(best, pgv.c.item_id)
        .limit(sa.bindparam("candidates"))
        .subquery()
    )
    return (
        sa.select(*_columns(t), ranked.c.neg, ranked.c.ranked)
        .join_from(ranked, items, items.c.id == ranked.c.item_id)
        .where(*_where(conn, t, q)[0])
        .order_by(ranked.c.neg, ranked.c.item_id)
        .limit(sa.bindparam("lim"))
    )


def _candidates(ann: ANN, want: int) -> int:
    """The nearest vectors an index search of ``want`` items groups: two per wanted item per
    embedded field (as PostgresStore), plus one."""
    return 2 * want * ann.per_item + 1


def _ef_search(ann: ANN, want: int) -> int:
    """pgvector's ``hnsw.ef_search`` for a search of ``want`` items: at least its candidates
    (up to pgvector's limit of 1,000)."""
    return max(ann.ef_search, min(_candidates(ann, want), 1000))


def _remember(
    known: dict[tuple[Any, ...], tuple[bool, float]], key: tuple[Any, ...], value: bool
) -> tuple[bool, float]:
    if len(known) >= 1024:
        known.clear()
    known[key] = entry = (value, time.monotonic())
    return entry


NARROW_FROM = 10_000
"""Items from which an HNSW search first asks the planner whether its prefix is too narrow for
the index (see :func:`_narrow`): in a smaller store a scan that runs dry costs less than the
question's round trip (measured at 1,000 items: 0.74 instead of 0.54 ms for a user's first
search)."""


def _narrow(
    conn: Session,
    t: Tables,
    prefix: tuple[str, ...],
    mode: PlanMode,
    vectors: int,
    ef_search: int,
) -> bool:
    """Whether ``prefix`` holds too small a share of the store for an HNSW scan: its
    ``ef_search`` nearest vectors would hold fewer than ``vectors`` of the prefix's on average,
    i.e. the planner expects fewer than ``rows * vectors / ef_search`` items under it
    (``rows``: its estimate for the table; both from the statistics, without reading the
    items). Not for the whole store, nor while the estimate is unknown or below
    :data:`NARROW_FROM`: the scan is tried, and the exact ranking answers if it runs dry."""
    if not prefix or mode.rows < max(NARROW_FROM, 1):
        return False
    c = t.store_items.c
    stmt = _cached(("under_prefix", t.key), lambda: sa.select(c.id).where(_under(c.ns, prefix)))
    bounds = namespaces.prefix_range(prefix)
    assert bounds is not None
    under = conn.estimated_rows(stmt, {"lo": bounds[0], "hi": bounds[1]})
    return under * ef_search < mode.rows * vectors


def vector_search(
    conn: Session,
    t: Tables,
    q: SearchQuery,
    query_vector: list[float],
    now: int,
    pgvector: bool = False,
    ann: ANN | None = None,
    mode: PlanMode | None = None,
    distance: str = "cosine",
) -> list[ItemRow]:
    """Items ranked by their best vector's score against ``query_vector`` (``distance``: see
    :mod:`.vectors`), among those matching the prefix and filter; items without a vector
    follow, unscored. With ``pgvector`` the database ranks (approximately, through the index
    of ``ann``; ``mode`` keeps where that index is not worth scanning, see :func:`_pg_top`)."""
    want = q.offset + q.limit
    c = t.store_items.c
    top = None
    if pgvector:
        top = _pg_top(conn, t, q, query_vector, now, want, ann, mode, distance=distance)
    if top is not None:
        kept = top
        ids: list[int] = []
    else:
        pgv = pgvector_table(t) if pgvector else None
        ids, scores = _scored(conn, t, q, query_vector, now, pgv, distance)
        kept = []
    step = max(2 * want, 50) if q.filter else want  # rows to read per round
    stmt = _cached(
        ("by_ids", t.key, q.omit_expired),
        lambda: sa.select(*_columns(t)).where(
            c.id.in_(sa.bindparam("ids", expanding=True)), _live(t, q.omit_expired)
        ),
    )
    for i in range(0, len(ids), max(step, 1)):
        if len(kept) >= want:
            break
        chunk = dict(zip(ids[i : i + step], scores[i : i + step], strict=True))
        rows = conn.execute(stmt, {"ids": list(chunk), "now": now})
        by_id = {r[0]: _item(r, chunk[r[0]], q.sealer) for r in rows}
        kept.extend(
            by_id[item_id]
            for item_id in chunk
            if item_id in by_id and matches(by_id[item_id].value, q.filter)
        )
    if len(kept) < want:

        def build() -> tuple[Any, bool]:
            has_vector = sa.exists().where(t.store_vectors.c.item_id == c.id)
            where, exact = _where(conn, t, q)
            stmt = sa.select(*_columns(t)).where(*where, ~has_vector).order_by(*_ordered(t))
            return stmt, exact

        stmt, exact = _cached(_shape(conn, t, q, "unscored"), build)
        params = _params(conn.dialect.name, q, now)
        kept.extend(_paged(conn, stmt, params, q, want - len(kept), exact))
    return kept[q.offset : want]


def list_namespaces(
    conn: Session, t: Tables, prefix: tuple[str, ...], now: int, omit_expired: bool
) -> list[tuple[str, ...]]:
    """Distinct namespaces holding a live item, under ``prefix``, in tuple order."""
    c = t.store_items.c
    stmt = (
        sa.select(c.ns)
        .where(_under(c.ns, prefix), _live(t, omit_expired))
        .group_by(c.ns)
        .order_by(c.ns)
    )
    q = SearchQuery(prefix, None, 0, 0, omit_expired)
    params = _params(conn.dialect.name, q, now)
    return [namespaces.decode(ns) for ns in conn.execute(stmt, params).scalars()]


# -- writes ------------------------------------------------------------------------------------


def refresh_ttl(conn: Session, t: Tables, ids: Sequence[int], now: int) -> None:
    """Restart the TTL of the items ``ids`` (those that have one) from ``now``."""
    c = t.store_items.c
    stmt = _cached(
        ("refresh", t.key),
        lambda: (
            sa.update(t.store_items)
            .where(c.id.in_(sa.bindparam("ids", expanding=True)), c.ttl_us.is_not(None))
            .values(expires_at=c.ttl_us + sa.bindparam("now", type_=sa.BigInteger))
        ),
    )
    for i in range(0, len(ids), CHUNK):
        conn.execute(stmt, {"ids": list(ids[i : i + CHUNK]), "now": now})


_CHANGING = ("value", "updated_at", "ttl_us", "expires_at")
_ROW = ("ns", "key", "value", "created_at", "updated_at", "ttl_us", "expires_at")


def _upsert(conn: Session, t: Tables, rows: list[dict[str, Any]]) -> None:
    items = t.store_items
    name = conn.dialect.name
    if name == "postgresql" and len(rows) > 1:
        # one statement for every row (psycopg's executemany sends one per row: 20,000 puts
        # of a burst of async calls were 20,000 statements)
        columns = {c: [r[c] for r in rows] for c in _ROW}
        conn.execute(_cached(("upsert many", t.key), lambda: _pg_upsert_many(t)), columns)
        return

    def build() -> Any:
        if name == "postgresql":
            # inline: no implicit RETURNING of the new id, which nothing reads (a row to fetch);
            # the value arrives as the validation's JSON text, cast by the server
            ins = (
                postgresql.insert(items)
                .inline()
                .values(value=sa.cast(sa.bindparam("value", type_=sa.Text), postgresql.JSONB))
            )
            return ins.on_conflict_do_update(
                index_elements=[items.c.ns, items.c.key],
                set_={k: ins.excluded[k] for k in _CHANGING},
            )
        # the value arrives as JSON text (see PutRow.text): bound as text, not serialized again
        text = {"value": sa.bindparam("value", type_=sa.Text)}
        if name == "sqlite":
            lite = sqlite.insert(items).values(text)
            return lite.on_conflict_do_update(
                index_elements=[items.c.ns, items.c.key],
                set_={k: lite.excluded[k] for k in _CHANGING},
            )
        mins = mysql.insert(items).values(text)
        return mins.on_duplicate_key_update({k: mins.inserted[k] for k in _CHANGING})

    conn.execute(_cached(("upsert", t.key, name), build), rows)


def _pg_upsert_many(t: Tables) -> Any:
    """PostgreSQL: the upsert of many rows, each column given as one array parameter."""
    items = t.store_items
    text, big = postgresql.ARRAY(sa.Text), postgresql.ARRAY(sa.BigInteger)
    arrays = [
        sa.cast(
            sa.bindparam(c, type_=text if c in ("ns", "key", "value") else big),
            text if c in ("ns", "key", "value") else big,
        )
        for c in _ROW
    ]
    src = sa.func.unnest(*arrays).table_valued(*_ROW).render_derived(name="src")
    select = sa.select(
        src.c.ns,
        src.c.key,
        sa.cast(src.c.value, postgresql.JSONB),
        *(src.c[c] for c in _ROW[3:]),
    )
    ins = postgresql.insert(items).from_select(list(_ROW), select)
    return ins.on_conflict_do_update(
        index_elements=[items.c.ns, items.c.key],
        set_={k: ins.excluded[k] for k in _CHANGING},
    )


def _ids(conn: Session, t: Tables, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    c = t.store_items.c
    out: dict[tuple[str, str], int] = {}
    name = conn.dialect.name
    stmt = _cached(
        ("ids", t.key, name), lambda: sa.select(c.id, c.ns, c.key).where(_at_pairs(t, name))
    )
    for i in range(0, len(pairs), CHUNK):
        for item_id, ns, key in conn.execute(stmt, _pairs(name, pairs[i : i + CHUNK])):
            out[(ns, key)] = item_id
    return out


def apply_puts(
    conn: Session,
    t: Tables,
    rows: Sequence[PutRow],
    now: int,
    index: bool,
    pgvector: bool,
    sealer: Sealer | None = None,
) -> None:
    """Apply writes (the last per ``(ns, key)`` should be given once); with ``index``, replace
    the vectors of every written item."""
    deletes = [(r.ns, r.key) for r in rows if r.value is None]
    if deletes:
        name = conn.dialect.name
        stmt = _cached(
            ("delete", t.key, name), lambda: sa.delete(t.store_items).where(_at_pairs(t, name))
        )
        for i in range(0, len(deletes), CHUNK):
            conn.execute(stmt, _pairs(name, deletes[i : i + CHUNK]))
    puts = [r for r in rows if r.value is not None]
    if not puts:
        return
    pg = conn.dialect.name == "postgresql"
    _upsert(
        conn,
        t,
        [
            {
                "ns": r.ns,
                "key": r.key,
                "value": jsonb_text(_json_text(r)) if pg else _json_text(r),
                "created_at": now,
                "updated_at": now,
                "ttl_us": r.ttl_us,
                "expires_at": None if r.ttl_us is None else now + r.ttl_us,
            }
            for r in puts
        ],
    )
    if index:
        _replace_vectors(conn, t, puts, pgvector, sealer)


def _json_text(row: PutRow) -> str:
    return row.text if row.text is not None else json.dumps(row.value, ensure_ascii=False)


def _replace_vectors(
    conn: Session,
    t: Tables,
    puts: list[PutRow],
    pgvector: bool,
    sealer: Sealer | None = None,
) -> None:
    ids = _ids(conn, t, [(r.ns, r.key) for r in puts])
    targets = [t.store_vectors, *([pgvector_table(t)] if pgvector else [])]
    id_list = list(ids.values())
    for table in targets:
        stmt = _cached(
            ("unvector", t.key, table.name),
            lambda table=table: sa.delete(table).where(  # type: ignore[misc]
                table.c.item_id.in_(sa.bindparam("ids", expanding=True))
            ),
        )
        for i in range(0, len(id_list), CHUNK):
            conn.execute(stmt, {"ids": id_list[i : i + CHUNK]})
    vectors: list[dict[str, Any]] = [
        {"item_id": ids[(r.ns, r.key)], "field": f, "ns": r.ns, "embedding": blob, "norm": norm}
        for r in puts
        for f, blob, norm in r.vectors
    ]
    if not vectors:
        return
    if pgvector:  # pgvector's copy holds the vectors as given (unit vector times length)
        copies = [
            {
                "item_id": v["item_id"],
                "field": v["field"],
                "ns": v["ns"],
                "embedding": _raw(v["embedding"], v["norm"]),
            }
            for v in vectors
        ]
    if sealer is not None:
        for v in vectors:
            v["embedding"] = sealer.seal_vector(v["ns"], v["item_id"], v["field"], v["embedding"])
    conn.execute(sa.insert(t.store_vectors), vectors)
    if pgvector:
        conn.execute(sa.insert(pgvector_table(t)), copies)


def _raw(blob: bytes, norm: float | None) -> list[float]:
    """A vector as given, from its stored unit vector and length (float32)."""
    unit_vector = from_blob(bytes(blob))
    scaled = unit_vector if norm is None else unit_vector * np.float32(norm)
    return scaled.astype(np.float32).tolist()  # type: ignore[no-any-return]


def sweep_expired(conn: Connection, t: Tables, now: int) -> int:
    """Delete items whose TTL lapsed (their vectors go with them); return how many."""
    result = conn.execute(
        sa.delete(t.store_items).where(
            t.store_items.c.expires_at.is_not(None), t.store_items.c.expires_at <= now
        )
    )
    return int(result.rowcount or 0)


# -- pgvector (PostgreSQL with the ``vector`` extension) ----------------------------------------


class Vector(UserDefinedType[list[float]]):
    """pgvector's ``vector`` type, or ``halfvec`` (``dims``: fixed dimension, else none), bound
    from a list of floats."""

    cache_ok = True

    def __init__(self, dims: int | None = None, kind: str = "vector") -> None:
        if kind not in ("vector", "halfvec"):
            raise ValueError(f"vector type: 'vector' or 'halfvec', got {kind!r}")
        self.dims = dims
        self.kind = kind

    def get_col_spec(self, **_: Any) -> str:
        return self.kind if self.dims is None else f"{self.kind}({int(self.dims)})"

    def bind_processor(self, dialect: Any) -> Any:
        return lambda value: None if value is None else "[" + ",".join(map(repr, value)) + "]"

    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.cast(bindvalue, self)


_pg_tables: dict[tuple[str, str | None], sa.Table] = {}


def pgvector_table(t: Tables) -> sa.Table:
    """The PostgreSQL-only copy of the vectors as pgvector values (own MetaData)."""
    table = _pg_tables.get(t.key)
    if table is None:
        table = _pg_tables[t.key] = sa.Table(
            f"{t.prefix}store_pgvectors",
            sa.MetaData(schema=t.schema),
            sa.Column(
                "item_id",
                sa.BigInteger,
                sa.ForeignKey(t.store_items.c.id, ondelete="CASCADE"),
                primary_key=True,
            ),
            sa.Column("field", sa.String(255), primary_key=True),
            sa.Column("embedding", Vector(), nullable=False),
            # the item's namespace: a search under a prefix ranks its vectors without reading
            # the items (added to tables made before it, see enable_pgvector)
            sa.Column("ns", NamespacePath, nullable=False),
            sa.Index(f"{t.prefix}store_pgvectors_ns_ix", "ns"),
        )
    return table


def enable_pgvector(conn: Connection, t: Tables, ann: ANN | None = None) -> bool:
    """On PostgreSQL: if the ``vector`` extension is installed (in a schema on the search path),
    or available and this role may create it, make sure the pgvector table exists (filled from
    the stored vectors), with the index of ``ann`` if given, and return True; else False (the
    application ranks then).

    Raises:
        ValueError: ``ann`` has ``vector_type`` ``"halfvec"`` and the server's pgvector is
            older than 0.7, which introduced it.
    """
    if conn.dialect.name != "postgresql":
        return False
    installed = conn.execute(
        sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    ).scalar()
    if not installed:
        available = conn.execute(
            sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        ).scalar()
        if not available:
            return False
        try:
            with conn.begin_nested():
                conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        except sa.exc.DBAPIError:
            return False
    if conn.execute(sa.text("SELECT to_regtype('vector')")).scalar() is None:
        # installed in a schema that is not on this connection's search_path: its type and
        # operators cannot be named unqualified, so rank in the application
        return False
    if ann is not None and ann.vector_type == "halfvec":
        _check_halfvec(conn)
    table = pgvector_table(t)
    if not sa.inspect(conn).has_table(table.name, schema=t.schema):
        table.create(conn)
        rows = conn.execute(sa.select(t.store_vectors)).all()
        if rows:
            conn.execute(
                sa.insert(table),
                [
                    {
                        "item_id": r.item_id,
                        "field": r.field,
                        "ns": r.ns,
                        "embedding": _raw(r.embedding, r.norm),
                    }
                    for r in rows
                ],
            )
    else:
        upgrade_pgvector(conn, t)
    if ann is not None:
        ann_index(t, ann).create(conn, checkfirst=True)
    return True


HALFVEC_SINCE = (0, 7)


def _check_halfvec(conn: Connection) -> None:
    version = conn.execute(
        sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    ).scalar()
    parts = tuple(int(p) for p in re.findall(r"\d+", str(version))[:2])
    if parts < HALFVEC_SINCE:
        raise ValueError(
            f"index: 'ann_index_config' vector_type 'halfvec' needs pgvector 0.7 or later; this "
            f"server has pgvector {version} (ALTER EXTENSION vector UPDATE after upgrading it, "
            "or use vector_type 'vector', or pgvector=False to rank in the application)"
        )


def upgrade_pgvector(conn: Connection, t: Tables) -> bool:
    """Bring the pgvector table (if this PostgreSQL database has one) up to date, as its first
    use by a store would; True if it needed it. For ``langmem-sqlite migrate``, so that the
    slow part (HNSW indexes built again) can run at a chosen time.

    Two upgrades: tables made before the ``ns`` column get it (:func:`_add_pgvector_ns`), and
    the HNSW indexes made when the table held unit vectors ranked by inner product
    (``<table>_hnsw<dims>``) are replaced by the same index for cosine distance, which ranks
    the vectors as given."""
    if conn.dialect.name != "postgresql":
        return False
    table = pgvector_table(t)
    if not sa.inspect(conn).has_table(table.name, schema=t.schema):
        return False
    if _has_ns(conn, table) and not _legacy_indexes(conn, t, table):
        return False
    preparer = conn.dialect.identifier_preparer
    conn.execute(sa.text(f"LOCK TABLE {preparer.format_table(table)} IN ACCESS EXCLUSIVE MODE"))
    legacy = _legacy_indexes(conn, t, table)  # again, under the lock
    changed = False
    if not _has_ns(conn, table):
        changed = _add_pgvector_ns(conn, t, table, skip={name for name, *_ in legacy})
    schema = f"{preparer.quote_schema(t.schema)}." if t.schema else ""
    for name, dims, m, ef_construction in legacy:
        logger.warning("upgrading %s: building its HNSW index for cosine distance again", name)
        conn.execute(sa.text(f"DROP INDEX IF EXISTS {schema}{preparer.quote(name)}"))
        ann = ANN("hnsw", dims, m=m, ef_construction=ef_construction)
        ann_index(t, ann).create(conn, checkfirst=True)
        changed = True
    return changed


def _legacy_indexes(
    conn: Connection, t: Tables, table: sa.Table
) -> list[tuple[str, int, int, int]]:
    """``(name, dims, m, ef_construction)`` of the table's HNSW indexes made for unit vectors
    and inner products (named ``<table>_hnsw<dims>``)."""
    name = conn.dialect.identifier_preparer.format_table(table)
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, c.reloptions FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
            "WHERE i.indrelid = to_regclass(:name) AND a.amname = 'hnsw'"
        ),
        {"name": name},
    ).all()
    out = []
    pattern = re.compile(re.escape(table.name) + r"_hnsw(\d+)$")
    for index, options in rows:
        found = pattern.match(index)
        if found is None:
            continue
        settings = dict(o.split("=", 1) for o in options or [])
        m, ef = int(settings.get("m", 16)), int(settings.get("ef_construction", 64))
        out.append((index, int(found.group(1)), m, ef))
    return out


def _has_ns(conn: Connection, table: sa.Table) -> bool:
    """Whether the pgvector table has its ``ns`` column (tables made before it have not)."""
    name = conn.dialect.identifier_preparer.format_table(table)
    found = conn.execute(
        sa.text(
            "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(:name) "
            "AND attname = 'ns' AND NOT attisdropped"
        ),
        {"name": name},
    ).scalar()
    return found is not None


def _add_pgvector_ns(
    conn: Connection, t: Tables, table: sa.Table, skip: set[str] | None = None
) -> bool:
    """Upgrade a pgvector table made before it had the ``ns`` column: add it and fill it from
    the items, in the caller's transaction. The table is locked first (a concurrent upgrade
    waits, then finds it done). Its HNSW indexes are dropped before the rows are rewritten
    and built again afterwards, as they were defined (updating 100,000 rows under the
    index took 93 s; the rewrite takes 0.75 s, a new index 16 to 33 s with 256 MB of
    ``maintenance_work_mem``, about 80 s with the default 64 MB)."""
    preparer = conn.dialect.identifier_preparer
    name = preparer.format_table(table)
    conn.execute(sa.text(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE"))
    if _has_ns(conn, table):
        return False  # upgraded meanwhile
    # the HNSW indexes as the server defines them (its own CREATE INDEX text), to build again
    hnsw = conn.execute(
        sa.text(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
            "WHERE i.indrelid = to_regclass(:name) AND a.amname = 'hnsw'"
        ),
        {"name": name},
    ).all()
    # (those to replace are dropped, not built again: see upgrade_pgvector)
    rebuild = [(index, sql) for index, sql in hnsw if index not in (skip or ())]
    schema = f"{preparer.quote_schema(t.schema)}." if t.schema else ""
    logger.warning(
        "upgrading %s: adding its namespace column%s",
        name,
        f" and building its {len(rebuild)} HNSW index(es) again (minutes for large tables)"
        if rebuild
        else "",
    )
    for index, _ in hnsw:
        conn.execute(sa.text(f"DROP INDEX {schema}{preparer.quote(index)}"))
    ns_type = table.c.ns.type.compile(dialect=conn.dialect)
    conn.execute(sa.text(f"ALTER TABLE {name} ADD COLUMN ns {ns_type}"))
    items = t.store_items
    conn.execute(sa.update(table).where(table.c.item_id == items.c.id).values(ns=items.c.ns))
    conn.execute(sa.text(f"ALTER TABLE {name} ALTER COLUMN ns SET NOT NULL"))
    for index in table.indexes:
        if "ns" in index.columns:
            index.create(conn)
    for _, definition in rebuild:
        conn.exec_driver_sql(definition)
    return True


_indexes: dict[tuple[Any, ...], sa.Index] = {}
_OPS = {"cosine": "cosine_ops", "inner_product": "ip_ops", "l2": "l2_ops"}
_SHORT = {"cosine": "cos", "inner_product": "ip", "l2": "l2"}


def ann_index_name(t: Tables, ann: ANN) -> str:
    """The name of the index of ``ann`` on the pgvector table (at most 63 characters)."""
    kind = "hnsw" if ann.kind == "hnsw" else "ivf"
    half = "h" if ann.vector_type == "halfvec" else ""
    name = f"{pgvector_table(t).name}_{kind}{half}{ann.dims}_{_SHORT[ann.distance]}"
    if len(name) > 63:
        name = f"{name[:54]}_{zlib.crc32(name.encode()):08x}"
    return name


def ann_index(t: Tables, ann: ANN) -> sa.Index:
    """The approximate index of the pgvector table for ``ann``: an HNSW or IVFFlat expression
    index on ``embedding::vector(dims)`` (or ``halfvec(dims)``) with the operator class of its
    distance, as :func:`_pg_ranking` orders by it."""
    key = (t.key, ann)  # every setting: another index of another name, or another m...
    index = _indexes.get(key)
    if index is None:
        table = pgvector_table(t)
        fixed = sa.cast(table.c.embedding, Vector(ann.dims, ann.vector_type))
        if ann.kind == "hnsw":
            settings: dict[str, int] = {"m": ann.m, "ef_construction": ann.ef_construction}
        else:
            settings = {"lists": ann.lists} if ann.lists is not None else {}
        index = _indexes[key] = sa.Index(
            ann_index_name(t, ann),
            fixed.label("embedding_fixed"),
            postgresql_using=ann.kind,
            postgresql_with=settings,
            postgresql_ops={"embedding_fixed": f"{ann.vector_type}_{_OPS[ann.distance]}"},
        )
    return index
