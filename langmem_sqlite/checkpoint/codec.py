"""Checkpoint values to stored bytes and back: the saver's serializer, then zlib (a `+z`
suffix on the stored type) when that saves a tenth. Decompression stops at `MAX_VALUE_BYTES`.
"""

from __future__ import annotations

import zlib
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

__all__ = ["MAX_VALUE_BYTES", "CheckpointEncryptionError", "dumps", "loads"]


class CheckpointEncryptionError(ValueError):
    """A stored checkpoint value that the saver's `EncryptedSerializer` did not write: it is
    stored unencrypted, or its key cannot decrypt it (another key, or altered bytes).

    Raised by [`SQLSaver`][langmem_sqlite.SQLSaver] reads with `encrypted_only` (the default
    with an `EncryptedSerializer`)."""


_Z = "+z"
_MIN_COMPRESS = 64
MAX_VALUE_BYTES = 2**31
"""Largest value a compressed row may expand to (2 GiB)."""

try:  # LangGraph's own msgpack hooks, so that the check packs what the serializer packs
    from langgraph.checkpoint.serde.jsonplus import _msgpack_default, _option

    _STRICT: int | None = _option & ~ormsgpack.OPT_REPLACE_SURROGATES
except ImportError:  # pragma: no cover - a LangGraph without these hooks: no check
    _STRICT = None

_OPAQUE = ("null", "bytes", "bytearray")


def dumps(serde: SerializerProtocol, value: Any, what: str) -> tuple[str, bytes]:
    """`serde.dumps_typed(value)`, compressed when worth it; refusing lone surrogates.

    Raises:
        ValueError: a string in `value` holds a lone surrogate (`what` names the value).
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
    if len(data) >= _MIN_COMPRESS and type_ != "null":
        packed = zlib.compress(data)
        if len(packed) * 10 <= len(data) * 9:
            return type_ + _Z, packed
    return type_, data


def _inflate(type_: str, data: Any) -> bytes:
    inflate = zlib.decompressobj()
    try:
        out = inflate.decompress(data, MAX_VALUE_BYTES)
    except zlib.error as e:
        raise ValueError(f"checkpoint value of type {type_!r}: damaged compressed data") from e
    if not inflate.eof or inflate.unused_data:
        raise ValueError(
            f"checkpoint value of type {type_!r}: damaged compressed data, or a value over "
            f"{MAX_VALUE_BYTES} bytes"
        )
    return out


def loads(serde: SerializerProtocol, type_: str, data: Any, *, encrypted_only: bool = False) -> Any:
    """The value stored as `(type_, data)` by `dumps`.

    `encrypted_only` (with an `EncryptedSerializer`): refuse a value it did not write.

    Raises:
        ValueError: `data` is marked compressed but is not valid zlib data (a damaged row).
        CheckpointEncryptionError: `encrypted_only`, and the value is stored unencrypted or
            cannot be decrypted with the serializer's key.
    """
    if type_.endswith(_Z):
        data, type_ = _inflate(type_, data), type_[: -len(_Z)]
    if encrypted_only and isinstance(serde, EncryptedSerializer):
        return _decrypt_loads(serde, type_, bytes(data))
    return serde.loads_typed((type_, bytes(data)))


def _decrypt_loads(serde: EncryptedSerializer, type_: str, data: bytes) -> Any:
    """`serde.loads_typed` of a value it must have encrypted (`"<type>+<cipher>"`)."""
    inner, plus, cipher = type_.partition("+")
    if not plus:
        raise CheckpointEncryptionError(
            f"checkpoint value stored unencrypted (type {type_!r}): not written under this "
            "saver's key; refused (encrypted_only=False reads rows written before encryption "
            "was turned on)"
        )
    try:
        plaintext = serde.cipher.decrypt(cipher, data)
    except Exception as e:
        raise CheckpointEncryptionError(
            f"checkpoint value of type {type_!r} cannot be decrypted with this saver's key "
            "(written under another key, or altered)"
        ) from e
    return serde.serde.loads_typed((inner, plaintext))
