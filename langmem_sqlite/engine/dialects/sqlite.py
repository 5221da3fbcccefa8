"""SQLite: an embedded file (the default), or a private in-memory database."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from sqlalchemy import Table, event, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import StaticPool

from ..retry import Fault
from .base import Dialect, Transaction

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLITE_JOURNAL_SIZE_LIMIT",
    "SQLITE_WAL_AUTOCHECKPOINT_PAGES",
    "SQLiteDialect",
]

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite connection waits for another writer before giving up."""

SQLITE_WAL_AUTOCHECKPOINT_PAGES = 1000
"""Pages in the write-ahead log before a commit copies them into the database file (SQLite's
default): the log stays near 4 MB at most while a database is in use."""

SQLITE_JOURNAL_SIZE_LIMIT = 1024 * 1024
"""Bytes of write-ahead log left on disk when a checkpoint lets the log start over (the rest is
truncated): at rest, a database costs its file plus at most this much log (and the log goes
when the last connection to the file closes)."""

_SECURE_DELETE = {0: "OFF", 1: "ON", 2: "FAST"}
"""``PRAGMA secure_delete`` values as read -> as set."""

_CHECKPOINT_TRIES = 50
"""Times an erasure tries to empty the write-ahead log while readers keep it busy."""

_BUSY = (5, 6)
"""SQLite's primary result codes ``SQLITE_BUSY`` and ``SQLITE_LOCKED``."""


def _on_connect(dbapi_conn: Any, _record: Any) -> None:
    """Per-connection settings: WAL, busy timeout, NORMAL sync, foreign keys, the log's bounds.

    Also hands transaction control to this package (``isolation_level = None``): the seam
    and SQLAlchemy's ``begin`` event (:func:`_on_begin`) start transactions themselves, so
    that writers start with ``BEGIN IMMEDIATE``.
    """
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
    cur.execute(f"PRAGMA journal_size_limit = {SQLITE_JOURNAL_SIZE_LIMIT}")
    cur.execute("PRAGMA journal_mode")
    mode = str(cur.fetchone()[0]).lower()
    if mode not in ("wal", "memory"):
        cur.execute("PRAGMA journal_mode = WAL")
    cur.close()


def _own_transactions(dbapi_conn: Any) -> None:
    """Take transaction control back from ``sqlite3`` if a connection lost it: SQLAlchemy puts
    the driver's ``isolation_level`` back to ``""`` when a connection used with the
    ``AUTOCOMMIT`` option returns to the pool, and ``sqlite3`` would then open transactions of
    its own before writes."""
    if dbapi_conn.isolation_level is not None:
        dbapi_conn.isolation_level = None


def _on_begin(conn: Connection) -> None:
    """Start a SQLAlchemy ``Connection``'s transaction: ``BEGIN IMMEDIATE`` for writers.

    A deferred transaction that reads and then writes can fail with ``SQLITE_BUSY`` without
    waiting for ``busy_timeout``; taking the write lock up front makes writers queue instead.
    """
    options = conn.get_execution_options()
    _own_transactions(conn.connection.dbapi_connection)
    if options.get("isolation_level") == "AUTOCOMMIT":
        return  # e.g. VACUUM, which cannot run inside a transaction
    mode = "IMMEDIATE" if options.get("langmem_write") else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")


class SQLiteDialect(Dialect):
    """SQLite through the standard library's ``sqlite3`` (``aiosqlite`` for a caller's
    ``AsyncEngine``)."""

    names: ClassVar[tuple[str, ...]] = ("sqlite",)
    sync_twins: ClassVar[dict[str, str]] = {"sqlite+aiosqlite": "sqlite+pysqlite"}

    @classmethod
    def is_private(cls, url: URL) -> bool:
        return url.database in (None, "", ":memory:")

    @classmethod
    def file_path(cls, url: URL) -> str | None:
        return None if cls.is_private(url) else url.database

    def _insert(self, table: Table) -> Any:
        return sqlite.insert(table)

    def table_bytes(self, conn: Any, table: Table) -> int | None:
        try:  # the dbstat virtual table is compiled into most SQLite builds
            size = conn.execute(
                text("SELECT SUM(pgsize) FROM dbstat WHERE name = :t"), {"t": table.name}
            ).scalar()
        except Exception as e:  # OperationalError: no such table: dbstat
            if "dbstat" not in str(e):
                raise
            return None
        return None if size is None else int(size)

    @classmethod
    def engine_kwargs(cls, url: URL) -> dict[str, Any]:
        if cls.is_private(url):
            # one connection, shared by every thread of the object that opened it
            return {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
        # SQLite connections are cheap and writers queue on the file lock, not in the pool:
        # enough of them that threads never wait 30 s for one (the default is 5 + 10).
        return {"connect_args": {"check_same_thread": False}, "pool_size": 16, "max_overflow": 48}

    def configure(self, engine: Engine) -> None:
        if not event.contains(engine, "connect", _on_connect):
            event.listen(engine, "connect", _on_connect)
            event.listen(engine, "begin", _on_begin)

    def begin(
        self, dbapi_connection: Any, cursor: Any, write: bool, single: bool, transaction: bool
    ) -> Transaction:
        _own_transactions(dbapi_connection)
        if single and not write and not transaction:
            return Transaction(commit=False)  # one statement reads a consistent snapshot
        cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        return Transaction(commit=True)

    def fault(self, error: BaseException) -> Fault | None:
        orig = getattr(error, "orig", error)
        if isinstance(orig, sqlite3.OperationalError):
            code = getattr(orig, "sqlite_errorcode", None)
            if code is not None:
                return Fault.BUSY if code & 0xFF in _BUSY else None
            text = str(orig)  # Python 3.10: no error codes
            if "database is locked" in text or "database table is locked" in text:
                return Fault.BUSY
            return None
        return super().fault(error)

    # -- history (sessions and messages) ----------------------------------------------------

    # -- checkpoints ----------------------------------------------------------------------------

    # -- store (items, vectors, filters) ----------------------------------------------------------

    # -- whole-database operations (copy, erasure, maintenance) ---------------------------------

    @contextlib.contextmanager
    def overwriting_deletes(self, session: Any) -> Iterator[None]:
        """``PRAGMA secure_delete = ON`` within the block (deleted rows are overwritten with
        zeros in the pages they leave, also on builds without ``SQLITE_SECURE_DELETE``), and
        the connection's setting back afterwards."""
        was = _SECURE_DELETE.get(int(session.exec_driver_sql("PRAGMA secure_delete").scalar()))
        session.exec_driver_sql("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            if was is not None:
                session.exec_driver_sql(f"PRAGMA secure_delete = {was}")

    def scrub(self, conn: Connection, vacuum: bool) -> bool | None:
        """``VACUUM`` (if asked) rewrites the file, so that no free page or free space within a
        page keeps a copy; ``PRAGMA wal_checkpoint(TRUNCATE)`` empties the write-ahead log
        (retried while a reader keeps it busy). Runs outside a transaction, on the pooled
        DB-API connection; ``None`` for a database in memory."""
        if self.is_private(conn.engine.url):
            return None
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            if vacuum:
                cursor.execute("VACUUM")
            for attempt in range(_CHECKPOINT_TRIES):
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                row = cursor.fetchone()
                if row is None or not row[0]:  # (busy, log frames, checkpointed frames)
                    return True
                time.sleep(min(0.05 * (attempt + 1), 0.5))
            return False
        finally:
            cursor.close()

    def table_names(self, session: Any, schema: str | None) -> set[str]:
        master = "sqlite_master"
        if schema:  # an attached database
            master = f"{self.sa.identifier_preparer.quote_schema(schema)}.sqlite_master"
        rows = session.exec_driver_sql(f"SELECT name FROM {master} WHERE type = 'table'")
        return {str(r[0]) for r in rows}
