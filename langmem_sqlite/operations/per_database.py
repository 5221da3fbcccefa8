"""What the whole-database operations do differently per database: table names and sizes for
`stats`, scrubbing a SQLite file after an erasure, creating a copy's target database on its
server, and PostgreSQL's id sequences after a copy."""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection
from sqlalchemy.pool import NullPool

from ..engine.dialects import rules_class
from ..engine.unit import Unit

_CHECKPOINT_TRIES = 50
"""Times an erasure tries to empty the write-ahead log while readers keep it busy."""

_CATALOGS = {
    "postgresql": ("postgres", "pg_database", "datname"),
    "mysql": ("information_schema", "schemata", "schema_name"),
    "mariadb": ("information_schema", "schemata", "schema_name"),
}
"""Where a server lists its databases: (the database a login reaches to create another one,
the catalog's table, its name column)."""


def table_names(unit: Unit, schema: str | None) -> set[str]:
    """The tables of `schema` (default: the connection's own)."""
    return set(sa.inspect(unit.connection).get_table_names(schema=schema))


def table_bytes(unit: Unit, table: sa.Table) -> int | None:
    """Bytes on disk of `table` with its indexes, where the database tells."""
    name = unit.connection.dialect.name
    if name == "sqlite":
        stmt = sa.text("SELECT SUM(pgsize) FROM dbstat WHERE name = :t")
        try:  # the dbstat virtual table is compiled into most SQLite builds
            size = unit.execute(stmt, {"t": table.name}).scalar()
        except sa.exc.OperationalError as e:  # no such table: dbstat
            if "dbstat" not in str(e):
                raise
            return None
    elif name == "postgresql":
        qualified = f"{table.schema}.{table.name}" if table.schema else table.name
        stmt = sa.text("SELECT pg_total_relation_size(to_regclass(:t))")
        size = unit.execute(stmt, {"t": qualified}).scalar()
    else:
        stmt = sa.text(
            "SELECT data_length + index_length FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND table_name = :t"
        )
        size = unit.execute(stmt, {"t": table.name}).scalar()
    return None if size is None else int(size)


def scrub(conn: Connection, vacuum: bool) -> bool:
    """Leave no copy of deleted rows in a SQLite file, on a connection that commits as it goes:
    `VACUUM` (if asked) rewrites the file, so that no free page keeps one, and
    `PRAGMA wal_checkpoint(TRUNCATE)` empties the write-ahead log. `False`: a reader kept the
    log busy (try again)."""
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


def create_database(url: URL) -> bool:
    """Create the database `url` names on its server if it is not there: `True` if it was
    created, `False` if it exists (or the database is embedded).

    Raises:
        sqlalchemy.exc.DBAPIError: the server or its catalog cannot be reached.
        PermissionError: the database is not there and this login may not create it.
    """
    catalog = _CATALOGS.get(url.get_backend_name())
    if catalog is None or not url.database:
        return False
    home, name, column = catalog
    rules = rules_class(url)
    admin = url.set(database=home)
    engine = sa.create_engine(
        rules.driver_url(admin),
        connect_args=rules.engine_kwargs(admin).get("connect_args", {}),
        poolclass=NullPool,
        isolation_level="AUTOCOMMIT",
    )
    try:
        with engine.connect() as conn:
            listed = sa.table(name, sa.column(column))
            found = sa.select(sa.literal(1)).where(listed.c[column] == url.database)
            if conn.execute(found).first() is not None:
                return False
            quoted = conn.dialect.identifier_preparer.quote_identifier(url.database)
            try:
                conn.exec_driver_sql(f"CREATE DATABASE {quoted}")
            except sa.exc.DBAPIError as e:
                raise PermissionError(" ".join(str(e.orig).split())) from e
        return True
    finally:
        engine.dispose()


def move_sequence(unit: Unit, table: sa.Table) -> None:
    """Move PostgreSQL's id sequence of `table` past its largest id, once rows were written
    with their own ids (MySQL, MariaDB and SQLite move their counters themselves)."""
    column = table.autoincrement_column
    if column is None:
        return
    quote = unit.connection.dialect.identifier_preparer
    name = quote.format_table(table)
    largest = f"SELECT MAX({quote.quote(column.name)}) AS m FROM {name}"
    stmt = sa.text(
        f"SELECT setval(pg_get_serial_sequence(:t, :c), m) FROM ({largest}) AS top "
        "WHERE m IS NOT NULL"
    )
    unit.execute(stmt, {"t": name, "c": column.name})
