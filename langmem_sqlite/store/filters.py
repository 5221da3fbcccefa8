"""Search filters on item values: validation and the exact (Python) evaluation.

A filter maps a top-level field of the value to either a value (equality) or a dict of
operators: ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``. A plain dict without
operators matches a nested object field by field. :mod:`.sql` narrows candidates in the
database; :func:`matches` is the rule every returned item satisfies.

Equality is JSON equality: numbers compare by value (``1 == 1.0``), booleans only equal
booleans, lists element by element. Ordering operators compare two numbers or two strings
(code point order); any other pair does not match.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["OPERATORS", "check_filter", "json_equal", "matches"]

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_operator_dict(value: Any) -> bool:
    """Whether ``value`` is a dict of ``$`` operators (checked by :func:`check_filter`)."""
    return isinstance(value, Mapping) and any(str(k).startswith("$") for k in value)


def check_filter(filter: Any, name: str = "filter") -> dict[str, Any] | None:
    """Validate a search filter; ``None`` or ``{}`` means no filter.

    Raises:
        TypeError: not a dict, or a field name that is not a string.
        ValueError: an unknown ``$`` operator, operators mixed with plain fields, a NaN, or an
            ordering operator given something other than a number or a string.
    """
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
                    _is_number(operand) or isinstance(operand, str)
                ):
                    raise ValueError(f"{where}: {op} needs a number or a string, got {operand!r}")
                _check_value(operand, where)
        elif isinstance(condition, Mapping):
            check_filter(condition, where)
        else:
            _check_value(condition, where)
    return dict(filter) or None


def _check_value(value: Any, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: NaN and infinities cannot be matched")


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality (see the module docstring)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    return bool(a == b)


def _order(value: Any, op: str, operand: Any) -> bool:
    comparable = (_is_number(value) and _is_number(operand)) or (
        isinstance(value, str) and isinstance(operand, str)
    )
    if not comparable:
        return False
    if op == "$gt":
        return bool(value > operand)
    if op == "$gte":
        return bool(value >= operand)
    if op == "$lt":
        return bool(value < operand)
    return bool(value <= operand)


def _condition(value: Any, condition: Any) -> bool:
    if is_operator_dict(condition):
        for op, operand in condition.items():
            if op == "$eq":
                ok = json_equal(value, operand)
            elif op == "$ne":
                ok = not json_equal(value, operand)
            else:
                ok = _order(value, op, operand)
            if not ok:
                return False
        return True
    if isinstance(condition, Mapping):
        return isinstance(value, Mapping) and matches(value, condition)
    return json_equal(value, condition)


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value satisfies a (validated) filter."""
    if not filter:
        return True
    return all(_condition(value.get(field), cond) for field, cond in filter.items())
