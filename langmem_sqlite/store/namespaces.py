"""Store namespaces as one order-preserving text column: each label followed by `\\x01`, with
`\\x01` and `\\x02` escaped by `\\x02`. Encoded texts sort like the tuples, and the namespaces
under a prefix form one contiguous range (`prefix_range`): an index range scan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.store.base import InvalidNamespaceError

from ..engine.schema import ID_MAX_CHARS, NAMESPACE_MAX_BYTES
from ..validation import check_text

_SEP = "\x01"
_ESC = "\x02"
_ENCODE = str.maketrans({_ESC: _ESC + _ESC, _SEP: _ESC + _SEP})


class NamespaceTypeError(InvalidNamespaceError, TypeError):
    """A namespace (or a label of it) is not of the right type."""


def check_namespace(
    namespace: Any, name: str = "namespace", *, allow_empty: bool = False
) -> tuple[str, ...]:
    """A namespace as a tuple of labels (`InvalidNamespaceError`, also a `TypeError` for a
    wrong type, if it is not a non-empty sequence of non-empty labels that the column holds)."""
    labels, _ = _checked(namespace, name, allow_empty)
    return labels


def encoded(namespace: Any, name: str = "namespace", *, allow_empty: bool = False) -> str:
    """The stored text of `check_namespace(namespace)`."""
    _, text = _checked(namespace, name, allow_empty)
    return text


def _checked(namespace: Any, name: str, allow_empty: bool) -> tuple[tuple[str, ...], str]:
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise NamespaceTypeError(
            f"{name}: expected a tuple of strings, got {type(namespace).__name__}"
        )
    labels = tuple(namespace)
    if not labels and not allow_empty:
        raise InvalidNamespaceError(f"{name}: must not be empty")
    for label in labels:
        if not isinstance(label, str):
            raise NamespaceTypeError(
                f"{name}: labels must be str, got {type(label).__name__} in {labels!r}"
            )
        if not label:
            raise InvalidNamespaceError(f"{name}: labels must not be empty, got {labels!r}")
        try:
            check_text(label, name, max_chars=ID_MAX_CHARS)
        except ValueError as e:
            raise InvalidNamespaceError(str(e)) from e
    text = encode(labels)
    if len(text.encode("utf-8")) > NAMESPACE_MAX_BYTES:
        raise InvalidNamespaceError(f"{name}: longer than {NAMESPACE_MAX_BYTES} bytes encoded")
    return labels, text


def encode(namespace: tuple[str, ...]) -> str:
    """The stored text of a (validated) namespace."""
    return "".join(label.translate(_ENCODE) + _SEP for label in namespace)


def decode(text: str) -> tuple[str, ...]:
    """The namespace tuple of a stored text."""
    if _ESC not in text:
        return tuple(text.split(_SEP)[:-1])
    labels: list[str] = []
    current: list[str] = []
    chars = iter(text)
    for ch in chars:
        if ch == _ESC:
            current.append(next(chars))
        elif ch == _SEP:
            labels.append("".join(current))
            current = []
        else:
            current.append(ch)
    return tuple(labels)


def prefix_range(prefix: tuple[str, ...]) -> tuple[str, str] | None:
    """`(low, high)`: a namespace starts with `prefix` iff `low <= ns < high` (None: no prefix)."""
    if not prefix:
        return None
    low = encode(prefix)
    return low, low[:-1] + _ESC
