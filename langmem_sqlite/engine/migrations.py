"""Schema changes: [`MIGRATIONS`][langmem_sqlite.engine.migrations.MIGRATIONS], their ordered list,
applied automatically, once, safely.

The first use of a set of tables in a process calls
[`ensure_schema`][langmem_sqlite.engine.migrations.ensure_schema] (async callers drive its
plan, `schema_plan`, with `adrive`). It reads the recorded version without locking; only when
something is missing does it take a database-wide lock, so that any number of processes
starting together apply each migration exactly once:

* SQLite: the write lock (`BEGIN IMMEDIATE`); DDL is transactional.
* PostgreSQL: `pg_advisory_xact_lock`; DDL is transactional.
* MySQL/MariaDB: `GET_LOCK`; DDL commits implicitly, so every migration step is idempotent
  (`CREATE ... IF NOT EXISTS` semantics) and is recorded as soon as it is done.

(The lock is the database's dialect object's: `migration_lock`.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import (
    Column,
    Index,
    MetaData,
    Table,
    and_,
    exc,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateColumn, DropIndex

from .. import clock
from .database import Database, Plan, Step
from .dialects import dialect_for, dialect_named
from .schema import BigInt, IdString, Tables

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    "SchemaNotReadyError",
    "SchemaTooNewError",
    "ensure_schema",
]

# -- the changes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Migration:
    """One schema change: `apply(connection, tables)` runs inside the migration lock."""

    version: int
    description: str
    apply: Callable[[Connection, Tables], None]


def _add_columns(table: str, *names: str) -> Callable[[Connection, Tables], None]:
    """A migration step adding nullable columns (declared on `table`) that are missing.

    Tables created after the column was declared already have it; older ones get
    `ALTER TABLE ... ADD COLUMN` with the column's DDL compiled by SQLAlchemy for the dialect.
    """

    def apply(conn: Connection, t: Tables) -> None:
        tbl: Table = getattr(t, table)
        have = {c["name"] for c in inspect(conn).get_columns(tbl.name, schema=tbl.schema)}
        target = conn.dialect.identifier_preparer.format_table(tbl)
        for name in names:
            if name not in have:
                column = CreateColumn(tbl.c[name]).compile(dialect=conn.dialect)
                conn.execute(text(f"ALTER TABLE {target} ADD COLUMN {column}"))

    return apply


def _add_indexes(table: str, *names: str) -> Callable[[Connection, Tables], None]:
    """A migration step creating indexes declared on `table` that are missing (`names`
    without the table prefix). Tables created after the index was declared already have it."""

    def apply(conn: Connection, t: Tables) -> None:
        tbl: Table = getattr(t, table)
        wanted = {t.prefix + n for n in names}
        have = {i["name"] for i in inspect(conn).get_indexes(tbl.name, schema=tbl.schema)}
        for index in tbl.indexes:
            if index.name in wanted and index.name not in have:
                index.create(conn)

    return apply


def _drop_indexes(table: str, *names: str) -> Callable[[Connection, Tables], None]:
    """A migration step dropping indexes no longer declared on `table` (`names` without the
    table prefix), where they exist: SQLAlchemy renders each dialect's `DROP INDEX` for a
    stand-in of the index on a copy of the table outside the schema's metadata."""

    def apply(conn: Connection, t: Tables) -> None:
        tbl: Table = getattr(t, table)
        have = {i["name"] for i in inspect(conn).get_indexes(tbl.name, schema=tbl.schema)}
        stand_in = tbl.to_metadata(MetaData())
        for name in names:
            if t.prefix + name in have:
                conn.execute(
                    DropIndex(
                        Index(t.prefix + name, stand_in.c[stand_in.primary_key.columns[0].name])
                    )
                )

    return apply


def _create(*names: str) -> Callable[[Connection, Tables], None]:
    """A migration step creating the named tables (and their indexes) if they are missing."""

    def apply(conn: Connection, t: Tables) -> None:
        wanted = [getattr(t, n) for n in names]
        t.metadata.create_all(conn, tables=wanted, checkfirst=True)

    return apply


def _partial_expiry_index(conn: Connection, t: Tables) -> None:
    """PostgreSQL: the store's expiry index holds only items with a TTL (made again)."""
    if not dialect_named(conn.dialect.name).partial_expiry_index:
        return
    name = f"{t.prefix}store_items_expires_ix"
    index = next(i for i in t.store_items.indexes if i.name == name)
    conn.execute(DropIndex(index, if_exists=True))
    index.create(conn)


def _unique_message_ids(conn: Connection, t: Tables) -> None:
    """A message id at most once per session: the unique key replaces the plain index.

    Rows already stored are all kept (their bodies, positions and token sums unchanged, so
    every read returns what it returned before): where a session holds several rows with one
    id, the first (lowest position) keeps it in `message_id` and the later ones get NULL
    there, as an append of a repeated id stores it from now on. Idempotent (MySQL/MariaDB
    commit DDL as they go).
    """
    m = t.messages
    have = {i["name"] for i in inspect(conn).get_indexes(m.name, schema=m.schema)}
    unique = f"{t.prefix}messages_session_msgid_uq"
    if unique not in have:
        earlier = m.alias("earlier")
        later = (
            select(m.c.id)
            .join(
                earlier,
                and_(
                    earlier.c.session_pk == m.c.session_pk,
                    earlier.c.message_id == m.c.message_id,
                    earlier.c.seq < m.c.seq,
                ),
            )
            .distinct()
        )
        ids = list(conn.execute(later).scalars())
        for i in range(0, len(ids), 500):  # no UPDATE of a table it subqueries on MySQL
            conn.execute(update(m).where(m.c.id.in_(ids[i : i + 500])).values(message_id=None))
        next(i for i in m.indexes if i.name == unique).create(conn)
    plain = f"{t.prefix}messages_session_msgid_ix"
    if plain in have:  # the index that migration 1 made, on a copy of the table's shape
        shadow = Table(
            m.name,
            MetaData(schema=m.schema),
            Column("session_pk", BigInt),
            Column("message_id", IdString),
        )
        conn.execute(DropIndex(Index(plain, shadow.c.session_pk, shadow.c.message_id)))


MIGRATIONS: list[Migration] = [
    Migration(1, "conversation store: sessions and messages", _create("sessions", "messages")),
    Migration(
        2,
        "checkpointer: checkpoints, blobs, writes and threads",
        _create("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_threads"),
    ),
    Migration(3, "long-term store: items and vectors", _create("store_items", "store_vectors")),
    Migration(
        4, "conversation store: append write tokens", _add_columns("messages", "write_token")
    ),
    Migration(
        5,
        "long-term store: items by namespace, most recent first",
        _add_indexes("store_items", "store_items_ns_upd_ix"),
    ),
    Migration(6, "long-term store: expiry index of items with a TTL only", _partial_expiry_index),
    Migration(
        7,
        "checkpointer: a write's row carries the same call's writes of None",
        _add_columns("checkpoint_writes", "nulls"),
    ),
    Migration(
        8,
        "conversation store: a message id at most once per session (unique key)",
        _unique_message_ids,
    ),
    Migration(9, "long-term store: each vector's length", _add_columns("store_vectors", "norm")),
    Migration(
        10,
        "checkpointer: blobs are no longer indexed by their chain's root (reads follow bases)",
        _drop_indexes("checkpoint_blobs", "checkpoint_blobs_root_ix"),
    ),
]
"""Ordered schema changes; `MIGRATIONS[i].version == i + 1`."""


# -- applying them ----------------------------------------------------------------------------


LATEST_VERSION = max(m.version for m in MIGRATIONS)
"""The schema version this code writes."""


class SchemaTooNewError(RuntimeError):
    """The database was migrated by a newer langmem-sqlite than this one."""


class SchemaNotReadyError(RuntimeError):
    """A database opened for reading
    ([`reading_database`][langmem_sqlite.engine.reading_database]) lacks the package's tables,
    or holds them at an older version: reading never creates or migrates them."""

    def __init__(self, message: str, other_prefixes: list[str] | None = None) -> None:
        super().__init__(message)
        self.other_prefixes: list[str] = other_prefixes or []
        """Prefixes of other sets of the package's tables in the same database."""


def _prefixes_present(conn: Connection, t: Tables) -> list[str]:
    """The prefixes of every set of the package's tables in `t`'s schema (`inspect`: no
    DDL)."""
    names = set(inspect(conn).get_table_names(schema=t.schema))
    ends = ("migrations", "sessions")
    return sorted(
        n[: -len(ends[0])]
        for n in names
        if n.endswith(ends[0]) and n[: -len(ends[0])] + ends[1] in names
    )


def _where(db: Database) -> str:
    """The database for messages: a SQLite file's path, else the URL (password hidden)."""
    return db.rules.file_path(db.url) or db.safe_url()


def applied_versions(conn: Connection, t: Tables) -> set[int]:
    """The migrations recorded in the database (raises if the version table does not exist)."""
    return {int(v) for v in conn.execute(select(t.migrations.c.version)).scalars()}


def _up_to_date(applied: set[int]) -> bool:
    """True if nothing is missing; raises if the database knows migrations this code does not."""
    unknown = applied - _KNOWN
    if unknown:
        raise SchemaTooNewError(
            f"database schema has migration(s) {sorted(unknown)} unknown to this langmem-sqlite "
            f"(which knows up to {LATEST_VERSION}): upgrade the package"
        )
    return applied >= _KNOWN


_KNOWN = {m.version for m in MIGRATIONS}


def _lock_name(t: Tables) -> str:
    return f"langmem_sqlite:{t.schema or ''}:{t.prefix}"[:64]


def _migrate(conn: Connection, t: Tables) -> int:
    """Bring the tables to [`LATEST_VERSION`][langmem_sqlite.engine.migrations.LATEST_VERSION] under
    a database-wide lock.

    Runs on a connection in "commit as you go" mode: everything is committed before the lock
    is released, so the next process to take it sees the finished work.
    """
    with dialect_for(conn.engine).migration_lock(conn, _lock_name(t), t.schema):
        t.metadata.create_all(conn, tables=[t.migrations], checkfirst=True)
        applied = applied_versions(conn, t)
        _up_to_date(applied)
        for m in sorted(MIGRATIONS, key=lambda m: m.version):
            if m.version in applied:
                continue
            m.apply(conn, t)
            conn.execute(
                insert(t.migrations).values(
                    version=m.version, description=m.description, applied_at=clock.now_ms()
                )
            )
        conn.commit()
    return LATEST_VERSION


def _not_ready(db: Database, t: Tables, applied: set[int] | None) -> Plan[SchemaNotReadyError]:
    """The error for a reading database without `t` at the latest version."""
    where = _where(db)
    if applied is not None:
        return SchemaNotReadyError(
            f"the langmem-sqlite tables with prefix {t.prefix!r} in {where} are at schema "
            f"version {max(applied, default=0)}, this langmem-sqlite reads version "
            f"{LATEST_VERSION}: run `langmem-sqlite migrate` on it first"
        )
    found: list[str] = yield Step(_prefixes_present, (t,), schema=True)
    others = [p for p in found if p != t.prefix]
    message = f"no langmem-sqlite tables with prefix {t.prefix!r} in {where}"
    if others:
        message += f" (tables with prefix {', '.join(map(repr, others))} are there)"
    return SchemaNotReadyError(message, others)


def schema_plan(db: Database, t: Tables) -> Plan[None]:
    """Steps that bring `t` to the latest version; run with
    [`Database.drive`][langmem_sqlite.engine.Database.drive] or `adrive`.

    Free once this process has seen the tables up to date. On a reading database
    ([`Database.reading`][langmem_sqlite.engine.Database.reading]) nothing is created or
    migrated: tables missing or behind raise
    [`SchemaNotReadyError`][langmem_sqlite.engine.migrations.SchemaNotReadyError].
    """
    if t.key in db.ready:
        return
    try:
        applied: set[int] | None = yield Step(applied_versions, (t,))
    except (exc.ProgrammingError, exc.OperationalError):
        applied = None  # no version table yet
    if applied is None or not _up_to_date(applied):
        if db.reading:
            raise (yield from _not_ready(db, t, applied))
        yield Step(_migrate, (t,), write=True, own_transaction=True)
    with db.lock:
        db.ready.add(t.key)


def ensure_schema(db: Database, t: Tables) -> None:
    """Make sure `t` exists in `db` at the latest version (cheap after the first call).

    Raises:
        SchemaNotReadyError: `db` is [`reading`][langmem_sqlite.engine.Database.reading]
            and lacks `t` or holds an older version (nothing is created or migrated).
        SchemaTooNewError: a newer langmem-sqlite migrated `db`.
    """
    db.drive(schema_plan(db, t))
