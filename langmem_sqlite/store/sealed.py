"""Encryption at rest of the long-term store: item values and their embeddings.

With an `encryption_key` (or a [`MessageCipher`][langmem_sqlite.MessageCipher]),
[`SQLStore`][langmem_sqlite.SQLStore] stores each item's value as the AES-GCM ciphertext of its JSON
(a JSON string `"lmenc1:..."` in the value column), sealed to the item's namespace and key, and
each embedding as the ciphertext of its float32 bytes, sealed to the namespace, item id and
field: a row copied to another item fails authentication instead of being read there. The key
rules are those of the chat history's [`MessageCipher`][langmem_sqlite.MessageCipher].

What stays readable: namespaces and keys (they index the rows), the times, TTLs, and how many
vectors an item has. What the database can no longer do over the values, and how the store
answers instead (same results, other costs):

* **filters**: evaluated in Python on the decrypted values, reading the items under the
  namespace prefix newest first until `offset + limit` match (a filter matching few of many
  items reads and decrypts many);
* **vector search**: ranked exactly in Python after decrypting every vector under the prefix
  (pgvector is not used: its copy of the vectors would be plaintext), so a search costs a
  decryption per stored vector under the prefix.
"""

from __future__ import annotations

import json
from typing import Any

from ..crypto import MessageCipher, is_encrypted

__all__ = ["Sealer"]

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
        return (
            _CONTEXT
            + b"vector\x00"
            + ns.encode("utf-8", "surrogatepass")
            + b"\x00"
            + str(item_id).encode()
            + b"\x00"
            + field.encode("utf-8")
        )


def plain_value(key: str, stored: Any) -> dict[str, Any]:
    """A stored value read by a store without a key (`ValueError` if it is encrypted)."""
    if isinstance(stored, str):
        if is_encrypted(stored):
            raise ValueError(f"stored value of {key!r} is encrypted: give the store its key")
        stored = json.loads(stored)  # MySQL/MariaDB hand JSON back as text
        if is_encrypted(stored):
            raise ValueError(f"stored value of {key!r} is encrypted: give the store its key")
    return stored  # type: ignore[no-any-return]
