"""Schema changes: [`MIGRATIONS`][langmem_sqlite.engine.migrations.MIGRATIONS], their ordered
list, applied once per set of tables by
[`ensure_schema`][langmem_sqlite.engine.migrations.ensure_schema] (`schema_plan` for async
callers). Missing ones are applied under a database-wide lock (`Rules.migration_lock`), so that
processes starting together apply each exactly once; MySQL/MariaDB commit DDL as it runs, so a
step must be idempotent there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import exc, insert, inspect, select
from sqlalchemy.engine import Connection

from .. import clock
from .database import Database, Plan, Step
from .dialects import rules_for
from .schema import Tables

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    "SchemaNotReadyError",
    "SchemaTooNewError",
    "applied_versions",
    "ensure_schema",
    "up_to_date",
]


@dataclass(frozen=True)
class Migration:
    """One schema change: `apply(connection, tables)` runs inside the migration lock."""

    version: int
    description: str
    apply: Callable[[Connection, Tables], None]


def _baseline(conn: Connection, t: Tables) -> None:
    """Every table of the package (and its indexes), where missing."""
    tables = [x for x in t.metadata.sorted_tables if x is not t.migrations]
    t.metadata.create_all(conn, tables=tables, checkfirst=True)


MIGRATIONS: list[Migration] = [Migration(1, "baseline: every table", _baseline)]
"""Ordered schema changes; `MIGRATIONS[i].version == i + 1`. A change to the schema appends
one; a released one is never edited."""

LATEST_VERSION = MIGRATIONS[-1].version
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
    """The prefixes of every set of the package's tables in `t`'s schema."""
    names = set(inspect(conn).get_table_names(schema=t.schema))
    ends = ("migrations", "sessions")
    return sorted(
        n[: -len(ends[0])]
        for n in names
        if n.endswith(ends[0]) and n[: -len(ends[0])] + ends[1] in names
    )


def applied_versions(conn: Connection, t: Tables) -> set[int]:
    """The migrations recorded in the database (raises if the version table does not exist)."""
    return {int(v) for v in conn.execute(select(t.migrations.c.version)).scalars()}


def up_to_date(applied: set[int], where: str = "database") -> bool:
    """True if no migration is missing from `applied`.

    Raises:
        SchemaTooNewError: `applied` holds migrations this code does not know.
    """
    known = {m.version for m in MIGRATIONS}
    unknown = applied - known
    if unknown:
        raise SchemaTooNewError(
            f"{where}: migrated by a newer langmem-sqlite (migrations {sorted(unknown)}, this "
            f"one knows up to {MIGRATIONS[-1].version}): upgrade the package"
        )
    return applied >= known


def _lock_name(t: Tables) -> str:
    return f"langmem_sqlite:{t.schema or ''}:{t.prefix}"[:64]


def _migrate(conn: Connection, t: Tables) -> None:
    """Apply the missing migrations under a database-wide lock, committed before the lock is
    released (the next process to take it sees the finished work)."""
    with rules_for(conn.engine).migration_lock(conn, _lock_name(t), t.schema):
        t.metadata.create_all(conn, tables=[t.migrations], checkfirst=True)
        applied = applied_versions(conn, t)
        up_to_date(applied)
        for m in MIGRATIONS:
            if m.version not in applied:
                m.apply(conn, t)
                values = {"version": m.version, "description": m.description}
                conn.execute(insert(t.migrations).values(**values, applied_at=clock.now_ms()))
        conn.commit()


def _not_ready(db: Database, t: Tables, applied: set[int] | None) -> Plan[SchemaNotReadyError]:
    """The error for a reading database without `t` at the latest version."""
    where = db.location()
    if applied is not None:
        return SchemaNotReadyError(
            f"the langmem-sqlite tables with prefix {t.prefix!r} in {where} are at schema "
            f"version {max(applied, default=0)}, this langmem-sqlite reads version "
            f"{MIGRATIONS[-1].version}: run `langmem-sqlite migrate` on it first"
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
    if applied is None or not up_to_date(applied):
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
