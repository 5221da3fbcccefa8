"""Copy a langmem-sqlite database to another one, between any two dialects.

[`copy_database`][langmem_sqlite.operations.copy.copy_database] walks every table of the schema
in foreign-key order (and fills a PostgreSQL target's pgvector table), in pages of `batch_size`
rows by primary key, each page written in one target transaction and read back to compare. A
row whose key the target holds already must be equal
([`CopyMismatchError`][langmem_sqlite.operations.copy.CopyMismatchError] otherwise): a second
run copies nothing, an interrupted one resumes. With `user_id`, only that user's rows go (by
`user_id`, by thread [`ownership`][langmem_sqlite.operations.ownership], under
`("users", user_id)`, or by foreign key to such rows). The source is only read and must be at
this package's schema version; rows keep their primary keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..engine import Database, DatabaseLike, DatabaseUnavailableError, get_database
from ..engine.migrations import LATEST_VERSION, applied_versions, ensure_schema, up_to_date
from ..engine.schema import DEFAULT_PREFIX, Tables, get_tables
from ..engine.unit import Unit
from ..validation import check_id, check_positive
from .importers.report import progress_bar, source_connection, source_name
from .ownership import users_by_thread
from .per_database import create_database, move_sequence

__all__ = [
    "MAX_BATCH_SIZE",
    "CopyMismatchError",
    "CopyReport",
    "TableCopy",
    "acopy_database",
    "copy_database",
]

_USERS_NAMESPACE = "users"
_THREAD_CHUNK = 500
_KEY_CHUNK = 500
"""Primary keys per `IN` list when a page is read back (a key has up to four columns:
SQLite binds at most 32,766 values a statement, PostgreSQL 65,535)."""

MAX_BATCH_SIZE = 100_000
"""The largest `batch_size` of [`copy_database`][langmem_sqlite.copy_database] (rows held in memory
per page)."""


class CopyMismatchError(ValueError):
    """The target holds a row with the same key as a source row but other values (nothing was
    overwritten)."""


@dataclass
class TableCopy:
    """What was copied of one table."""

    table: str
    """The source table's name."""
    rows: int = 0
    """Rows read from the source (within the user's scope, with `user_id`)."""
    copied: int = 0
    """Rows written to the target by this run."""
    present: int = 0
    """Rows the target already held, equal to the source's (an earlier run)."""
    verified: bool = False
    """Every row read back from the target equal to the source's."""
    note: str = ""
    """Why a table was left out, or how it was filled."""


@dataclass
class CopyReport:
    """Counts of one [`copy_database`][langmem_sqlite.copy_database] run."""

    source: str
    target: str
    user_id: str | None
    tables: list[TableCopy] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows read from the source, all tables."""
        return sum(t.rows for t in self.tables)

    @property
    def copied(self) -> int:
        """Rows written by this run, all tables."""
        return sum(t.copied for t in self.tables)

    @property
    def present(self) -> int:
        """Rows the target already held, all tables."""
        return sum(t.present for t in self.tables)

    @property
    def verified(self) -> bool:
        """Every copied table verified by reading back."""
        return all(t.verified or t.note for t in self.tables)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "source": self.source,
            "target": self.target,
            "user_id": self.user_id,
            "rows": self.rows,
            "copied": self.copied,
            "present": self.present,
            "verified": self.verified,
            "tables": [t.__dict__ for t in self.tables],
        }


# -- what to copy -------------------------------------------------------------------------------


Scope = Callable[[sa.Table], list[Any] | None]
"""A table -> the conditions selecting its rows (one page walk per condition; `[]`: none,
`[sa.true()]`: all), or `None` when the table is not per user."""


def _everything(table: sa.Table) -> list[Any] | None:
    return [sa.true()]


def _user_scope(conn: Connection, tables: Tables, user_id: str) -> Scope:
    from ..store.namespaces import prefix_range

    # the user's threads by the rule of `ownership`, from the metadata's JSON copy, streamed
    named = users_by_thread(conn.execution_options(yield_per=1000), tables)
    threads = sorted(tid for tid, users in named.items() if user_id in users)
    low, high = prefix_range((_USERS_NAMESPACE, user_id)) or ("", "")
    memo: dict[str, list[Any] | None] = {}

    def scope(table: sa.Table) -> list[Any] | None:
        if table.name in memo:
            return memo[table.name]
        c = table.c
        conditions: list[Any] | None = None
        if "user_id" in c:
            conditions = [c.user_id == user_id]
        elif "thread_id" in c:
            conditions = [
                c.thread_id.in_(threads[i : i + _THREAD_CHUNK])
                for i in range(0, len(threads), _THREAD_CHUNK)
            ]
        elif "ns" in c:
            conditions = [sa.and_(c.ns >= low, c.ns < high)]
        else:
            for fk in table.foreign_keys:
                parent = fk.column.table
                parent_conditions = scope(parent)
                if parent_conditions is not None:
                    conditions = [
                        fk.parent.in_(sa.select(fk.column).where(cond))
                        for cond in parent_conditions
                    ]
                    break
        memo[table.name] = conditions
        return conditions

    return scope


# -- reading and comparing ----------------------------------------------------------------------


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview | bytearray) else value


def _key_filter(table: sa.Table, keys: Sequence[tuple[Any, ...]]) -> Any:
    pk = list(table.primary_key.columns)
    if len(pk) == 1:
        return pk[0].in_([k[0] for k in keys])
    return sa.tuple_(*pk).in_(keys)


def _pages(
    conn: Connection, table: sa.Table, condition: Any, batch_size: int
) -> Iterator[list[dict[str, Any]]]:
    """The rows of `table` matching `condition`, `batch_size` at a time, by primary key."""
    pk = list(table.primary_key.columns)
    names = [c.name for c in table.columns]
    last: tuple[Any, ...] | None = None
    while True:
        stmt = sa.select(table).where(condition).order_by(*pk).limit(batch_size)
        if last is not None:
            after = pk[0] > last[0] if len(pk) == 1 else sa.tuple_(*pk) > sa.tuple_(*last)
            stmt = stmt.where(after)
        rows = [{n: _plain(r[n]) for n in names} for r in conn.execute(stmt).mappings()]
        if not rows:
            return
        yield rows
        last = tuple(rows[-1][c.name] for c in pk)


def _write_page(unit: Unit, table: sa.Table, rows: list[dict[str, Any]]) -> tuple[int, int]:
    """Insert the rows of `rows` the target lacks, compare the others, read everything back;
    `(copied, present)`. Runs in one target transaction (a row whose unique values the
    target holds under another key fails it with `IntegrityError`: see `_page_into`)."""
    pk = [c.name for c in table.primary_key.columns]
    names = [c.name for c in table.columns]
    keys = [tuple(r[n] for n in pk) for r in rows]
    at = [names.index(n) for n in pk]

    def stored() -> dict[tuple[Any, ...], dict[str, Any]]:
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for i in range(0, len(keys), _KEY_CHUNK):
            chunk = keys[i : i + _KEY_CHUNK]
            found = unit.execute(sa.select(table).where(_key_filter(table, chunk)))
            out.update(
                (
                    tuple(_plain(r[j]) for j in at),
                    {n: _plain(v) for n, v in zip(names, r, strict=True)},
                )
                for r in found
            )
        return out

    before = stored()
    missing = [r for r, k in zip(rows, keys, strict=True) if k not in before]
    for row, key in zip(rows, keys, strict=True):
        if key in before and before[key] != row:
            raise CopyMismatchError(
                f"{table.name}: the target already holds a different row with key {key!r} "
                "(copy into an empty database, or one copied from this source before)"
            )
    if missing:
        insert = unit.statement(("copy", "insert", table.schema, table.name), table.insert)
        unit.execute(insert, missing)
        after = stored()
        for row, key in zip(rows, keys, strict=True):
            if after.get(key) != row:
                raise CopyMismatchError(f"{table.name}: row {key!r} reads back different")
    return len(missing), len(rows) - len(missing)


def _page_into(db: Database, table: sa.Table, rows: list[dict[str, Any]]) -> tuple[int, int]:
    """`_write_page` as one unit of work of the target."""
    try:
        return db.run(_write_page, table, rows, write=True)  # type: ignore[no-any-return]
    except sa.exc.IntegrityError as e:
        raise CopyMismatchError(
            f"{table.name}: the target already holds other rows with the same unique "
            "values (copy into an empty database, or one copied from this source before)"
        ) from e


# -- the target's pgvector table (PostgreSQL) ----------------------------------------------------


def _pgvector_fill(unit: Unit, tables: Tables, user_id: str | None, batch_size: int) -> TableCopy:
    """The rows the target's pgvector table lacks, made from the copied vectors."""
    from ..store.namespaces import prefix_range
    from ..store.pgvector_schema import pgvector_table, raw_vector

    pgv, sv = pgvector_table(tables), tables.store_vectors
    condition: Any = sa.true()
    if user_id is not None:
        low, high = prefix_range((_USERS_NAMESPACE, user_id)) or ("", "")
        condition = sa.and_(sv.c.ns >= low, sv.c.ns < high)
    lacking = (
        sa.select(sv.c.item_id, sv.c.field, sv.c.ns, sv.c.embedding, sv.c.norm)
        .outerjoin(pgv, sa.and_(pgv.c.item_id == sv.c.item_id, pgv.c.field == sv.c.field))
        .where(pgv.c.item_id.is_(None), condition)
        .limit(batch_size)
    )
    copied = 0
    while rows := unit.execute(lacking).all():
        values = [
            {"item_id": i, "field": f, "ns": ns, "embedding": raw_vector(blob, norm)}
            for i, f, ns, blob, norm in rows
        ]
        unit.execute(sa.insert(pgv), values)
        copied += len(rows)
    return TableCopy(pgv.name, copied=copied, verified=True, note="filled from the copied vectors")


def _pgvector_copy(
    db: Database, tables: Tables, user_id: str | None, batch_size: int, source_had: bool
) -> TableCopy | None:
    """The PostgreSQL target's pgvector copy of the vectors (`None`: it has none): made (and
    filled from the stored vectors, as the store makes it) if the source had one and the
    extension is available, else filled with the rows it lacks."""
    from ..store.pgvector_schema import enable_pgvector, pgvector_table

    if db.backend != "postgresql":
        return None
    name = pgvector_table(tables).name

    def ready(conn: Connection) -> str | None:
        if sa.inspect(conn).has_table(name, schema=tables.schema):
            return "present"
        return "made" if source_had and enable_pgvector(conn, tables) else None

    state = db.run(ready, write=True, schema=True)
    if state == "made":
        return TableCopy(name, note="made and filled from the copied vectors")
    if state == "present":
        return db.run(_pgvector_fill, tables, user_id, batch_size, write=True)  # type: ignore[no-any-return]
    return None


# -- the copy -----------------------------------------------------------------------------------


def _created(db: Database) -> bool:
    """Whether the target's database was missing on its server and is now created; `False`:
    it exists, or the catalog is out of reach. `ValueError`: this login may not create it."""
    try:
        return create_database(db.url)
    except PermissionError as e:
        raise ValueError(
            f"target: the database {db.url.database!r} does not exist on "
            f"{db.url._replace(database=None).render_as_string(hide_password=True)} and this login "
            f"may not create it ({e}): create it first"
        ) from e
    except sa.exc.DBAPIError:
        return False


def _check_version(conn: Connection, tables: Tables) -> None:
    if not sa.inspect(conn).has_table(tables.migrations.name, schema=tables.schema):
        raise ValueError(
            f"source: no langmem-sqlite tables with prefix {tables.prefix!r} in {source_name(conn)}"
        )
    applied = applied_versions(conn, tables)
    if not up_to_date(applied, "source"):
        raise ValueError(
            f"source: schema at version {max(applied, default=0)}, this langmem-sqlite writes "
            f"{LATEST_VERSION}: run `langmem-sqlite migrate --db SOURCE` first"
        )


def copy_database(
    source: DatabaseLike | Database,
    target: DatabaseLike | Database,
    *,
    table_prefix: str = DEFAULT_PREFIX,
    target_prefix: str | None = None,
    schema: str | None = None,
    target_schema: str | None = None,
    user_id: str | None = None,
    batch_size: int = 500,
    progress: bool = False,
) -> CopyReport:
    """Copy every table of `source` into `target` (see the module docstring).

    Args:
        source: the database to read: URL, SQLite path, `Engine` or `Database`.
        target: where to copy: its tables are created or migrated first, and a missing
            database on a server is created where the login may.
        table_prefix: the source's table prefix.
        target_prefix: the target's (default: the same).
        schema: the source's schema (PostgreSQL), if not the default one.
        target_schema: the target's (default: the same).
        user_id: copy only this user's rows.
        batch_size: rows per page read and per target transaction (1 to
            [`MAX_BATCH_SIZE`][langmem_sqlite.operations.copy.MAX_BATCH_SIZE]).
        progress: show a progress bar per table (stderr).

    Returns:
        The counts per table; `verified` when every row was read back equal.

    Raises:
        FileNotFoundError: the source is a SQLite file that does not exist.
        ValueError: `batch_size` or `user_id` is out of range (nothing is read or written),
            the source has no langmem-sqlite tables, or it has an older schema.
        ValueError: the target's database is missing on its server and this login may not
            create it.
        LookupError: the source holds nothing of `user_id` (nothing is written, and the
            target is not created).
        SchemaTooNewError: the source was migrated by a newer version.
        CopyMismatchError: the target holds different rows under the same keys.
    """
    check_positive(batch_size, "batch_size", high=MAX_BATCH_SIZE)
    if user_id is not None:
        user_id = check_id(user_id, "user_id")
    src_tables = get_tables(table_prefix, schema)
    dst_tables = get_tables(
        table_prefix if target_prefix is None else target_prefix,
        schema if target_schema is None else target_schema,
    )
    db = target if isinstance(target, Database) else get_database(target)
    with source_connection(source) as src:
        report = CopyReport(
            source=source_name(src),
            target=db.location(),
            user_id=user_id,
        )
        _check_version(src, src_tables)
        scope = _everything if user_id is None else _user_scope(src, src_tables, user_id)
        targets = {t.name: t for t in dst_tables.metadata.sorted_tables}
        plan = [
            (t, targets[dst_tables.prefix + t.name[len(src_tables.prefix) :]], scope(t))
            for t in src_tables.metadata.sorted_tables
            if t is not src_tables.migrations
        ]
        totals = {
            t.name: sum(
                int(src.execute(sa.select(sa.func.count()).select_from(t).where(c)).scalar_one())
                for c in conditions
            )
            for t, _, conditions in plan
            if conditions is not None
        }
        if user_id is not None and not any(totals.values()):
            raise LookupError(
                f"user_id: nothing of user {user_id!r} in {report.source} "
                f"(prefix {src_tables.prefix!r}): nothing copied"
            )
        try:
            ensure_schema(db, dst_tables)
        except (DatabaseUnavailableError, sa.exc.DBAPIError):
            if not _created(db):
                raise
            ensure_schema(db, dst_tables)
        source_has_pgvector = False
        if src.dialect.name == "postgresql":
            from ..store.pgvector_schema import pgvector_table

            name = pgvector_table(src_tables).name
            source_has_pgvector = sa.inspect(src).has_table(name, schema=src_tables.schema)
        for table, dst, conditions in plan:
            entry = TableCopy(table.name)
            report.tables.append(entry)
            if conditions is None:
                entry.note = "not per user: left out"
                continue
            with progress_bar(table.name, totals[table.name] or 1, progress) as advance:
                advance(0 if totals[table.name] else 1)  # an empty table: a full bar
                for condition in conditions:
                    for rows in _pages(src, table, condition, batch_size):
                        copied, present = _page_into(db, dst, rows)
                        entry.rows += len(rows)
                        entry.copied += copied
                        entry.present += present
                        advance(len(rows))
            if entry.copied and db.backend == "postgresql":
                db.run(move_sequence, dst, write=True)
            entry.verified = True
        filled = _pgvector_copy(db, dst_tables, user_id, batch_size, source_has_pgvector)
        if filled is not None:
            report.tables.append(filled)
    return report


async def acopy_database(
    source: DatabaseLike | Database,
    target: DatabaseLike | Database,
    *,
    table_prefix: str = DEFAULT_PREFIX,
    target_prefix: str | None = None,
    schema: str | None = None,
    target_schema: str | None = None,
    user_id: str | None = None,
    batch_size: int = 500,
    progress: bool = False,
) -> CopyReport:
    """Async [`copy_database`][langmem_sqlite.copy_database]: the same copy, run in a worker thread
    so that the event loop goes on while the tables stream (a copy is one long job of many pages,
    made on the databases' sync connections; the arguments, report and errors are those of
    [`copy_database`][langmem_sqlite.copy_database])."""
    return await asyncio.to_thread(partial(copy_database, **locals()))
