"""MySQL and MariaDB through PyMySQL."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from sqlalchemy import Table, event, func, insert, literal, select, text
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnElement

from ..retry import Fault
from .base import DEFAULT_CONNECT_TIMEOUT_S, Rules, merge_connect_args

DEFAULT_READ_TIMEOUT_S = 3600
"""Seconds PyMySQL waits to send a statement or read its reply (`?read_timeout=N&write_timeout=N`
in the URL overrides it): it only ends the wait on a server that stopped answering."""

#: MySQL/MariaDB error number -> kind of transient failure
_ERRORS = {
    2002: Fault.CONNECT,  # can't connect through the socket
    2003: Fault.CONNECT,  # can't connect to the server (refused, restarting)
    1040: Fault.CONNECT,  # too many connections
    1053: Fault.LOST,  # server shutdown in progress
    2006: Fault.LOST,  # server has gone away
    2013: Fault.LOST,  # lost connection during query
    2055: Fault.LOST,  # lost connection (system error)
    1927: Fault.LOST,  # MariaDB: connection was killed
    4031: Fault.LOST,  # MySQL 8: disconnected by the server for inactivity
    1205: Fault.BUSY,  # lock wait timeout exceeded
    1213: Fault.BUSY,  # deadlock found
}

_IN_TRANSACTION = 1
"""PyMySQL's `SERVER_STATUS_IN_TRANS` flag: the server reports an open transaction (the
status comes with every reply, so reading it costs no round trip)."""


def _connect_within_timeout(
    dialect: Any, _record: Any, cargs: tuple[Any, ...], cparams: dict[str, Any]
) -> Any:
    """Open a PyMySQL connection whose handshake is bounded by `connect_timeout` (PyMySQL
    reads the greeting and login replies with its `read_timeout`: a server that accepts and
    never answers would hold the caller that long)."""
    handshake = cparams.get("connect_timeout") or 10  # PyMySQL's default
    conn = dialect.loaded_dbapi.connect(*cargs, **{**cparams, "read_timeout": handshake})
    conn._read_timeout = cparams.get("read_timeout")  # PyMySQL has no public setter
    return conn


def _reset_open_transaction(dbapi_connection: Any, record: Any, reset_state: Any) -> None:
    """The pool's reset of a connection it takes back: roll back only a transaction the
    server reports open (a driver that reports no status is left to the pool's own reset)."""
    status = getattr(dbapi_connection, "server_status", None)
    if not isinstance(status, int) or not getattr(reset_state, "asyncio_safe", True):
        return  # no status to read, or no I/O allowed here (SQLAlchemy's own reset skips too)
    if status & _IN_TRANSACTION:
        dbapi_connection.rollback()


MIGRATION_LOCK_TIMEOUT_S = 120
"""How long a process waits for another one's schema changes to finish."""


class MySQLRules(Rules):
    """MySQL and MariaDB through PyMySQL (`asyncmy` or `aiomysql` for a caller's
    `AsyncEngine`). `name` tells the two servers apart once connected."""

    text_as_bytes = True

    @classmethod
    def column_types(cls) -> dict[str, Any]:
        return {
            "long_text": mysql.LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin"),
            "long_blob": mysql.LONGBLOB(),
        }

    names: ClassVar[tuple[str, ...]] = ("mysql", "mariadb")
    default_drivers: ClassVar[dict[str, str]] = {
        "mysql": "mysql+pymysql",
        "mariadb": "mariadb+pymysql",
    }
    sync_twins: ClassVar[dict[str, str]] = {
        "mysql+aiomysql": "mysql+pymysql",
        "mysql+asyncmy": "mysql+pymysql",
        "mariadb+aiomysql": "mariadb+pymysql",
        "mariadb+asyncmy": "mariadb+pymysql",
    }
    extra: ClassVar[str | None] = "mysql"

    def configure(self, engine: Engine) -> None:
        if not event.contains(engine, "reset", _reset_open_transaction):
            event.listen(engine, "reset", _reset_open_transaction)
        if engine.dialect.driver == "pymysql" and not event.contains(
            engine, "do_connect", _connect_within_timeout
        ):
            event.listen(engine, "do_connect", _connect_within_timeout)

    def max_statement_bytes(self, conn: Any) -> int | None:
        """`max_allowed_packet` (16 MiB by default on MariaDB)."""
        return int(conn.execute(select(text("@@max_allowed_packet"))).scalar_one())

    def insert_ignore(self, table: Table, key: Sequence[str] | None = None) -> Insert:
        """`ON DUPLICATE KEY UPDATE` of a key column to itself: unlike `INSERT IGNORE`, it
        does not also turn other errors (a value too long, a bad type) into warnings, and the
        server sends no warning for the duplicate."""
        ins = mysql.insert(table)
        first = self._key(table, key)[0]
        return ins.on_duplicate_key_update({first.name: first})

    def upsert(
        self, table: Table, update: Sequence[str], key: Sequence[str] | None = None
    ) -> Insert:
        """`ON DUPLICATE KEY UPDATE` (MySQL decides by every unique key of the table, so
        `key` must be the only one a new row can collide on)."""
        ins = mysql.insert(table)
        return ins.on_duplicate_key_update({c: ins.inserted[c] for c in update})

    @property
    def name(self) -> str:
        return "mariadb" if getattr(self.sa, "is_mariadb", False) else "mysql"

    @classmethod
    def engine_kwargs(cls, url: URL) -> dict[str, Any]:
        # No ROLLBACK each time a connection goes back to the pool: every unit of work ends its
        # own transaction, and the pool's ``reset`` event (see `configure`) rolls back only a
        # connection whose server says a transaction is still open.
        return {
            "pool_size": 10,
            "max_overflow": 22,
            "pool_recycle": 3600,
            "pool_reset_on_return": None,
            "connect_args": merge_connect_args(
                url,
                {
                    "charset": "utf8mb4",
                    "connect_timeout": DEFAULT_CONNECT_TIMEOUT_S,
                    "read_timeout": DEFAULT_READ_TIMEOUT_S,
                    "write_timeout": DEFAULT_READ_TIMEOUT_S,
                },
            ),
        }

    @contextlib.contextmanager
    def migration_lock(self, conn: Connection, name: str, schema: str | None) -> Iterator[None]:
        """A named lock (`GET_LOCK`; DDL commits implicitly here, so the lock outlives each
        step and is released at the end)."""
        got = conn.execute(
            text("SELECT GET_LOCK(:n, :s)"), {"n": name, "s": MIGRATION_LOCK_TIMEOUT_S}
        ).scalar()
        if got != 1:
            raise TimeoutError(f"could not take the migration lock {name!r}")
        try:
            yield
        finally:
            conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": name})
            conn.commit()

    def fault(self, error: BaseException) -> Fault | None:
        kind = super().fault(error)
        if kind is not None:
            return kind
        orig = getattr(error, "orig", error)
        args = getattr(orig, "args", ())
        code = args[0] if args and isinstance(args[0], int) else None
        if code in _ERRORS:
            return _ERRORS[code]
        # PyMySQL: "(0, '')" for a statement on a connection that was closed under it
        if code == 0 and isinstance(orig, self.sa.loaded_dbapi.InterfaceError):
            return Fault.LOST
        return None

    def reason(self, url: URL, error: BaseException, kind: Fault | None) -> str | None:
        """The server's message without its error number."""
        args = getattr(getattr(error, "orig", error), "args", ())
        if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):
            return args[1]
        return None

    @classmethod
    def broken(cls, dbapi_connection: Any) -> bool:
        return getattr(dbapi_connection, "open", True) is False

    # -- history (sessions and messages) ----------------------------------------------------

    statement_bytes_limited: ClassVar[bool] = True
    statement_bytes_per_byte: ClassVar[int] = 2

    # -- checkpoints ----------------------------------------------------------------------------

    checkpoint_value_part: ClassVar[int | None] = 4 * 1024 * 1024
    """PyMySQL sends bytes escaped inside the SQL text (up to ~2.5x larger), and the server's
    default `max_allowed_packet` is 16 MiB."""

    def checkpoint_insert_new(self, table: Table) -> Insert:
        """A plain `INSERT`: a row already there fails it with "duplicate entry" (1062).
        `ON DUPLICATE KEY UPDATE`'s row count does not tell a skipped row from an inserted
        one (SQLAlchemy's MySQL drivers count found rows), and `INSERT IGNORE` has the
        server send a warning per skipped row, which asyncmy logs after an extra
        `SHOW WARNINGS` round trip."""
        return insert(table)

    def checkpoint_duplicate(self, error: BaseException) -> bool:
        args: tuple[Any, ...] = getattr(getattr(error, "orig", error), "args", ())
        return bool(args) and args[0] == 1062

    @classmethod
    def metadata_contains(
        cls, column: Any, filter: Mapping[str, str | int]
    ) -> list[ColumnElement[bool]]:
        """`JSON_CONTAINS(column, :candidate)` per key, the candidate `{key: value}` made
        by the column's own serializer: MariaDB compares strings as their escaped JSON text
        (`JSON_OBJECT`'s "é" does not equal "\\u00e9"); `JSON_CONTAINS` of 1 matches 1.0."""
        return [
            func.json_contains(column, literal({key: value}, column.type)) == 1
            for key, value in filter.items()
        ]

    # -- store (items, vectors, filters) ----------------------------------------------------------
