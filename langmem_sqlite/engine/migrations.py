"""Applying :data:`~langmem_sqlite.engine.schema.MIGRATIONS` automatically, once, safely.

The first use of a set of tables in a process calls :func:`ensure_schema` (or
:func:`aensure_schema`). It reads the recorded version without locking; only when something is
missing does it take a database-wide lock, so that any number of processes starting together
apply each migration exactly once:

* SQLite: the write lock (``BEGIN IMMEDIATE``); DDL is transactional.
* PostgreSQL: ``pg_advisory_xact_lock``; DDL is transactional.
* MySQL/MariaDB: ``GET_LOCK``; DDL commits implicitly, so every migration step is idempotent
  (``CREATE ... IF NOT EXISTS`` semantics) and is recorded as soon as it is done.

(The lock is the database's dialect object's: :meth:`~langmem_sqlite.engine.dialects.Dialect.
migration_lock`.)
"""

from __future__ import annotations

import time

from sqlalchemy import exc, func, insert, select
from sqlalchemy.engine import Connection

from .database import Database, Plan, Step
from .dialects import dialect_for
from .schema import MIGRATIONS, Tables

__all__ = [
    "LATEST_VERSION",
    "SchemaTooNewError",
    "aensure_schema",
    "current_version",
    "ensure_schema",
]

LATEST_VERSION = max(m.version for m in MIGRATIONS)
"""The schema version this code writes."""


class SchemaTooNewError(RuntimeError):
    """The database was migrated by a newer langmem-sqlite than this one."""


def applied_versions(conn: Connection, t: Tables) -> set[int]:
    """The migrations recorded in the database (raises if the version table does not exist)."""
    return {int(v) for v in conn.execute(select(t.migrations.c.version)).scalars()}


def current_version(conn: Connection, t: Tables) -> int:
    """The highest applied migration (raises if the version table does not exist)."""
    return int(
        conn.execute(select(func.coalesce(func.max(t.migrations.c.version), 0))).scalar_one()
    )


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
    """Bring the tables to :data:`LATEST_VERSION` under a database-wide lock.

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
                    version=m.version, description=m.description, applied_at=int(time.time() * 1000)
                )
            )
        conn.commit()
    return LATEST_VERSION


def schema_plan(db: Database, t: Tables) -> Plan[None]:
    """Steps that bring ``t`` to the latest version; run with :meth:`Database.drive`/``adrive``.

    Free once this process has seen the tables up to date.
    """
    if t.key in db.ready:
        return
    try:
        applied: set[int] | None = yield Step(applied_versions, (t,))
    except (exc.ProgrammingError, exc.OperationalError):
        applied = None  # no version table yet
    if applied is None or not _up_to_date(applied):
        yield Step(_migrate, (t,), write=True, own_transaction=True)
    with db.lock:
        db.ready.add(t.key)


def ensure_schema(db: Database, t: Tables) -> None:
    """Make sure ``t`` exists in ``db`` at the latest version (cheap after the first call)."""
    db.drive(schema_plan(db, t))


async def aensure_schema(db: Database, t: Tables) -> None:
    """The async twin of :func:`ensure_schema`."""
    await db.adrive(schema_plan(db, t))
