"""Checks on user input, shared by every public API, raised before any write."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from .defaults import INT64_MAX
from .engine.schema import ID_MAX_CHARS

IdLike = str | int | uuid.UUID
"""What users may pass as a user, session or thread id; stored as its `str`."""


def check_id(value: Any, name: str) -> str:
    """An id (str, int or UUID, not `bool`) as a non-blank `str` passing `check_text`."""
    if value is None:
        raise ValueError(f"{name}: must not be None")
    if isinstance(value, bool) or not isinstance(value, str | int | uuid.UUID):
        raise TypeError(f"{name}: expected str, int or UUID, got {type(value).__name__}")
    text = str(value)
    if not text.strip():
        raise ValueError(f"{name}: must not be empty")
    return check_text(text, name, max_chars=ID_MAX_CHARS)


def check_text(value: Any, name: str, *, max_chars: int | None = None) -> str:
    """A `str` every database stores as text: no NUL, no lone surrogates, at most `max_chars`."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected str, got {type(value).__name__}")
    if max_chars is not None and len(value) > max_chars:
        raise ValueError(f"{name}: longer than {max_chars} characters")
    if "\x00" in value:
        raise ValueError(f"{name}: must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name}: not valid Unicode text (lone surrogate)") from e
    return value


def check_version(value: Any, name: str) -> str:
    """A version (str, int or finite float, not `bool`) as the text stored for it, of at most
    `ID_MAX_CHARS` characters passing `check_text`."""
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected str, int or finite float, got {value!r}")
    if not isinstance(value, str | int | float):
        raise TypeError(f"{name}: expected str, int or float, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        # NaN equals nothing, itself included: a channel of that version would never be seen
        raise ValueError(f"{name}: expected str, int or finite float, got {value!r}")
    text = check_text(str(value), name)
    if len(text) > ID_MAX_CHARS:
        raise ValueError(f"{name}: longer than {ID_MAX_CHARS} characters")
    return text


def check_optional_id(value: Any, name: str) -> str:
    """Like `check_id`, but `None` means "no user" and is stored as `""`."""
    return "" if value is None else check_id(value, name)


def _range(low: float, high: float) -> str:
    return f"from {low:,} to {high:,}".replace(",", "_")


def _refuse(value: Any, name: str, expected: str) -> NoReturn:
    """A `ValueError` for a number (`bool` included) out of its range, else a `TypeError`."""
    if isinstance(value, bool | int | float):
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    raise TypeError(f"{name}: expected {expected}, got {type(value).__name__}")


def check_int(value: Any, name: str, *, low: int = 0, high: int = INT64_MAX) -> int:
    """An `int` from `low` to `high`: any other number (`bool` and `float` included) is a
    `ValueError`, anything else a `TypeError`."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    _refuse(value, name, f"an int {_range(low, high)}")


def check_number(value: Any, name: str, *, low: float, high: float) -> float:
    """A finite `int` or `float` from `low` to `high`, as `float` (see `check_int`)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and math.isfinite(value) and low <= value <= high:
        return float(value)
    _refuse(value, name, f"a number {_range(low, high)}")


def check_positive(
    value: Any, name: str, *, allow_zero: bool = False, high: int = INT64_MAX
) -> int:
    """An `int` > 0 (or >= 0 with `allow_zero`) and at most `high`: see `check_int`."""
    return check_int(value, name, low=0 if allow_zero else 1, high=high)


def check_list(value: Any, name: str) -> list[Any]:
    """An iterable of items as a new `list`; a `str`, `bytes` or mapping is refused, not split."""
    if isinstance(value, str | bytes | bytearray | memoryview | Mapping) or not isinstance(
        value, Iterable
    ):
        hint = f" (for a single one, pass [{value!r}])" if isinstance(value, str) else ""
        raise TypeError(f"{name}: expected a list, got {type(value).__name__}{hint}")
    return list(value)
