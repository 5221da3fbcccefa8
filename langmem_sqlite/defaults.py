"""Defaults and limits shared by the command line (which loads this first) and the library."""

from __future__ import annotations

import os

DEFAULT_DATABASE = "langmem.db"
"""The SQLite file used when no connection is given and `$LANGMEM_SQLITE_URL` is not set."""

DEFAULT_PREFIX = "langmem_"
"""Table-name prefix used unless a `table_prefix` is given."""

INT64_MAX = 2**63 - 1
"""The largest integer every supported database stores (a signed 64-bit integer)."""

MAX_DAYS = 100_000_000
"""The largest `days` of a retention cutoff: in milliseconds below 2**53, so exact."""


def default_connection() -> str:
    """`$LANGMEM_SQLITE_URL` if set, else the SQLite file `langmem.db`."""
    return os.environ.get("LANGMEM_SQLITE_URL") or DEFAULT_DATABASE
