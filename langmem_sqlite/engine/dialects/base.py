"""The base of the dialect objects: what every database kind must say about itself.

SQLAlchemy's own dialects already turn statements into each database's SQL; a
:class:`Dialect` of this package holds the few rules SQLAlchemy leaves to its users: how this
package opens engines for that database (pools, connect timeouts, per-connection settings), how
a transaction starts on the light path of the execution seam, and which driver errors are
transient. Features ask the database's dialect object instead of comparing dialect names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from sqlalchemy import Table, exc, insert, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.sql.dml import Insert

from ..retry import Fault

__all__ = ["Dialect", "Transaction"]

DEFAULT_CONNECT_TIMEOUT_S = 3
"""Seconds a new connection to a database server may take before it fails (servers only;
``connect_timeout`` in the URL's query or in ``engine_args["connect_args"]`` overrides it)."""


class Transaction:
    """How the seam ends what :meth:`Dialect.begin` started on one connection."""

    __slots__ = ("commit", "restore_autocommit")

    def __init__(self, commit: bool, restore_autocommit: bool | None = None) -> None:
        self.commit = commit
        """Whether a COMMIT ends the work (False: autocommit, or a read with no transaction)."""
        self.restore_autocommit = restore_autocommit
        """The driver's autocommit mode to put back before the connection returns to its pool
        (None: unchanged)."""


class Dialect:
    """The rules of one kind of database (subclasses: one module each, registered by name).

    Class attributes describe URLs before any engine exists; an instance serves one engine.
    """

    names: ClassVar[tuple[str, ...]] = ()
    """SQLAlchemy dialect names this class serves (``engine.dialect.name``)."""
    default_drivers: ClassVar[dict[str, str]] = {}
    """Driver used for a URL that names none (``postgresql://`` -> ``postgresql+psycopg``)."""
    sync_twins: ClassVar[dict[str, str]] = {}
    """Async driver name -> the sync driver for the same database (a caller's ``AsyncEngine``
    gets a sync twin engine for the sync API)."""
    extra: ClassVar[str | None] = None
    """The package extra that installs the driver (``pip install 'langmem-sqlite[extra]'``)."""

    def __init__(self, engine: Engine) -> None:
        self.sa = engine.dialect
        """SQLAlchemy's dialect object of the engine."""

    @property
    def name(self) -> str:
        """``"sqlite"``, ``"postgresql"``, ``"mysql"`` or ``"mariadb"``."""
        return str(self.sa.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # -- engines ------------------------------------------------------------------------------

    @classmethod
    def engine_kwargs(cls, url: URL) -> dict[str, Any]:
        """``create_engine`` arguments this package uses for ``url`` (before the caller's)."""
        return {}

    @classmethod
    def driver_url(cls, url: URL) -> URL:
        """``url`` less the query options this package reads itself (see :meth:`engine_kwargs`),
        which the driver would not know."""
        return url

    @classmethod
    def is_private(cls, url: URL) -> bool:
        """Whether each opening of ``url`` is a database of its own (SQLite's ``:memory:``): such
        databases are never shared between the objects that open them."""
        return False

    def configure(self, engine: Engine) -> None:
        """Install per-connection settings on an engine (once per engine)."""

    # -- the seam's transactions --------------------------------------------------------------

    def begin(
        self, dbapi_connection: Any, cursor: Any, write: bool, single: bool, transaction: bool
    ) -> Transaction:
        """Start the work of one seam call on a pooled connection: a transaction (``write``:
        one that will write; ``transaction``: a read that must be one transaction), or, for
        ``single`` statements, whatever needs no transaction."""
        return Transaction(commit=True)

    def end(self, dbapi_connection: Any, txn: Transaction) -> None:
        """Put the connection back as :meth:`begin` found it (before it returns to the pool)."""

    # -- what the database can hold -----------------------------------------------------------

    text_holds_nul: ClassVar[bool] = True
    """Whether a text column stores the NUL character (PostgreSQL's cannot)."""
    deletes_from_a_table_it_reads: ClassVar[bool] = True
    """Whether ``DELETE FROM t WHERE ... (SELECT ... FROM t)`` is allowed (MySQL refuses it)."""

    @classmethod
    def file_path(cls, url: URL) -> str | None:
        """The file that holds the database (an embedded one), else ``None``."""
        return None

    def max_statement_bytes(self, conn: Any) -> int | None:
        """The largest statement the server takes, if it has a limit (read once)."""
        return None

    def table_bytes(self, conn: Any, table: Table) -> int | None:
        """Bytes on disk of ``table`` with its indexes, where the database tells."""
        return None

    # -- statements ----------------------------------------------------------------------------

    def _insert(self, table: Table) -> Any:
        return insert(table)

    def insert_ignore(self, table: Table, key: Sequence[str] | None = None) -> Insert:
        """An ``INSERT`` of ``table`` that leaves a row whose ``key`` (the primary key unless
        given) is there already as it is; other errors still raise."""
        ins = self._insert(table)
        return ins.on_conflict_do_nothing(index_elements=self._key(table, key))  # type: ignore[no-any-return]

    def upsert(
        self, table: Table, update: Sequence[str], key: Sequence[str] | None = None
    ) -> Insert:
        """An ``INSERT`` of ``table`` that, where a row with its ``key`` (the primary key unless
        given) is there already, sets that row's ``update`` columns to the inserted values."""
        ins = self._insert(table)
        return ins.on_conflict_do_update(  # type: ignore[no-any-return]
            index_elements=self._key(table, key),
            set_={c: ins.excluded[c] for c in update},
        )

    @staticmethod
    def _key(table: Table, key: Sequence[str] | None) -> list[Any]:
        return [table.c[k] for k in key] if key is not None else list(table.primary_key.columns)

    # -- schema changes ------------------------------------------------------------------------

    @contextlib.contextmanager
    def migration_lock(self, conn: Connection, name: str, schema: str | None) -> Iterator[None]:
        """Hold the database-wide lock ``name`` while schema changes run on ``conn`` (a
        connection that commits as it goes), creating ``schema`` first where the database has
        schemas of its own. The base rule: the connection's write transaction is the lock."""
        yield

    # -- history (sessions and messages) ----------------------------------------------------

    deletes_sessions_by_subquery: ClassVar[bool] = True
    """Whether the history deletes messages with ``... WHERE session_pk IN (SELECT id FROM
    sessions WHERE ...)`` (False: it reads the sessions' ids first and deletes by lists of ids,
    as MySQL/MariaDB's single-table ``DELETE`` does not turn such a subquery into a join)."""

    statement_bytes_limited: ClassVar[bool] = False
    """Whether the server refuses a statement over :meth:`max_statement_bytes` by dropping the
    connection (MySQL/MariaDB): appends measure their messages against it first."""

    statement_bytes_per_byte: ClassVar[int] = 1
    """Bytes a byte of text may take in a statement sent to the server (MySQL/MariaDB: 2, as
    the driver escapes values inside the SQL text)."""

    # -- checkpoints ----------------------------------------------------------------------------

    # -- store (items, vectors, filters) ----------------------------------------------------------

    # -- whole-database operations (copy, erasure, maintenance) ---------------------------------

    @contextlib.contextmanager
    def overwriting_deletes(self, session: Any) -> Iterator[None]:
        """Within the block, rows deleted on ``session`` are overwritten where they were, where
        the database can do so (SQLite's ``secure_delete``). The base rule: nothing to do."""
        yield

    def scrub(self, conn: Connection, vacuum: bool) -> bool | None:
        """After an erasure, on a connection that commits as it goes: leave no copy of deleted
        rows in the database's files (SQLite: ``VACUUM`` if asked, then empty the write-ahead
        log). ``True``: done; ``False``: a reader kept it from finishing (try again); ``None``:
        nothing this package can do (a server, or a database in memory)."""
        return None

    def after_copy(self, session: Any, table: Table) -> None:
        """What ``table`` needs once :func:`~langmem_sqlite.operations.copy.copy_database` wrote
        rows with their own ids into it (PostgreSQL: move its id sequence past them; MySQL,
        MariaDB and SQLite move their auto-increment counters themselves)."""

    copies_pgvector: ClassVar[bool] = False
    """Whether a copy fills this database's pgvector table of store vectors (PostgreSQL)."""

    def table_names(self, session: Any, schema: str | None) -> set[str]:
        """The tables of ``schema`` (default: the connection's own), read on a
        :class:`~langmem_sqlite.engine.session.Session` (the base rule: the SQL standard's
        ``information_schema``)."""
        stmt = text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            + (":schema" if schema else self.current_schema_sql)
        )
        rows = session.execute(stmt, {"schema": schema} if schema else None)
        return {str(r[0]) for r in rows}

    current_schema_sql: ClassVar[str] = "CURRENT_SCHEMA"
    """SQL naming the connection's default schema (for :meth:`table_names`)."""

    # -- errors --------------------------------------------------------------------------------

    def fault(self, error: BaseException) -> Fault | None:
        """The kind of transient failure ``error`` is, or None (not worth a retry).

        The base rule: a connection SQLAlchemy (or the seam) found dead. Subclasses add their
        database's codes.
        """
        if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
            return Fault.LOST
        orig = getattr(error, "orig", error)
        if isinstance(orig, ConnectionError | TimeoutError):
            return Fault.CONNECT
        return None

    def broken(self, dbapi_connection: Any) -> bool:
        """Whether the driver says its connection is gone (for disconnects whose message
        SQLAlchemy's dialect does not know)."""
        return False

    def prepares_statements(self, dbapi_connection: Any) -> bool:
        """Whether the driver keeps server-side prepared statements on this connection (whose
        cached plans may turn generic)."""
        return False


def merge_connect_args(url: URL, defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` for ``connect_args``, less what the URL's query already sets."""
    return {k: v for k, v in defaults.items() if k not in url.query}
