"""Search filters on item values: validation, and `matches`, the rule every returned item
satisfies.

A field maps to a value (equality), a dict of operators (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`,
`$lte`) or a plain dict matching a nested object. A dotted name is read as a key first, else one
object per dot (as `SqliteStore`). Equality is JSON equality (numbers by value, booleans only
equal booleans); ordering compares two numbers or two strings; NaN and infinities follow
Python's rule, as in `InMemoryStore`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def is_number(value: Any) -> bool:
    """Whether `value` is a JSON number: an `int` or `float`, not a `bool`."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_operator_dict(value: Any) -> bool:
    """Whether `value` is a dict of `$` operators (checked by `check_filter`)."""
    return isinstance(value, Mapping) and any(str(k).startswith("$") for k in value)


def check_filter(filter: Any, name: str = "filter") -> dict[str, Any] | None:
    """A validated search filter (`None` for `None` or `{}`)."""
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise TypeError(f"{name}: expected a dict, got {type(filter).__name__}")
    for field, condition in filter.items():
        if not isinstance(field, str):
            raise TypeError(f"{name}: field names must be str, got {type(field).__name__}")
        where = f"{name}[{field!r}]"
        if is_operator_dict(condition):
            for op, operand in condition.items():
                if op not in OPERATORS:
                    raise ValueError(
                        f"{where}: unsupported operator {op!r} (supported: "
                        f"{', '.join(sorted(OPERATORS))}); operators cannot be mixed with fields"
                    )
                if op not in ("$eq", "$ne") and not (
                    is_number(operand) or isinstance(operand, str)
                ):
                    raise ValueError(f"{where}: {op} needs a number or a string, got {operand!r}")
        elif isinstance(condition, Mapping):
            check_filter(condition, where)
    return dict(filter) or None


def lookup(value: Any, field: str) -> Any:
    """The value of `field` in an object (`None` if missing), by the dotted-name rule."""
    if not isinstance(value, Mapping):
        return None
    found = value.get(field, _MISSING)
    if found is not _MISSING:
        return found
    if "." not in field:
        return None
    for name in field.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


_MISSING = object()


def is_finite_json(value: Any) -> bool:
    """Whether `value` holds no NaN or infinity (JSON, and so the databases, cannot)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(is_finite_json(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(is_finite_json(v) for v in value)
    return True


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality (see the module docstring)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return bool(a == b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    return bool(a == b)


_ORDER = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _holds(value: Any, op: str, operand: Any) -> bool:
    """Whether `value` satisfies one operator."""
    if op == "$eq":
        return json_equal(value, operand)
    if op == "$ne":
        return not json_equal(value, operand)
    comparable = (is_number(value) and is_number(operand)) or (
        isinstance(value, str) and isinstance(operand, str)
    )
    return comparable and bool(_ORDER[op](value, operand))


def _condition(value: Any, condition: Any) -> bool:
    if is_operator_dict(condition):
        return all(_holds(value, op, operand) for op, operand in condition.items())
    if isinstance(condition, Mapping):
        return isinstance(value, Mapping) and matches(value, condition)
    return json_equal(value, condition)


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value satisfies a (validated) filter."""
    if not filter:
        return True
    return all(_condition(lookup(value, field), cond) for field, cond in filter.items())
