"""Optional encryption at rest (AES-GCM from pycryptodome, the package's `encryption` extra).

With an `encryption_key`, [`ConversationStore`][langmem_sqlite.ConversationStore] stores message
bodies, titles and summaries as ciphertext (ids, types, token counts and times stay readable),
and [`SQLStore`][langmem_sqlite.SQLStore] its item values and embeddings. Each value is sealed
to its session (or item): a row copied elsewhere fails authentication.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

__all__ = ["ENCRYPTED_PREFIX", "MessageCipher", "resolve_cipher"]

ENCRYPTED_PREFIX = "lmenc1:"
"""Marks an encrypted stored value: `lmenc1:` + base64(nonce, tag, ciphertext)."""

_NONCE = 12
_TAG = 16
_UNREADABLE = (
    "stored value cannot be decrypted (wrong key, or the row was tampered with or moved to "
    "another session or key)"
)


class MessageCipher:
    """AES-GCM with a 16, 24 or 32 byte key, sealing text to a context (the session).

    Args:
        key: the key, `bytes` or a `str` whose UTF-8 encoding is 16, 24 or 32 bytes long
            (the same rule as LangGraph's `LANGGRAPH_AES_KEY`).
    """

    def __init__(self, key: bytes | str) -> None:
        if isinstance(key, str):
            key = key.encode("utf-8")
        if not isinstance(key, bytes | bytearray):
            raise TypeError(f"encryption_key: expected bytes or str, got {type(key).__name__}")
        if len(key) not in (16, 24, 32):
            raise ValueError(f"encryption_key: must be 16, 24 or 32 bytes long, got {len(key)}")
        try:
            from Crypto.Cipher import AES
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError(
                'encryption needs pycryptodome: the package\'s "encryption" extra '
                '(pip install ".[encryption]" in its checkout)'
            ) from None
        from Crypto.Random import get_random_bytes

        self._aes: Any = AES
        self._random = get_random_bytes
        self._key = bytes(key)

    def encrypt(self, text: str, context: bytes) -> str:
        """Seal `text` to `context`; return the stored form (ASCII)."""
        sealed = self.encrypt_bytes(text.encode("utf-8", "surrogatepass"), context)
        return ENCRYPTED_PREFIX + base64.b64encode(sealed).decode("ascii")

    def encrypt_bytes(self, data: bytes, context: bytes) -> bytes:
        """Seal `data` to `context`: nonce, tag and ciphertext (for binary columns)."""
        aes = self._aes.new(self._key, self._aes.MODE_GCM, nonce=self._random(_NONCE))
        aes.update(context)
        sealed, tag = aes.encrypt_and_digest(bytes(data))
        return bytes(aes.nonce + tag + sealed)

    def decrypt_bytes(self, stored: bytes, context: bytes) -> bytes:
        """Open bytes sealed by [`encrypt_bytes`][langmem_sqlite.crypto.MessageCipher.encrypt_bytes]
        with the same `context`.

        Raises:
            ValueError: wrong key, wrong context or tampered data.
        """
        raw = bytes(stored)
        try:
            if len(raw) < _NONCE + _TAG:
                raise ValueError("too short")
            aes = self._aes.new(self._key, self._aes.MODE_GCM, nonce=raw[:_NONCE])
            aes.update(context)
            return bytes(aes.decrypt_and_verify(raw[_NONCE + _TAG :], raw[_NONCE : _NONCE + _TAG]))
        except ValueError as e:
            raise ValueError(_UNREADABLE) from e

    def decrypt(self, stored: str, context: bytes) -> str:
        """Open a value sealed by [`encrypt`][langmem_sqlite.crypto.MessageCipher.encrypt] with the
        same `context`.

        Raises:
            ValueError: not an encrypted value, wrong key, wrong context or tampered data.
        """
        if not is_encrypted(stored):
            raise ValueError("stored value is not encrypted, but this store has an encryption key")
        try:
            raw = base64.b64decode(stored[len(ENCRYPTED_PREFIX) :], validate=True)
            return self.decrypt_bytes(raw, context).decode("utf-8", "surrogatepass")
        except (binascii.Error, UnicodeDecodeError) as e:
            raise ValueError(_UNREADABLE) from e


def is_encrypted(value: Any) -> bool:
    """Whether a stored value is in the encrypted form."""
    return isinstance(value, str) and value.startswith(ENCRYPTED_PREFIX)


def resolve_cipher(
    encryption_key: bytes | str | None = None, cipher: MessageCipher | None = None
) -> MessageCipher | None:
    """The cipher for `encryption_key=` or `cipher=` (at most one), or `None`."""
    if encryption_key is not None and cipher is not None:
        raise ValueError("encryption_key: give either encryption_key or cipher, not both")
    if cipher is not None:
        if not isinstance(cipher, MessageCipher):
            raise TypeError(f"cipher: expected a MessageCipher, got {type(cipher).__name__}")
        return cipher
    return None if encryption_key is None else MessageCipher(encryption_key)
