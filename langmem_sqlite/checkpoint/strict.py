"""Serialization that refuses what LangGraph's serializer would change silently.

LangGraph's ``JsonPlusSerializer`` packs with ``OPT_REPLACE_SURROGATES``: a string holding a lone
surrogate (``"a\\ud800b"``, e.g. from bytes decoded with ``surrogateescape``) is stored as
``"a?b"``, and the graph later reads a different value than it wrote. :func:`dumps` serializes
with the saver's serializer as usual and raises ``ValueError`` instead when a value would have
been altered that way: nothing is written, and the caller learns which value was at fault.

The check costs nothing for the common case: the plain serializer's output holds no ``?`` byte
unless a ``?`` was in the data. Otherwise (and for serializers whose output cannot be inspected,
such as ``EncryptedSerializer``) the value is packed once more without the replacement option.
"""

from __future__ import annotations

from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = ["dumps"]

try:  # LangGraph's own msgpack hooks, so that the check packs what the serializer packs
    from langgraph.checkpoint.serde.jsonplus import _msgpack_default, _option

    _STRICT: int | None = _option & ~ormsgpack.OPT_REPLACE_SURROGATES
except ImportError:  # pragma: no cover - a LangGraph without these hooks: no check
    _STRICT = None

_OPAQUE = ("null", "bytes", "bytearray")


def dumps(serde: SerializerProtocol, value: Any, what: str) -> tuple[str, bytes]:
    """``serde.dumps_typed(value)``, refusing lone surrogates in strings.

    Raises:
        ValueError: a string in ``value`` holds a lone surrogate (``what`` names the value).
    """
    type_, data = serde.dumps_typed(value)
    if _STRICT is not None and type_ not in _OPAQUE and (type_ != "msgpack" or b"?" in data):
        try:
            ormsgpack.packb(value, default=_msgpack_default, option=_STRICT)
        except ormsgpack.MsgpackEncodeError as e:
            if "surrogate" in str(e):
                raise ValueError(
                    f"{what}: a string holds a lone surrogate, which LangGraph's serializer "
                    "would store as '?'; encode such text first (e.g. with "
                    "errors='surrogateescape' turned into bytes, or 'replace')"
                ) from e
            # anything else the serializer handled its own way (e.g. a pickle fallback)
    return type_, data
