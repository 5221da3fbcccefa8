"""Search filters in SQL: each leaf condition becomes a SQL condition that never rejects an item
`filters.matches` accepts, flagged exact when it never accepts more. An exact filter lets the
database apply LIMIT/OFFSET; otherwise candidates are re-checked in Python. Values are bound as
parameters `f0`, `f1`..."""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql

from ..engine.schema import Tables
from ..engine.unit import Unit
from . import namespaces
from .filters import is_finite_json, is_number, is_operator_dict
from .items import StoreSQL, not_lapsed, store_sql, within_prefix
from .sealed import Sealer


@dataclass(frozen=True)
class SearchQuery:
    """A validated search."""

    prefix: tuple[str, ...]
    filter: dict[str, Any] | None
    limit: int
    offset: int
    omit_expired: bool
    sealer: Sealer | None = field(default=None, compare=False)  # filters then run in Python
    leaves: tuple[tuple[tuple[str, ...], str, Any], ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "leaves", tuple(_conditions(self.filter or {})))


def _conditions(filter: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[Any]:
    """`(path, op, operand)` for each leaf condition of a validated filter."""
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
"""From this size on, integers and floats no longer meet one for one: compared loosely in SQL
and re-checked in Python."""


def _big(v: Any) -> bool:
    """Whether `v` is a finite number from `_EXACT` on (compared loosely, re-checked)."""
    return is_number(v) and math.isfinite(v) and abs(v) >= _EXACT


def _nonfinite(op: str, v: float) -> Pushed:
    """A NaN or infinite operand, by Python's rule (stored values are finite)."""
    if op == "$ne":
        return None, True  # differs from every stored value (and from a missing one)
    if math.isnan(v) or op == "$eq":
        return sa.false(), True
    if (v > 0) == (op in ("$gt", "$gte")):
        return sa.false(), True  # above +inf, below -inf: nothing
    return None, False  # below +inf, above -inf: every number


def _dotted(path: tuple[str, ...]) -> list[int]:
    """Positions of the path's names that hold a dot (read literally first, see filters)."""
    return [i for i, name in enumerate(path) if "." in name]


def _pg_at(doc: Any, path: tuple[str, ...]) -> Any:
    """The jsonb at `path` by `filters.lookup`'s rule."""
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
    if _big(v):  # integers and floats meet loosely there (see _EXACT): in Python
        return None, False
    # a jsonb parameter (psycopg sends it typed): no text-to-jsonb cast per row
    operand = sa.bindparam(name, type_=postgresql.JSONB)
    if op == "$eq":
        return at.op("=")(operand), True
    if op in _RANGES and is_number(v):
        return sa.and_(at.op(_SQL_OP[op])(operand), sa.func.jsonb_typeof(at) == "number"), True
    return None, False


_LABEL = re.compile(r'^[^"\\\x00-\x1f]{1,200}$')
"""A name that a quoted JSON path label can hold (SQLite's and MySQL's `$."name"`)."""


def _json_path(path: tuple[str, ...]) -> str | None:
    if not all(_LABEL.match(p) for p in path):
        return None
    return "$" + "".join(f'."{p}"' for p in path)


def _sqlite_at(t: Tables, path: tuple[str, ...]) -> tuple[Any, Any] | None:
    """SQLite's `(json_extract, json_type)` at `path` by `filters.lookup`'s rule, if expressible."""
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
    if _big(v):
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


_BUILDERS = {"jsonb": _pg_condition, "json1": _sqlite_condition, "json_value": _mysql_condition}
"""The filter conditions of each kind of `StoreSQL.json`."""


def prefilter(sql: StoreSQL, t: Tables, q: SearchQuery) -> tuple[list[Any], bool]:
    """SQL conditions implied by `q.filter`, and whether they are exactly the filter."""
    if q.sealer is not None:  # ciphertext: the filter runs in Python only
        return [], not q.filter
    make = _BUILDERS[sql.json]
    out, exact = [], True
    for i, (path, op, operand) in enumerate(q.leaves):
        if isinstance(operand, float) and not math.isfinite(operand):
            cond, is_exact = _nonfinite(op, operand)
        elif not is_finite_json(operand):
            cond, is_exact = None, False
        else:
            cond, is_exact = make(t, path, op, operand, f"f{i}")
        if cond is not None:
            out.append(cond)
        exact = exact and is_exact
    return out, exact


def search_params(unit: Unit, q: SearchQuery, now: int) -> dict[str, Any]:
    """Bound values for the statements built from `q` (each ignores those it does not use)."""
    sql = store_sql(unit.connection.dialect.name)
    params: dict[str, Any] = {"now": now}
    bounds = namespaces.prefix_range(q.prefix)
    if bounds is not None:
        params["lo"], params["hi"] = bounds
    for i, (_, _, v) in enumerate(q.leaves):
        params[f"f{i}"] = sql.number(v) if is_number(v) else v
    return params


def _kind(v: Any) -> Hashable:
    """What the SQL of a filter condition depends on in its operand (the value is bound)."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        return "str", v.startswith(("[", "{"))
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else v
    if is_number(v):
        return "big" if _big(v) else type(v).__name__
    return "json", is_finite_json(v)


def search_shape(q: SearchQuery) -> Hashable:
    """What the statements of a search depend on: queries of one shape share them."""
    leaves = tuple((path, op, _kind(v)) for path, op, v in q.leaves)
    return bool(q.prefix), q.omit_expired, q.sealer is not None, leaves


def search_where(unit: Unit, t: Tables, q: SearchQuery) -> tuple[tuple[Any, ...], bool]:
    """The conditions of a search (prefix, not lapsed, filter) and whether they are exact."""

    def build() -> tuple[tuple[Any, ...], bool]:
        sql = store_sql(unit.connection.dialect.name)
        conds, exact = prefilter(sql, t, q)
        live = not_lapsed(t, q.omit_expired, sql.expiry_as_or)
        return (within_prefix(t.store_items.c.ns, q.prefix), live, *conds), exact

    return unit.statement(("where", t.key, search_shape(q)), build)  # type: ignore[no-any-return]
