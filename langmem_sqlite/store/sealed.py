"""Encryption at rest of the store's item values and embeddings (AES-GCM): a value is sealed to
its namespace and key, a vector to its namespace, item id and field, so that a row copied to
another item fails authentication. Filters and vector search then run in Python."""

from __future__ import annotations

import json
from typing import Any

from ..crypto import MessageCipher, is_encrypted

_CONTEXT = b"langmem-store\x00"


class Sealer:
    """A store's cipher for item values and vectors."""

    def __init__(self, cipher: MessageCipher) -> None:
        self.cipher = cipher

    @staticmethod
    def _context(ns: str, key: str) -> bytes:
        return _CONTEXT + ns.encode("utf-8", "surrogatepass") + b"\x00" + key.encode("utf-8")

    def seal(self, ns: str, key: str, text: str) -> str:
        """The stored JSON text of a value's JSON `text` (a JSON string of ciphertext)."""
        return json.dumps(self.cipher.encrypt(text, self._context(ns, key)))

    def open(self, ns: str, key: str, stored: Any) -> dict[str, Any]:
        """The value of a stored one (`stored`: as the driver gives the value column)."""
        if isinstance(stored, str) and not is_encrypted(stored):
            stored = json.loads(stored)  # MySQL/MariaDB hand JSON back as text
        if not is_encrypted(stored):
            raise ValueError(
                f"stored value of {key!r} is not encrypted, but this store has an encryption key"
            )
        value = json.loads(self.cipher.decrypt(stored, self._context(ns, key)))
        if not isinstance(value, dict):
            raise ValueError(f"stored value of {key!r} is not an object")
        return value

    def seal_vector(self, ns: str, item_id: int, field: str, blob: bytes) -> bytes:
        """A vector's stored bytes."""
        return self.cipher.encrypt_bytes(blob, self._vector_context(ns, item_id, field))

    def open_vector(self, ns: str, item_id: int, field: str, stored: bytes) -> bytes:
        """The float32 bytes of a stored vector."""
        return self.cipher.decrypt_bytes(stored, self._vector_context(ns, item_id, field))

    @staticmethod
    def _vector_context(ns: str, item_id: int, field: str) -> bytes:
        parts = [ns.encode("utf-8", "surrogatepass"), str(item_id).encode(), field.encode()]
        return _CONTEXT + b"vector\x00" + b"\x00".join(parts)


def plain_value(key: str, stored: Any) -> dict[str, Any]:
    """A stored value read by a store without a key (`ValueError` if it is encrypted)."""
    if isinstance(stored, str) and not is_encrypted(stored):
        stored = json.loads(stored)  # MySQL/MariaDB hand JSON back as text
    if is_encrypted(stored):
        raise ValueError(f"stored value of {key!r} is encrypted: give the store its key")
    return stored  # type: ignore[no-any-return]
