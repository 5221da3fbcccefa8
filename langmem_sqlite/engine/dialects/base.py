"""`Rules`: what SQLAlchemy leaves to its users per kind of database (engine settings, how a
unit of work starts, which driver errors are transient, column types, upserts). Features ask
the database's rules object instead of comparing dialect names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from sqlalchemy import Table, exc, insert
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnElement

from ..retry import Fault

DEFAULT_CONNECT_TIMEOUT_S = 3
"""Seconds a new connection to a database server may take before it fails (servers only;
`connect_timeout` in the URL's query or in `engine_args["connect_args"]` overrides it)."""


class Rules:
    """The rules of one kind of database (subclasses: one module each, listed in `BUILTIN`).

    Class attributes describe URLs before any engine exists; an instance serves one engine.
    """

    names: ClassVar[tuple[str, ...]] = ()
    """SQLAlchemy dialect names this class serves (`engine.dialect.name`)."""
    default_drivers: ClassVar[dict[str, str]] = {}
    """Driver used for a URL that names none (`postgresql://` -> `postgresql+psycopg`)."""
    sync_twins: ClassVar[dict[str, str]] = {}
    """Async driver name -> the sync driver of the engine a caller's `AsyncEngine` gets for
    the sync API."""
    extra: ClassVar[str | None] = None
    """The package extra that installs the driver."""

    def __init__(self, engine: Engine) -> None:
        self.sa = engine.dialect
        """SQLAlchemy's `Dialect` of the engine."""

    @property
    def name(self) -> str:
        """`"sqlite"`, `"postgresql"`, `"mysql"` or `"mariadb"`."""
        return str(self.sa.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # -- engines ------------------------------------------------------------------------------

    @classmethod
    def engine_kwargs(cls, url: URL) -> dict[str, Any]:
        """`create_engine` arguments this package uses for `url` (before the caller's)."""
        return {}

    @classmethod
    def driver_url(cls, url: URL) -> URL:
        """`url` less the query options this package reads itself (see `engine_kwargs`)."""
        return url

    @classmethod
    def is_private(cls, url: URL) -> bool:
        """Whether each opening of `url` is a database of its own (SQLite's `:memory:`)."""
        return False

    def configure(self, engine: Engine) -> None:
        """Install per-connection settings on an engine (once per engine)."""

    # -- units of work ------------------------------------------------------------------------

    def begin(self, connection: Connection, write: bool, single: bool, transaction: bool) -> Any:
        """Prepare `connection` for one unit of work: one that will write (`write`), a read
        that must be one transaction (`transaction`), or one statement (`single`). Returns
        what `end` needs to put the connection back (None: nothing)."""
        return None

    def end(self, connection: Connection, restore: Any) -> None:
        """Put the connection back as `begin` found it (before it returns to the pool)."""

    # -- what the database can hold -----------------------------------------------------------

    text_holds_nul: ClassVar[bool] = True
    """Whether a text column stores the NUL character (PostgreSQL's cannot)."""

    @classmethod
    def file_path(cls, url: URL) -> str | None:
        """The file that holds the database (an embedded one), else `None`."""
        return None

    def max_statement_bytes(self, conn: Any) -> int | None:
        """The largest statement the server takes, if it has a limit (a query: callers
        remember it in [`Database.facts`][langmem_sqlite.engine.Database.facts])."""
        return None

    # -- statements ----------------------------------------------------------------------------

    def _insert(self, table: Table) -> Any:
        return insert(table)

    def insert_ignore(self, table: Table, key: Sequence[str] | None = None) -> Insert:
        """An `INSERT` of `table` that leaves a row whose `key` (the primary key unless
        given) is there already as it is; other errors still raise."""
        ins = self._insert(table)
        return ins.on_conflict_do_nothing(index_elements=self._key(table, key))  # type: ignore[no-any-return]

    def upsert(
        self, table: Table, update: Sequence[str], key: Sequence[str] | None = None
    ) -> Insert:
        """An `INSERT` of `table` that, where a row with its `key` (the primary key unless
        given) is there already, sets that row's `update` columns to the inserted values."""
        ins = self._insert(table)
        return ins.on_conflict_do_update(  # type: ignore[no-any-return]
            index_elements=self._key(table, key),
            set_={c: ins.excluded[c] for c in update},
        )

    @staticmethod
    def _key(table: Table, key: Sequence[str] | None) -> list[Any]:
        return [table.c[k] for k in key] if key is not None else list(table.primary_key.columns)

    # -- column types and indexes --------------------------------------------------------------

    text_as_bytes: ClassVar[bool] = False
    """Whether ids and store namespaces are stored as their UTF-8 bytes (`VARBINARY`), so that
    they compare and sort byte for byte where no text collation guarantees it (MySQL/MariaDB)."""
    id_order_collation: ClassVar[str | None] = None
    """The collation under which text sorts in code point order (PostgreSQL: `"C"`), where the
    database's default collation does not."""
    namespace_listing_index: ClassVar[bool] = False
    """Whether the store keeps an index on `(ns, updated_at, id)`, for a planner that reads
    one namespace's newest items through it (SQLite); servers do without it."""

    @classmethod
    def column_types(cls) -> dict[str, Any]:
        """This database's own column types for the schema's generic kinds, by kind:
        `"long_text"`, `"long_blob"`, `"json"`, `"big_int"`; a kind left out takes
        SQLAlchemy's generic type (`Text`, `LargeBinary`, `JSON`, `BigInteger`)."""
        return {}

    # -- schema changes ------------------------------------------------------------------------

    @contextlib.contextmanager
    def migration_lock(self, conn: Connection, name: str, schema: str | None) -> Iterator[None]:
        """Hold the database-wide lock `name` while schema changes run on `conn` (a
        connection that commits as it goes), creating `schema` first where the database has
        schemas of its own. The base rule: no lock."""
        yield

    # -- history (sessions and messages) ----------------------------------------------------

    statement_bytes_limited: ClassVar[bool] = False
    """Whether the server refuses a statement over `max_statement_bytes` by dropping the
    connection (MySQL/MariaDB): appends measure their messages against it first."""

    statement_bytes_per_byte: ClassVar[int] = 1
    """Bytes a byte of text may take in a statement sent to the server (MySQL/MariaDB: 2, as
    the driver escapes values inside the SQL text)."""

    # -- checkpoints ----------------------------------------------------------------------------

    checkpoint_single_autocommits: ClassVar[bool] = True
    """Whether a checkpoint operation of one statement (or reading only rows never updated in
    place) may run without a transaction, where `begin` saves round trips by it
    (PostgreSQL's autocommit). SQLite keeps its transaction: a snapshot costs nothing there."""

    checkpoint_value_part: ClassVar[int | None] = None
    """The largest byte value sent in one statement (None: any); a larger one is written in
    parts, appended in the same transaction."""

    def checkpoint_insert_new(self, table: Table) -> Insert:
        """An `INSERT` of one row that keeps a row already there, whose row count is 1 only
        if it inserted the row (else 0, or the error `checkpoint_duplicate` tells)."""
        return self.insert_ignore(table)

    def checkpoint_duplicate(self, error: BaseException) -> bool:
        """Whether `error` is `checkpoint_insert_new` meeting a row already there
        (that statement alone is undone; the transaction goes on)."""
        return False

    @classmethod
    def metadata_contains(
        cls, column: Any, filter: Mapping[str, str | int]
    ) -> list[ColumnElement[bool]]:
        """SQL conditions that the JSON object in `column` holds each `key: value` of
        `filter` (str keys, str or 64-bit int values): they may over-select, never drop a
        match. Keys and values are bound as data, never spelled into a JSON path. The base
        rule: no condition (the caller's exact test decides)."""
        return []

    def checkpoint_file_setup(self, url: URL) -> Callable[[Connection], None] | None:
        """What runs once on a new database file before the checkpoint tables exist, on a
        connection of its own that commits as it goes (None: nothing)."""
        return None

    def give_back_space(self, engine: Engine, full: bool) -> None:
        """Return the pages freed by deletes to the OS where the database keeps them in its
        file (`full`: rewrite the whole file). The base rule: nothing to do."""

    # -- whole-database operations (copy, erasure, maintenance) ---------------------------------

    @contextlib.contextmanager
    def overwriting_deletes(self, unit: Any) -> Iterator[None]:
        """Within the block, rows `unit` deletes are overwritten where they were, where the
        database can do so (SQLite's `secure_delete`). The base rule: nothing to do."""
        yield

    # -- errors --------------------------------------------------------------------------------

    def fault(self, error: BaseException) -> Fault | None:
        """The kind of transient failure `error` is, or None (not worth a retry).

        The base rule: a connection SQLAlchemy found dead. Subclasses add their
        database's codes.
        """
        if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
            return Fault.LOST
        orig = getattr(error, "orig", error)
        if isinstance(orig, ConnectionError | TimeoutError):
            return Fault.CONNECT
        return None

    def reason(self, url: URL, error: BaseException, kind: Fault | None) -> str | None:
        """Why `error` (of the kind `kind`, None if not transient) keeps the database at
        `url` from the user, in words for a message; None: the driver's first line says it."""
        return None

    @classmethod
    def broken(cls, dbapi_connection: Any) -> bool:
        """Whether the driver says its connection is gone (for disconnects whose message
        SQLAlchemy's dialect does not know)."""
        return False


def merge_connect_args(url: URL, defaults: dict[str, Any]) -> dict[str, Any]:
    """`defaults` for `connect_args`, less what the URL's query already sets."""
    return {k: v for k, v in defaults.items() if k not in url.query}
