"""Where the package's data lives when the caller names no database (a light module: the
command line reads it before loading anything else)."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_DATABASE", "default_connection"]

DEFAULT_DATABASE = "langmem.db"
"""The SQLite file used when no connection is given and `$LANGMEM_SQLITE_URL` is not set."""


def default_connection() -> str:
    """`$LANGMEM_SQLITE_URL` if set, else the SQLite file `langmem.db`."""
    return os.environ.get("LANGMEM_SQLITE_URL") or DEFAULT_DATABASE
