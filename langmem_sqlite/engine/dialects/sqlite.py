"""SQLite: an embedded file (the default), or a private in-memory database."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

from sqlalchemy import (
    Integer,
    String,
    Table,
    event,
    exc,
    exists,
    func,
    literal,
    literal_column,
    select,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.elements import ColumnElement

from ..retry import Fault
from .base import Rules

SQLITE_BUSY_TIMEOUT_MS = 1_000
"""How long one try waits inside SQLite for another process's write lock; then the retry loop
takes over, bounded by the call's retry deadline."""

SQLITE_WAL_AUTOCHECKPOINT_PAGES = 256
"""Pages in the write-ahead log before a commit copies them into the database file: the log
stays near 1 MiB while a database is in use."""

SQLITE_JOURNAL_SIZE_LIMIT = 1024 * 1024
"""Bytes of write-ahead log left on disk when a checkpoint lets the log start over."""

_SECURE_DELETE = {0: "OFF", 1: "ON", 2: "FAST"}
"""`PRAGMA secure_delete` values as read -> as set."""

_BUSY = (5, 6)
"""SQLite's primary result codes `SQLITE_BUSY` and `SQLITE_LOCKED`."""

_CANTOPEN = 14
"""SQLite's `SQLITE_CANTOPEN`."""


def _on_connect(dbapi_conn: Any, _record: Any, *, wal: bool = True) -> None:
    """Per-connection settings (WAL unless `wal` is false)."""
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
    cur.execute(f"PRAGMA journal_size_limit = {SQLITE_JOURNAL_SIZE_LIMIT}")
    if wal:
        cur.execute("PRAGMA journal_mode")
        mode = str(cur.fetchone()[0]).lower()
        if mode not in ("wal", "memory"):
            cur.execute("PRAGMA journal_mode = WAL")
    cur.close()


def _on_connect_reading(dbapi_conn: Any, record: Any) -> None:
    """A reading engine's connection: the file's journal mode left as it is, every write
    refused (`query_only`; being read-write, its last connection still removes `-wal`/`-shm`)."""
    _on_connect(dbapi_conn, record, wal=False)
    dbapi_conn.execute("PRAGMA query_only = ON")


def _enable_auto_vacuum(conn: Connection) -> None:
    """Switch a new SQLite file to incremental auto-vacuum (a no-op once it holds data); a step
    of its own, as `VACUUM` cannot run in a transaction."""
    conn.execution_options(isolation_level="AUTOCOMMIT")
    if conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() != 0:
        return
    if (conn.exec_driver_sql("PRAGMA page_count").scalar() or 0) > 64:
        return
    conn.exec_driver_sql("PRAGMA auto_vacuum = INCREMENTAL")
    try:
        conn.exec_driver_sql("VACUUM")
    except exc.OperationalError as e:
        if _code(e.orig) not in _BUSY:
            raise
        # another process writes: the file keeps its mode (the switch is an optimisation only)


def _code(error: Any) -> int | None:
    """The primary result code of a `sqlite3` error (None on Python 3.10, which has none)."""
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


class SQLiteRules(Rules):
    """SQLite through the standard library's `sqlite3` (`aiosqlite` for a caller's
    `AsyncEngine`)."""

    namespace_listing_index = True

    @classmethod
    def column_types(cls) -> dict[str, Any]:
        # plain INTEGER, so that an integer primary key is the table's rowid
        return {"big_int": Integer()}

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

    @classmethod
    def engine_kwargs(cls, url: URL) -> dict[str, Any]:
        if cls.is_private(url):
            # one connection, shared by every thread of the object that opened it
            return {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
        # SQLite connections are cheap and writers queue on the file lock, not in the pool:
        # enough of them that threads never wait 30 s for one (the default is 5 + 10).
        return {"connect_args": {"check_same_thread": False}, "pool_size": 16, "max_overflow": 48}

    def configure(self, engine: Engine) -> None:
        reading = engine.get_execution_options().get("langmem_reading", False)
        connect = _on_connect_reading if reading else _on_connect
        if not event.contains(engine, "connect", connect):
            event.listen(engine, "connect", connect)

    def begin(self, connection: Connection, write: bool, single: bool, transaction: bool) -> None:
        # `sqlite3` would begin a deferred transaction only before a write, which can then
        # fail with SQLITE_BUSY at once: a writer takes the lock first (BEGIN IMMEDIATE), and
        # waits for it. One read is a consistent snapshot by itself: no BEGIN.
        if write:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        elif not single or transaction:
            connection.exec_driver_sql("BEGIN")

    @contextlib.contextmanager
    def migration_lock(self, conn: Connection, name: str, schema: str | None) -> Iterator[None]:
        """The file's write lock: the migration's transaction starts with `BEGIN IMMEDIATE`."""
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        yield

    def fault(self, error: BaseException) -> Fault | None:
        orig = getattr(error, "orig", error)
        if isinstance(orig, sqlite3.OperationalError):
            code = _code(orig)
            if code is not None:
                return Fault.BUSY if code in _BUSY else None
            text = str(orig)  # Python 3.10: no error codes
            if "database is locked" in text or "database table is locked" in text:
                return Fault.BUSY
            return None
        return super().fault(error)

    def reason(self, url: URL, error: BaseException, kind: Fault | None) -> str | None:
        """Another process holding the file's write lock, or the file's missing directory."""
        if kind is Fault.BUSY:
            return "another process holds its write lock"
        path = self.file_path(url)
        if _code(getattr(error, "orig", error)) == _CANTOPEN and path:
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                return f"the directory {folder} does not exist"
        return None

    # -- history (sessions and messages) ----------------------------------------------------

    # -- checkpoints ----------------------------------------------------------------------------

    checkpoint_single_autocommits: ClassVar[bool] = False

    @classmethod
    def metadata_contains(
        cls, column: Any, filter: Mapping[str, str | int]
    ) -> list[ColumnElement[bool]]:
        """`EXISTS (SELECT 1 FROM json_each(column) WHERE key = :key AND value = :value)` per
        key (`json_each` reads `true` as 1: an over-selection the caller's test removes)."""
        conds: list[ColumnElement[bool]] = []
        for key, value in filter.items():
            k = literal(key, String())
            v = literal(value, String() if isinstance(value, str) else Integer())
            each = func.json_each(column).table_valued("key", "value")
            conds.append(
                exists(
                    select(literal_column("1"))
                    .select_from(each)
                    .where(each.c.key == k, each.c.value == v)
                )
            )
        return conds

    def checkpoint_file_setup(self, url: URL) -> Callable[[Connection], None] | None:
        """On a file: switch it to incremental auto-vacuum (before it holds data)."""
        return None if self.file_path(url) is None else _enable_auto_vacuum

    def give_back_space(self, engine: Engine, full: bool) -> None:
        """`PRAGMA incremental_vacuum` (effective on files in incremental auto-vacuum mode,
        see `checkpoint_file_setup`), or with `full` a `VACUUM`, which also switches
        an older file to that mode; then the write-ahead log is truncated. `VACUUM`
        rewrites the file and needs as much free disk space."""
        raw = engine.raw_connection()
        try:
            conn: Any = raw.driver_connection
            if full:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("VACUUM")
            else:
                # executescript steps the pragma to completion (execute frees one page).
                conn.executescript("PRAGMA incremental_vacuum;")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            raw.close()

    # -- whole-database operations (copy, erasure, maintenance) ---------------------------------

    @contextlib.contextmanager
    def overwriting_deletes(self, unit: Any) -> Iterator[None]:
        """`PRAGMA secure_delete = ON` within the block (deleted rows are overwritten with
        zeros in the pages they leave, also on builds without `SQLITE_SECURE_DELETE`), and
        the connection's setting back afterwards."""
        was = _SECURE_DELETE.get(int(unit.exec_driver_sql("PRAGMA secure_delete").scalar()))
        unit.exec_driver_sql("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            if was is not None:
                unit.exec_driver_sql(f"PRAGMA secure_delete = {was}")
