"""The execution seam: where every storage statement of the package meets a database driver.

A [`Session`][langmem_sqlite.engine.Session] is one unit of work (a transaction, or a single
statement) on one pooled DBAPI connection. Storage functions are written against it once;
[`Database`][langmem_sqlite.Database] runs them for the sync API, in worker threads for the async
API, or on a caller's `AsyncEngine` through SQLAlchemy's `run_sync` bridge.

It keeps what matters of SQLAlchemy at a fraction of a `Connection`'s cost per transaction:

* statements are SQLAlchemy constructs with bound parameters only, compiled with the public
  `compile` for the engine's dialect. The
  compiled form is kept in one bounded `StatementCache` per engine, by the statement
  object (so a statement declared once is compiled once; one built per call is compiled per
  call);
* values go through `construct_params` (`IN`
  lists through `construct_expanded_state`) and
  each type's bind processor; rows through each type's result processor;
* connections come from the engine's pool (`raw_connection`),
  with its connect-time settings; the dialect object starts and ends the work
  (`BEGIN IMMEDIATE` for SQLite writers, autocommit for PostgreSQL's single statements);
* driver errors become SQLAlchemy's exception classes
  (`instance`), so that one retry rule
  (`retry`) sees the same errors on every path.

Rows are named tuples (immutable), read by position or attribute.
"""

from __future__ import annotations

import json
import threading
from collections import namedtuple
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import exc
from sqlalchemy.engine import Dialect as SADialect
from sqlalchemy.engine import Engine
from sqlalchemy.pool import PoolProxiedConnection

from .dialects import Dialect

__all__ = ["Result", "Session", "StatementCache", "checkout", "work"]

STATEMENT_CACHE_SIZE = 2_000
"""Compiled statements kept per engine (the oldest go first)."""


class _Compiled:
    """One statement compiled for one dialect, with its parameter and row converters."""

    __slots__ = (
        "compiled",
        "converters",
        "expanding",
        "order",
        "processors",
        "row",
        "sql",
        "types",
    )

    def __init__(self, stmt: Any, dialect: SADialect, columns: tuple[str, ...] | None) -> None:
        # an INSERT or UPDATE sets the columns its parameters name, as in SQLAlchemy
        compiled = stmt.compile(dialect=dialect, column_keys=columns)
        self.compiled = compiled
        self.sql: str = compiled.string
        self.expanding = bool(compiled.post_compile_params) or any(
            b.expanding for b in compiled.binds.values()
        )
        escaped = compiled.escaped_bind_names or {}
        processors = {}
        for name, bind in compiled.binds.items():
            proc = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if proc is not None:
                processors[escaped.get(name, name)] = proc
        self.processors: dict[str, Callable[[Any], Any]] = processors
        self.order: Sequence[str] | None = compiled.positiontup if compiled.positional else None
        selected = list(getattr(stmt, "exported_columns", None) or ())
        self.types = [c.type.dialect_impl(dialect) for c in selected]
        self.row: Any = (
            namedtuple("Row", [str(c.key) for c in selected], rename=True)  # type: ignore[misc]
            if selected
            else None
        )
        # result processors, made at the first result from the driver's column type codes
        self.converters: list[tuple[int, Callable[[Any], Any]]] | None = None

    def params(self, params: Mapping[str, Any] | None) -> tuple[str, Any]:
        """The SQL and the driver's parameters for one set of values."""
        compiled = self.compiled
        if self.expanding:
            state = compiled.construct_expanded_state(params)
            values = dict(state.parameters)
            for name, proc in state.processors.items():
                if name in values:
                    values[name] = proc(values[name])
            if state.positiontup is not None:
                return state.statement, tuple(values[n] for n in state.positiontup)
            return state.statement, values
        values = compiled.construct_params(params)
        for name, proc in self.processors.items():
            if name in values:
                values[name] = proc(values[name])
        if self.order is not None:
            return self.sql, tuple(values[n] for n in self.order)
        return self.sql, values


class StatementCache:
    """The statements of one engine: those the features build per set of tables (by a key of
    their choosing, see [`Session.statement`][langmem_sqlite.engine.Session.statement]), and the
    compiled form of each statement object run, by that object and the columns an INSERT sets.

    Bounded (`STATEMENT_CACHE_SIZE` of each kind; the oldest entries go first). Entries
    hold the statement itself, so an id is never mistaken for another statement's; what they
    hold is SQLAlchemy's constructs, compiled forms and converters, never a value of a call.
    """

    def __init__(self, dialect: SADialect, size: int = STATEMENT_CACHE_SIZE) -> None:
        self.dialect = dialect
        self.size = size
        self._entries: dict[tuple[int, tuple[str, ...] | None], tuple[Any, _Compiled]] = {}
        self._built: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def built(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The statement `build()` makes for `key` (made once while it is kept)."""
        stmt = self._built.get(key)
        if stmt is None:
            stmt = build()
            with self._lock:
                built = self._built
                while len(built) >= self.size:
                    del built[next(iter(built))]
                built[key] = stmt
        return stmt

    def get(self, stmt: Any, columns: tuple[str, ...] | None) -> _Compiled:
        """The compiled form of `stmt` (compiled now if not kept)."""
        key = (id(stmt), columns)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is stmt:
            return entry[1]
        compiled = _Compiled(stmt, self.dialect, columns)
        with self._lock:
            entries = self._entries
            while len(entries) >= self.size:
                del entries[next(iter(entries))]
            entries[key] = (stmt, compiled)
        return compiled


class Result:
    """The rows of one statement, fetched at once (the part of SQLAlchemy's `Result` the
    storage functions use)."""

    __slots__ = ("rowcount", "rows")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)

    def all(self) -> list[Any]:
        """Every row."""
        return self.rows

    def first(self) -> Any:
        """The first row, or `None`."""
        return self.rows[0] if self.rows else None

    def one(self) -> Any:
        """The only row (`NoResultFound`/`MultipleResultsFound` otherwise)."""
        if not self.rows:
            raise exc.NoResultFound("No row was found when one was required")
        if len(self.rows) > 1:
            raise exc.MultipleResultsFound("Multiple rows were found when exactly one was required")
        return self.rows[0]

    def scalar(self) -> Any:
        """The first column of the first row, or `None`."""
        return self.rows[0][0] if self.rows else None

    def scalar_one(self) -> Any:
        """The first column of the only row."""
        return self.one()[0]

    def scalars(self) -> _Scalars:
        """The first column of every row."""
        return _Scalars(r[0] for r in self.rows)


class _Scalars(list[Any]):
    """A list of values that also answers `.all()`, like SQLAlchemy's `ScalarResult`."""

    def all(self) -> list[Any]:
        return list(self)


class Session:
    """One unit of work on one pooled DBAPI connection (see the module documentation).

    Attributes:
        raw: the pooled connection (its `info` dict lasts as long as the connection).
        dialect: SQLAlchemy's dialect of the engine.
        rules: this package's dialect object (`Dialect`).
    """

    __slots__ = ("_cache", "cursor", "dialect", "in_transaction", "raw", "rules")

    def __init__(self, raw: PoolProxiedConnection, rules: Dialect, cache: StatementCache) -> None:
        self.raw = raw
        self.rules = rules
        self.dialect = cache.dialect
        self._cache = cache
        self.cursor = raw.cursor()
        self.in_transaction = False
        """Whether this unit of work runs in a transaction (else each statement commits on its
        own, or it is a single read)."""

    def statement(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The statement `build()` makes for `key`, built once and kept in the engine's one
        bounded statement cache (`key`: immutable, naming what the statement depends on, such
        as the tables' key and the shape of a filter)."""
        return self._cache.built(key, build)

    def _compiled(self, stmt: Any, params: Any) -> _Compiled:
        columns = None
        if getattr(stmt, "is_dml", False) and params:
            columns = tuple(params[0] if isinstance(params, list | tuple) else params)
        return self._cache.get(stmt, columns)

    def execute(
        self, stmt: Any, params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
    ) -> Result:
        """Execute a SQLAlchemy statement with one set of values, or a list of them
        (`executemany`: no rows returned)."""
        if isinstance(params, list | tuple) and len(params) == 1:
            # one row: a plain execute (psycopg's executemany enters pipeline mode, which
            # costs several waits on the socket even for one row)
            params = params[0]
        c = self._compiled(stmt, params)
        cur = self.cursor
        if isinstance(params, list | tuple):
            if not params:
                return Result([], 0)
            if c.expanding:  # each set of values may expand to different SQL
                return Result([], sum(self.execute(stmt, p).rowcount for p in params))
            cur.executemany(c.sql, [c.params(p)[1] for p in params])
            return Result([], cur.rowcount)
        sql, args = c.params(params)  # type: ignore[arg-type]
        cur.execute(sql, args)
        return self._result(cur, c)

    def execute_raw(self, stmt: Any, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Execute a select and return the driver's rows as they are (no type processing: for
        bulk reads of plain columns, such as every stored vector)."""
        sql, args = self._compiled(stmt, params).params(params)
        self.cursor.execute(sql, args)
        return list(self.cursor.fetchall())

    def estimated_rows(self, stmt: Any, params: Mapping[str, Any] | None = None) -> float:
        """PostgreSQL: the planner's estimate of the rows a select returns (`EXPLAIN`: the
        statement is planned, not run)."""
        sql, args = self._compiled(stmt, params).params(params)
        self.cursor.execute("EXPLAIN (FORMAT JSON) " + sql, args)
        plan: Any = self.cursor.fetchall()[0][0]
        if isinstance(plan, str | bytes):
            plan = json.loads(plan)
        return float(plan[0]["Plan"]["Plan Rows"])

    def exec_driver_sql(self, sql: str, params: Any = None) -> Result:
        """Execute a constant SQL string (no user text in it) with driver parameters."""
        cur = self.cursor
        if params is None:
            cur.execute(sql)
        else:
            cur.execute(sql, params)
        return self._result(cur, None)

    def _result(self, cur: Any, c: _Compiled | None) -> Result:
        description = cur.description
        if description is None:
            return Result([], cur.rowcount)
        fetched = cur.fetchall()
        if c is None or c.row is None or len(c.types) != len(description):
            return Result([tuple(r) for r in fetched], cur.rowcount)
        converters = c.converters
        if converters is None:
            dialect = self.dialect
            procs = (
                t.result_processor(dialect, d[1]) for t, d in zip(c.types, description, strict=True)
            )
            converters = c.converters = [(i, p) for i, p in enumerate(procs) if p is not None]
        make = c.row._make
        if not converters:
            return Result(list(map(make, fetched)), cur.rowcount)
        rows = []
        for r in fetched:
            values = list(r)
            for i, p in converters:
                v = values[i]
                if v is not None:
                    values[i] = p(v)
            rows.append(make(values))
        return Result(rows, cur.rowcount)


def checkout(engine: Engine) -> PoolProxiedConnection:
    """A connection from `engine`'s pool (a driver error comes out as SQLAlchemy's, with no
    statement: the connection was never made)."""
    try:
        return engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as e:
        raise _wrapped(e, engine, None, None) from e


def work(
    raw: PoolProxiedConnection,
    engine: Engine,
    rules: Dialect,
    cache: StatementCache,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    write: bool,
    single: bool,
    transaction: bool = False,
    close: bool = True,
) -> Any:
    """Run `fn(session, *args)` as one unit of work on `raw`, a connection of `engine`
    (closed afterwards, unless `close` is False: a caller's `AsyncEngine` connection).

    Driver errors come out as SQLAlchemy's (`OperationalError` ...). A dropped connection is
    invalidated, and so are the pool's other connections as old as it (a restarted server
    dropped them too).
    """
    dbapi_error = engine.dialect.loaded_dbapi.Error
    dbapi: Any = raw.dbapi_connection
    txn = None
    try:
        session = Session(raw, rules, cache)
        txn = rules.begin(dbapi, session.cursor, write, single, transaction)
        session.in_transaction = txn.commit
        result = fn(session, *args)
        if txn.commit:
            raw.commit()
        return result
    except dbapi_error as e:
        error = _wrapped(e, engine, rules, raw)
        if not error.connection_invalidated:
            _rollback(raw)
        raise error from e
    except BaseException:
        _rollback(raw)
        raise
    finally:
        if txn is not None and raw.is_valid:
            try:
                rules.end(dbapi, txn)
            except dbapi_error:
                raw.invalidate()
        if close:
            raw.close()


def _wrapped(
    e: Exception, engine: Engine, rules: Dialect | None, raw: PoolProxiedConnection | None
) -> exc.DBAPIError:
    """`e` as SQLAlchemy's exception class; a dead connection is invalidated first."""
    dialect = engine.dialect
    invalid = False
    if raw is not None and rules is not None:
        dbapi = raw.dbapi_connection
        invalid = dialect.is_disconnect(e, dbapi, None) or rules.broken(dbapi)  # type: ignore[arg-type]
        if invalid:
            raw.invalidate(e)
            engine.dispose(close=False)  # the pool's older connections died with it
    error = exc.DBAPIError.instance(
        None,
        None,
        e,
        dialect.loaded_dbapi.Error,
        connection_invalidated=invalid,
        dialect=dialect,
    )
    assert isinstance(error, exc.DBAPIError)
    return error


def _rollback(raw: PoolProxiedConnection) -> None:
    try:
        if raw.is_valid:
            raw.rollback()
    except Exception:
        raw.invalidate()
