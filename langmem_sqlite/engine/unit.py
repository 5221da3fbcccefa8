"""The unit of work every storage function receives: a SQLAlchemy `Connection` and the rules of
its database. Statements run with `Connection.execute`, so SQLAlchemy's compiled cache, type
processing and engine events (`echo`, `before_cursor_execute`, tracing) see every one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import event
from sqlalchemy.engine import Connection, CursorResult, Engine, ExceptionContext

from .dialects import Rules, rules_named

STATEMENTS_KEPT = 2_000
"""Statements kept per engine by [`Unit.statement`][langmem_sqlite.engine.Unit.statement]
(the oldest go first)."""


_KEEP_ROWCOUNT = {"preserve_rowcount": True}
"""SQLAlchemy reads an INSERT's `rowcount` before closing the cursor only when asked."""


class Step(NamedTuple):
    """One unit of work of a [`Plan`][langmem_sqlite.engine.Plan]: `fn(unit, *args)`."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    write: bool = False
    """The work writes (SQLite: it takes the write lock at its start)."""
    own_transaction: bool = False
    """`fn` takes a SQLAlchemy `Connection` in "commit as you go" mode and commits itself
    (schema changes, `VACUUM`)."""
    schema: bool = False
    """`fn` inspects or changes the schema: it takes a SQLAlchemy `Connection` in a
    transaction (for `inspect()` and savepoints) instead of a
    [`Unit`][langmem_sqlite.engine.Unit]."""
    single: bool = False
    """`fn` runs one statement: it needs no transaction around it."""
    transaction: bool = False
    """`fn` only reads but must run as one transaction (PostgreSQL: settings made with
    `SET LOCAL` last for the unit, also through a transaction pooler)."""


class Statements:
    """The statements the features build per set of tables, by a key of their choosing, one
    bounded dict per engine. It holds SQLAlchemy constructs only, never a value of a call."""

    def __init__(self) -> None:
        self._built: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The statement `build()` makes for `key` (made once while it is kept)."""
        stmt = self._built.get(key)
        if stmt is None:
            stmt = build()
            with self._lock:
                while len(self._built) >= STATEMENTS_KEPT:
                    del self._built[next(iter(self._built))]
                self._built[key] = stmt
        return stmt


class Unit:
    """One unit of work: a SQLAlchemy `Connection` and this package's rules for its database.

    Attributes:
        connection: SQLAlchemy's `Connection` (its `dialect`, `info` and events are
            SQLAlchemy's).
        rules: this package's rules object (`engine.dialects`: what differs between databases).
    """

    __slots__ = ("_statements", "connection", "rules")

    def __init__(self, connection: Connection, rules: Rules, statements: Statements) -> None:
        self.connection = connection
        self.rules = rules
        self._statements = statements

    def statement(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The statement `build()` makes for `key`, built once per engine (`key`: immutable,
        naming what the statement depends on, such as the tables' key and a filter's shape)."""
        return self._statements.get(key, build)

    def execute(
        self, stmt: Any, params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
    ) -> CursorResult[Any]:
        """Execute a SQLAlchemy statement with one set of values, or a list of them (its
        `rowcount` kept for every kind of statement, inserts included)."""
        return self.connection.execute(stmt, params, execution_options=_KEEP_ROWCOUNT)  # type: ignore[arg-type]

    def exec_driver_sql(self, sql: str, params: Any = None) -> CursorResult[Any]:
        """Execute a constant SQL string (no user text in it) with driver parameters."""
        return self.connection.exec_driver_sql(sql, params)


def work(connection: Connection, rules: Rules, statements: Statements, step: Step) -> Any:
    """Run `step.fn(unit, *step.args)` as one unit of work on `connection` (a schema step gets
    the `Connection` itself), prepared and put back by the rules object; a success commits, a
    failure rolls back."""
    restore = rules.begin(connection, step.write, step.single, step.transaction or step.schema)
    try:
        on = connection if step.schema else Unit(connection, rules, statements)
        result = step.fn(on, *step.args)
        if connection.in_transaction():
            connection.commit()
        return result
    except BaseException:
        if connection.in_transaction() and not connection.invalidated:
            connection.rollback()
        raise
    finally:
        if not connection.invalidated:
            rules.end(connection, restore)


def _on_error(context: ExceptionContext) -> None:
    """Treat a connection its driver reports closed as a disconnect (for messages SQLAlchemy's
    dialect does not know): SQLAlchemy then invalidates it with the pool's older ones."""
    conn = context.connection
    if context.is_disconnect or conn is None or conn.closed:
        return
    dbapi = conn.connection.dbapi_connection
    if dbapi is not None and rules_named(context.dialect.name).broken(dbapi):
        context.is_disconnect = True


def watch_disconnects(engine: Engine) -> None:
    """Install the disconnect rule on `engine` (once per engine)."""
    if not event.contains(engine, "handle_error", _on_error):
        event.listen(engine, "handle_error", _on_error)
