"""Checkpoint metadata: the JSON copy of its scalar keys that lets SQL narrow a filter, and
the exact test, run in Python on the decoded metadata (the SQL may over-select, never drop a
match)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.sql.elements import ColumnElement

from ..engine.dialects import Rules, rules_class

_INT64 = 2**63
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_safe(value: Any) -> bool:
    """True for a value every database's JSON type stores as it is (a JSON scalar)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_INT64 <= value < _INT64
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):  # without NUL, and UTF-8 (no lone surrogate)
        return "\x00" not in value and _SURROGATE.search(value) is None
    return False


def json_copy(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar, JSON-safe keys of `metadata`."""
    return {k: v for k, v in metadata.items() if _json_key(k) and json_safe(v)}


def _json_key(key: Any) -> bool:
    return isinstance(key, str) and json_safe(key)


def check_filter(filter: Any, name: str = "filter") -> dict[str, Any]:
    """Validate a metadata filter: a mapping with `str` keys (`None` means no filter)."""
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise TypeError(f"{name}: expected a mapping of metadata key -> value")
    for key in filter:
        if not isinstance(key, str):
            raise TypeError(f"{name}: keys must be str, got {type(key).__name__}")
    return dict(filter)


def _sql_comparable(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and json_safe(value)


def prefilter(
    column: Any, filter: Mapping[str, Any], dialect: Rules | str
) -> list[ColumnElement[bool]]:
    """SQL conditions on the JSON copy `column` that every match of `filter` satisfies, made
    by `metadata_contains` of the rules (`dialect`: the rules, or a SQLAlchemy dialect name).
    Only str and 64-bit int values are compared in SQL; the conditions may over-select,
    `matches` then decides."""
    safe = {k: v for k, v in filter.items() if _json_key(k) and _sql_comparable(v)}
    if not safe:
        return []
    rules = dialect if isinstance(dialect, Rules) else rules_class(URL.create(dialect))
    return rules.metadata_contains(column, safe)


def matches(metadata: Mapping[str, Any] | None, filter: Mapping[str, Any]) -> bool:
    """Exact test: every filter key equals the metadata's value (as `InMemorySaver` does)."""
    md = metadata or {}
    return all(md.get(k) == v for k, v in filter.items())
