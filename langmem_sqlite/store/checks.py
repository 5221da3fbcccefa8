"""Checks on what callers give the store (values, TTLs, pages, sweeper settings), raising an error
that names the parameter before anything is written."""

from __future__ import annotations

import json
import math
import threading
from typing import Any

from langgraph.store.base import InvalidNamespaceError, MatchCondition, TTLConfig

from ..validation import INT64_MAX, check_int, check_number
from . import namespaces

TTL_MAX_MINUTES = 100_000_000_000
"""The longest TTL, in minutes (about 190,000 years): its microseconds, added to any time of
this millennium, still fit in the signed 64-bit integer every database stores them as."""

SWEEP_MAX_MINUTES = 100_000_000
"""The longest sweep interval, in minutes (about 190 years; a thread waits at most
`threading.TIMEOUT_MAX` seconds, about 292 years on 64-bit systems)."""

PAGE_MAX = 2**31 - 1
"""The largest `limit` and `offset` of a search or namespace listing: their sum, and the
candidates a vector search ranks for it, stay within every database's `LIMIT`."""

_TTL_KEYS = frozenset({"refresh_on_read", "omit_expired", "default_ttl", "sweep_interval_minutes"})


def _minutes(value: Any, name: str, high: int) -> float:
    """A number of minutes above 0 and at most `high`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value) and 0 < value <= high:
            return float(value)
    elif not isinstance(value, bool):
        raise TypeError(f"{name}: expected minutes as a number, got {type(value).__name__}")
    raise ValueError(
        f"{name}: expected a number of minutes from 0 (excluded) to {high:_}, got {value!r}"
    )


def check_ttl_minutes(ttl: Any, name: str = "ttl") -> int | None:
    """A TTL in minutes as microseconds; `None` (never expires) stays `None`."""
    if ttl is None:
        return None
    return max(1, int(_minutes(ttl, name, TTL_MAX_MINUTES) * 60_000_000))


def check_sweep_minutes(minutes: Any, name: str = "sweep_interval_minutes") -> float:
    """A sweep interval in minutes (above 0, at most `SWEEP_MAX_MINUTES`), as seconds."""
    return _minutes(minutes, name, SWEEP_MAX_MINUTES) * 60


def check_timeout(timeout: Any, name: str = "timeout") -> float | None:
    """Seconds to wait (`None`: as long as it takes), from 0 to `threading.TIMEOUT_MAX`."""
    if timeout is None:
        return None
    return check_number(timeout, name, low=0, high=int(threading.TIMEOUT_MAX))


def check_page(value: Any, name: str) -> int:
    """A `limit` or `offset`: an int from 0 to `PAGE_MAX`."""
    return check_int(value, name, low=0, high=PAGE_MAX)


def check_max_depth(value: Any) -> int | None:
    """`max_depth` of a namespace listing: `None` (whole namespaces) or an int from 1."""
    return None if value is None else check_int(value, "max_depth", low=1, high=INT64_MAX)


def check_ttl_config(ttl: Any) -> TTLConfig | None:
    """A LangGraph `TTLConfig`: known keys only, minutes checked, flags `bool`."""
    if ttl is None:
        return None
    if not isinstance(ttl, dict):
        raise TypeError(f"ttl: expected a dict (TTLConfig), got {type(ttl).__name__}")
    unknown = set(ttl) - _TTL_KEYS
    if unknown:
        raise ValueError(f"ttl: unknown keys {sorted(unknown)}; known: {sorted(_TTL_KEYS)}")
    check_ttl_minutes(ttl.get("default_ttl"), "ttl['default_ttl']")
    if ttl.get("sweep_interval_minutes") is not None:
        check_sweep_minutes(ttl["sweep_interval_minutes"], "ttl['sweep_interval_minutes']")
    for flag in ("refresh_on_read", "omit_expired"):
        if flag in ttl and not isinstance(ttl[flag], bool):
            raise TypeError(f"ttl['{flag}']: expected a bool")
    return TTLConfig(**ttl)  # type: ignore[typeddict-item]


def check_value(value: Any, nul_ok: bool = True) -> tuple[dict[str, Any] | None, str | None]:
    """The value and its JSON text (`(None, None)` for a delete). `nul_ok=False` (PostgreSQL's
    `jsonb`) refuses a NUL character."""
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise TypeError(f"value: expected a dict (or None to delete), got {type(value).__name__}")
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except TypeError as e:
        raise TypeError(f"value: not JSON serializable: {e}") from e
    except UnicodeEncodeError as e:
        raise ValueError("value: strings must be valid Unicode (no lone surrogates)") from e
    except ValueError as e:
        raise ValueError(f"value: {e} (NaN and infinities are not JSON)") from e
    except RecursionError as e:
        raise ValueError("value: nested too deeply to store") from e
    if not nul_ok and "\\u0000" in text:  # JSON spells NUL so (and a backslash-u text too)
        where = _nul_at(value, "value")
        if where is not None:
            raise ValueError(
                f"{where}: PostgreSQL cannot store the NUL character (\\x00) in JSON; "
                "remove it, or store the value encrypted (encryption_key)"
            )
    return value, text


def _nul_at(value: Any, where: str) -> str | None:
    """Where the first NUL character of a JSON value is, if any."""
    if isinstance(value, str):
        return where if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            if "\x00" in k:
                return f"{where}: key {k!r}"
            found = _nul_at(v, f"{where}[{k!r}]")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = _nul_at(v, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def check_match(condition: Any) -> MatchCondition:
    """A `MatchCondition` of a namespace listing (prefix or suffix, its path checked)."""
    if not isinstance(condition, MatchCondition):
        raise TypeError("match_conditions: expected MatchCondition objects")
    if condition.match_type not in ("prefix", "suffix"):
        raise ValueError(f"match_conditions: unsupported match_type {condition.match_type!r}")
    path = namespaces.check_namespace(condition.path, f"{condition.match_type}", allow_empty=True)
    return MatchCondition(condition.match_type, path)


def public_namespace(namespace: Any, name: str = "namespace", *, allow_empty: bool = True) -> None:
    """The checks of `batch` on a namespace, then what `BaseStore` refuses on top: labels with
    a period (`batch` stores them as they are)."""
    if "." in namespaces.encoded(namespace, name, allow_empty=allow_empty):
        raise InvalidNamespaceError(
            f"Invalid namespace {tuple(namespace)!r}: labels cannot contain periods ('.')"
        )
