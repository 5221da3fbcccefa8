"""Compatibility names for :mod:`langmem_sqlite.engine` (the execution layer)."""

from __future__ import annotations

from .engine.database import Database, DatabaseLike, Plan, Step, get_database
from .engine.dialects.postgresql import jsonb_dumps, jsonb_text
from .engine.dialects.sqlite import (
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_JOURNAL_SIZE_LIMIT,
    SQLITE_WAL_AUTOCHECKPOINT_PAGES,
)

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLITE_JOURNAL_SIZE_LIMIT",
    "SQLITE_WAL_AUTOCHECKPOINT_PAGES",
    "Database",
    "DatabaseLike",
    "Plan",
    "Step",
    "get_database",
    "jsonb_dumps",
    "jsonb_text",
]
