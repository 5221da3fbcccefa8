"""The light lane: SQLAlchemy statements run on a pooled DBAPI connection, compiled once.

A SQLAlchemy :class:`~sqlalchemy.engine.Connection` costs 100 to 150 µs per transaction before
the database does any work (checkout events, transaction objects, the ``Result`` machinery):
more than a whole ``SqliteStore.get``. The hot operations (a store get or put, a checkpoint put
or read) therefore run through :class:`LiteConnection`, which keeps what matters of SQLAlchemy
and drops the rest:

* statements are still SQLAlchemy constructs, compiled by SQLAlchemy for the engine's dialect
  (once per statement object, then cached), with bound parameters only, ordered as the compiled
  statement says and converted by each column type's bind and result processors. A statement
  run as the very object compiled looks its values up directly; others go through SQLAlchemy's
  :meth:`~sqlalchemy.sql.compiler.SQLCompiler.construct_params`. ``IN`` lists are expanded by
  :meth:`~sqlalchemy.sql.compiler.SQLCompiler.construct_expanded_state` once per list length,
  whose SQL is then reused (checked against SQLAlchemy's expansion the first time);
* connections come from the engine's pool, with the dialect's connect-time settings;
* transactions are the driver's own (``BEGIN IMMEDIATE`` for SQLite writers, as elsewhere);
* driver errors are wrapped into SQLAlchemy's exception classes with
  :meth:`~sqlalchemy.exc.DBAPIError.instance`, so :meth:`Database.run`'s retries see the same
  errors on both lanes.

A storage function written for the light lane uses only :meth:`LiteConnection.execute` and
:meth:`LiteConnection.exec_driver_sql` and reads rows by position or attribute; the async API
runs the same function on the async engine's pool inside SQLAlchemy's greenlet bridge.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import exc
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql.cache_key import CacheKey

__all__ = ["LiteConnection", "LiteResult", "Spares", "run_lite", "spares_for"]

_CACHE_LIMIT = 2_000
_COLLECTS = "params" in getattr(CacheKey, "_fields", ())


class _Compiled:
    """A statement compiled for one dialect, with its parameter and result converters."""

    __slots__ = (
        "binds",
        "compiled",
        "converters",
        "expanding",
        "fast",
        "processors",
        "result",
        "row",
        "shapes",
        "sql",
        "types",
    )

    def __init__(
        self, stmt: Any, dialect: Dialect, columns: tuple[str, ...] | None, key: Any = None
    ) -> None:
        # An INSERT or UPDATE sets the columns its parameters name, as in SQLAlchemy. With a
        # cache key, the compiled form serves every statement of that shape (SQLAlchemy's own
        # compiled cache works this way); the values then come from each statement's key.
        if key is None:
            compiled = stmt.compile(dialect=dialect, column_keys=columns)
        else:
            compiled = dialect.statement_compiler(dialect, stmt, cache_key=key, column_keys=columns)
        self.compiled = compiled
        self.sql: str = compiled.string
        self.expanding = any(b.expanding for b in compiled.binds.values())
        escaped = compiled.escaped_bind_names or {}
        processors = {}
        for name, bind in compiled.binds.items():
            proc = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if proc is not None:
                processors[escaped.get(name, name)] = proc
        self.processors: dict[str, Callable[[Any], Any]] = processors
        self.fast = self._fast_binds(compiled, escaped)
        # IN lists: the expanded SQL per shape (list lengths), see _expanded
        self.binds = self._expanding_binds(compiled, escaped)
        self.shapes: dict[tuple[Any, ...], Any] = {}
        selected: list[Any] = getattr(compiled, "_result_columns", None) or []
        self.types = [c.type.dialect_impl(dialect) for c in selected]
        # result processors: made at the first result, from the driver's column type codes
        self.result: list[Callable[[Any], Any] | None] | None = None
        self.converters: list[tuple[int, Callable[[Any], Any]]] = []
        self.row: Any = (
            namedtuple("Row", [str(c.keyname) for c in selected], rename=True)  # type: ignore[misc]
            if selected
            else None
        )

    def _fast_binds(self, compiled: Any, escaped: Mapping[str, str]) -> list[Any] | None:
        """Per driver parameter, in the driver's order: ``(driver name, key, name, required,
        value, processor)``, for :meth:`params` to look values up without ``construct_params``; None
        for statements that need SQLAlchemy's general path (IN lists, callable or collected
        values)."""
        if (
            self.expanding
            or getattr(compiled, "_collected_params", None)  # values given by .params()
            or getattr(compiled, "_render_postcompile", False)
        ):
            return None
        by_name = {}
        for bind, name in compiled.bind_names.items():
            if bind.callable is not None:
                return None
            esc = escaped.get(name, name)
            by_name[esc] = (
                esc,
                bind.key,
                name,
                bind.required,
                bind.value,
                self.processors.get(esc),
            )
        order = compiled.positiontup if compiled.positional else list(by_name)
        if order is None or any(n not in by_name for n in order):
            return None
        return [by_name[n] for n in order]

    def _expanding_binds(self, compiled: Any, escaped: Mapping[str, str]) -> list[Any] | None:
        """``(driver name, key, name, required, value, expanding)`` per bind of a statement with
        IN lists, for :meth:`_expanded`; None when SQLAlchemy's general path is needed."""
        if (
            not self.expanding
            or getattr(compiled, "_collected_params", None)
            or getattr(compiled, "_render_postcompile", False)
            or any(b.callable is not None for b in compiled.bind_names)
        ):
            return None
        return [
            (escaped.get(n, n), b.key, n, b.required, b.value, b.expanding)
            for b, n in compiled.bind_names.items()
        ]

    def _expanded(self, params: Mapping[str, Any]) -> tuple[str, Any] | None:
        """The SQL and driver parameters of a statement with IN lists, or None (then
        ``construct_expanded_state`` does it).

        SQLAlchemy renders the expanded SQL on every call (130 µs for a few short lists). It
        depends only on the lists' lengths, so it is kept per shape; the values are spread
        here (``ids`` -> ``ids_1``, ``ids_2`` ...; tuples -> ``pairs_1_1`` ...), and checked
        once per shape against SQLAlchemy's own expansion (a mismatch keeps the general path).
        """
        binds = self.binds
        if binds is None:
            return None
        raw: dict[str, Any] = {}
        shape: list[Any] = []
        # the lookup of params() inlined: a shared helper cost 1 us of the lane's 5.5 per call
        for esc, bkey, name, required, default, expanding in binds:
            if bkey in params:
                v = params[bkey]
            elif name in params:
                v = params[name]
            elif required:
                return None
            else:
                v = default
            if not expanding:
                raw[esc] = v
                continue
            if not isinstance(v, list | tuple):
                return None
            width = len(v[0]) if v and isinstance(v[0], list | tuple) else 0
            shape.append((esc, len(v), width))
            for i, item in enumerate(v, 1):
                if width:
                    if not isinstance(item, list | tuple) or len(item) != width:
                        return None
                    for j, x in enumerate(item, 1):
                        raw[f"{esc}_{i}_{j}"] = x
                else:
                    raw[f"{esc}_{i}"] = item
        key = tuple(shape)
        entry = self.shapes.get(key)
        if entry is None:
            state = self.compiled.construct_expanded_state(params)
            same = raw == dict(state.parameters)
            entry = (state.statement, state.positiontup, dict(state.processors)) if same else False
            if len(self.shapes) < 256:
                self.shapes[key] = entry
        if not entry:
            return None
        sql, order, processors = entry  # type: ignore[misc]
        for n, proc in processors.items():
            if n in raw:
                raw[n] = proc(raw[n])
        if order is not None:
            return sql, tuple(raw[n] for n in order)
        return sql, raw

    def params(self, params: Mapping[str, Any] | None, key: Any = None) -> tuple[str, Any]:
        """The SQL and the driver parameters for one parameter set (``key``: the cache key of a
        statement that shares this compiled form, which holds that statement's literal
        values)."""
        compiled = self.compiled
        fast = self.fast
        if fast is not None and key is None and params:
            # what construct_params and the bind processors give, without their generality
            out = []
            for _, bkey, name, required, default, proc in fast:
                if bkey in params:
                    v = params[bkey]
                elif name in params:
                    v = params[name]
                elif required:
                    break  # construct_params raises SQLAlchemy's error
                else:
                    v = default
                out.append(v if proc is None else proc(v))
            else:
                if compiled.positional:
                    return self.sql, tuple(out)
                return self.sql, {f[0]: v for f, v in zip(fast, out, strict=True)}
        if self.expanding:
            done = self._expanded(params) if params and key is None else None
            if done is not None:
                return done
            state = compiled.construct_expanded_state(params)
            values = dict(state.parameters)
            for name, proc in state.processors.items():
                if name in values:
                    values[name] = proc(values[name])
            if state.positiontup is not None:
                return state.statement, tuple(values[n] for n in state.positiontup)
            return state.statement, values
        if key is None:
            values = compiled.construct_params(params)
        elif _COLLECTS:  # SQLAlchemy 2.1 also collects some literal values into the key
            values = compiled.construct_params(
                params, extracted_parameters=key.bindparams, _collected_params=key.params
            )
        else:
            values = compiled.construct_params(params, extracted_parameters=key[1])
        for name, proc in self.processors.items():
            if name in values:
                values[name] = proc(values[name])
        if compiled.positional:
            return self.sql, tuple(values[n] for n in compiled.positiontup)
        return self.sql, values


class LiteResult:
    """The rows of one statement, fetched eagerly (a small subset of SQLAlchemy's ``Result``)."""

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
        """The first row, or ``None``."""
        return self.rows[0] if self.rows else None

    def one(self) -> Any:
        """The only row (``NoResultFound``/``MultipleResultsFound`` otherwise)."""
        if not self.rows:
            raise exc.NoResultFound("No row was found when one was required")
        if len(self.rows) > 1:
            raise exc.MultipleResultsFound("Multiple rows were found when exactly one was required")
        return self.rows[0]

    def scalar(self) -> Any:
        """The first column of the first row, or ``None``."""
        return self.rows[0][0] if self.rows else None

    def scalars(self) -> _Scalars:
        """The first column of every row."""
        return _Scalars(r[0] for r in self.rows)


class _Scalars(list[Any]):
    """A list of values that also answers ``.all()``, like SQLAlchemy's ``ScalarResult``."""

    def all(self) -> list[Any]:
        return list(self)


class LiteConnection:
    """A pooled DBAPI connection that executes SQLAlchemy statements (see the module doc)."""

    def __init__(self, raw: PoolProxiedConnection, dialect: Dialect, cache: dict[Any, Any]):
        self.raw = raw
        self.dialect = dialect
        self._cache = cache
        self.cursor = raw.cursor()
        self._widths = hasattr(self.cursor, "pgresult")
        """Whether the cursor tells a result's number of columns cheaply (psycopg)."""
        self.autocommit = False
        """Whether each statement commits by itself (a read on PostgreSQL)."""

    def _compiled(self, stmt: Any, params: Any) -> tuple[_Compiled, Any]:
        """The compiled form of ``stmt``: by identity for the statements the package builds
        once, else by SQLAlchemy's cache key (statements built per call, such as ``.limit(n)``
        of a cached select), whose literal values then come from the key."""
        cache = self._cache
        columns = None
        if getattr(stmt, "is_dml", False) and params:
            columns = tuple(params[0] if isinstance(params, list | tuple) else params)
        entry = cache.get((id(stmt), columns))
        if entry is not None and entry[0] is stmt:
            # compiled from this very statement: its own values are the compiled ones
            return entry[1], None
        key = stmt._generate_cache_key()
        if key is None:  # not cacheable: compile for this call only
            return _Compiled(stmt, self.dialect, columns), None
        shared = cache.get((key.key, columns))
        if shared is not None:
            return shared, key  # same shape as a statement compiled before
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        if any(b.expanding for b in key[1]):
            # IN lists are expanded from the compiled values: this statement only
            compiled = _Compiled(stmt, self.dialect, columns)
            cache[(id(stmt), columns)] = (stmt, compiled)
            return compiled, None
        compiled = _Compiled(stmt, self.dialect, columns, key)
        cache[(key.key, columns)] = compiled
        cache[(id(stmt), columns)] = (stmt, compiled)
        return compiled, None

    def execute(
        self, stmt: Any, params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
    ) -> LiteResult:
        """Execute a SQLAlchemy statement with one parameter set, or a list of them
        (``executemany``, no rows returned)."""
        if isinstance(params, list | tuple) and len(params) == 1:
            # one row: a plain execute (psycopg's executemany enters pipeline mode, which
            # costs several waits on the socket even for one row)
            params = params[0]
        c, key = self._compiled(stmt, params)
        cur = self.cursor
        if isinstance(params, list | tuple):
            if not params:
                return LiteResult([], 0)
            if c.expanding:
                count = 0
                for p in params:
                    count += self.execute(stmt, p).rowcount
                return LiteResult([], count)
            sql = c.sql
            rows = [c.params(p, key)[1] for p in params]
            cur.executemany(sql, rows)
            return LiteResult([], cur.rowcount)
        sql, args = c.params(params, key)  # type: ignore[arg-type]
        cur.execute(sql, args)
        return self._result(cur, c)

    def execute_raw(self, stmt: Any, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Execute a select and return the driver's rows as they are (no type processing:
        for bulk reads of plain columns, such as every stored vector)."""
        c, key = self._compiled(stmt, params)
        sql, args = c.params(params, key)
        self.cursor.execute(sql, args)
        return list(self.cursor.fetchall())

    def estimated_rows(self, stmt: Any, params: Mapping[str, Any] | None = None) -> float:
        """PostgreSQL: the planner's estimate of the rows a select returns (``EXPLAIN``: the
        statement is planned, not run)."""
        c, key = self._compiled(stmt, params)
        sql, args = c.params(params, key)
        self.cursor.execute("EXPLAIN (FORMAT JSON) " + sql, args)
        plan: Any = self.cursor.fetchall()[0][0]
        if isinstance(plan, str | bytes):
            plan = json.loads(plan)
        return float(plan[0]["Plan"]["Plan Rows"])

    def exec_driver_sql(self, sql: str, params: Any = None) -> LiteResult:
        """Execute a constant SQL string (no user text in it) with driver parameters."""
        cur = self.cursor
        if params is None:
            cur.execute(sql)
        else:
            cur.execute(sql, params)
        return self._result(cur, None)

    def _result(self, cur: Any, c: _Compiled | None) -> LiteResult:
        if self._widths and c is not None and c.result is not None:
            # psycopg builds ``description`` anew on every access (4.6 us for 7 columns); once a
            # statement's result processors are known, its number of columns is enough
            result = cur.pgresult
            width = result.nfields if result is not None else 0
            if not width:
                return LiteResult([], cur.rowcount)
            if width == len(c.types):
                return self._rows(cur.fetchall(), c, cur.rowcount)
        description = cur.description
        if description is None:
            return LiteResult([], cur.rowcount)
        fetched = cur.fetchall()
        if c is None or c.row is None or len(c.types) != len(description):
            return LiteResult([tuple(r) for r in fetched], cur.rowcount)
        if c.result is None:
            dialect = self.dialect
            procs = [
                t.result_processor(dialect, d[1]) for t, d in zip(c.types, description, strict=True)
            ]
            c.converters = [(i, p) for i, p in enumerate(procs) if p is not None]
            c.result = procs
        return self._rows(fetched, c, cur.rowcount)

    @staticmethod
    def _rows(fetched: list[Any], c: _Compiled, rowcount: int) -> LiteResult:
        """Rows of ``c``'s columns, through its result processors."""
        make = c.row._make  # type: ignore[union-attr]
        converters = c.converters
        if not converters:
            return LiteResult(list(map(make, fetched)), rowcount)
        rows = []
        for r in fetched:
            values = list(r)
            for i, p in converters:
                v = values[i]
                if v is not None:
                    values[i] = p(v)
            rows.append(make(values))
        return LiteResult(rows, rowcount)


# compiled statements per dialect object (an engine's own; gone with it)
_caches: weakref.WeakKeyDictionary[Dialect, dict[Any, Any]] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def _cache_for(dialect: Dialect) -> dict[Any, Any]:
    cache = _caches.get(dialect)
    if cache is None:
        with _caches_lock:
            cache = _caches.setdefault(dialect, {})
    return cache


_forks = 0
"""How many times this process was forked into (a child's count differs from its parent's)."""


def _forked() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class Spares:
    """Idle connections kept for the light lane, between its uses.

    A pool checkout and checkin, with the cursor made for each, cost 10 to 30 us: a quarter of
    a whole ``SqliteStore.get``, and a tenth of a ``PostgresStore.put``. So the lane keeps its
    own idle connections, with their cursor:

    * SQLite (``detach=True``): connections are taken from the pool once (with its
      connect-time settings) and detached from it; they need no reset between uses, since
      each use commits or rolls back.
    * PostgreSQL (``autocommit=True``): connections stay checked out of the pool, so that its
      limits still count them, and stay in the driver's autocommit mode, in which the lane's
      reads and one-statement writes run (no toggle of the mode per use); a transaction
      turns it off for its own length. At most ``limit`` are kept idle, and a connection goes
      back to the pool in the mode it came in.

    A forked child never reuses its parent's connections.
    """

    def __init__(self, limit: int, *, detach: bool = True, autocommit: bool = False) -> None:
        self.limit = limit
        self.detach = detach
        self.autocommit = autocommit
        """Whether kept connections stay in the driver's autocommit mode (PostgreSQL)."""
        self._items: list[LiteConnection] = []
        self._fork = _forks

    def take(self, engine: Engine) -> LiteConnection:
        """An idle connection, or a new one from ``engine``'s pool."""
        if self._fork == _forks:
            try:
                conn = self._items.pop()
            except IndexError:
                pass
            else:
                conn.autocommit = False
                return conn
        raw = engine.raw_connection()
        if self.detach:
            raw.detach()
        conn = LiteConnection(raw, engine.dialect, _cache_for(engine.dialect))
        if self.autocommit:
            try:
                raw.dbapi_connection.autocommit = True  # type: ignore[union-attr]
            except BaseException:
                raw.close()
                raise
        return conn

    def give(self, conn: LiteConnection) -> None:
        """Keep ``conn`` for reuse (released instead when enough are kept or it is broken)."""
        if self._fork != _forks:
            self._items, self._fork = [], _forks  # the parent's: never touch them
        if conn.raw.is_valid and len(self._items) < self.limit:
            self._items.append(conn)
        else:
            self._release(conn)

    def _release(self, conn: LiteConnection) -> None:
        """Close ``conn``, or return it to its pool in the driver's default mode."""
        raw = conn.raw
        if self.autocommit and raw.is_valid:
            try:
                raw.dbapi_connection.autocommit = False  # type: ignore[union-attr]
            except Exception:
                raw.invalidate()
        raw.close()

    def close(self) -> None:
        """Release the idle connections."""
        items, self._items = self._items, []
        if self._fork == _forks:
            for conn in items:
                self._release(conn)

    def discard(self) -> None:
        """Drop the idle connections without using them (after a disconnect: a restarted
        server dropped them too)."""
        items, self._items = self._items, []
        if self._fork == _forks:
            for conn in items:
                conn.raw.invalidate()


def spares_for(engine: Engine) -> Spares | None:
    """The light lane's idle connections for a sync ``engine``: SQLite files (16, detached);
    PostgreSQL with a ``QueuePool`` (up to 8, a quarter of the pool's limit, so that the
    pool's other users always find connections); None for others (kept in the pool)."""
    from sqlalchemy.pool import QueuePool, StaticPool

    name = engine.dialect.name
    pool = engine.pool
    if name == "sqlite":
        return None if isinstance(pool, StaticPool) else Spares(16)
    if name == "postgresql" and type(pool) is QueuePool:
        overflow = pool._max_overflow  # no public accessor
        capacity = 10**6 if overflow < 0 else pool.size() + overflow
        limit = min(8, capacity // 4)
        return Spares(limit, detach=False, autocommit=True) if limit else None
    return None


def run_lite(
    engine: Engine,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    write: bool,
    single: bool = False,
    spares: Spares | None = None,
) -> Any:
    """Run ``fn(lite_connection, *args)`` in one transaction on a connection of ``engine``'s pool
    (or of ``spares``: see :class:`Spares`).

    Called directly for sync engines, and inside SQLAlchemy's greenlet bridge for the sync core
    of an async engine. Driver errors come out as SQLAlchemy's (``OperationalError`` ...); a
    dropped connection is invalidated, and so are the pool's other connections as old as it.
    """
    dialect = engine.dialect
    dbapi_error = dialect.loaded_dbapi.Error
    single_read = single and not write
    if spares is None:
        raw = engine.raw_connection()
        conn = None
    else:
        conn = spares.take(engine)
        raw = conn.raw
    name = dialect.name
    autocommit = False
    restore: bool | None = None  # the driver's autocommit mode to put back, if changed
    commit = True
    try:
        if conn is None:
            conn = LiteConnection(raw, dialect, _cache_for(dialect))
        dbapi: Any = raw.dbapi_connection
        if name == "sqlite":
            if single_read:
                commit = False  # no transaction was opened
            else:
                conn.cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        elif name == "postgresql" and (single or not write):
            # a read, or a write of one statement, needs no BEGIN and COMMIT round trips. The
            # drivers' ``autocommit`` attribute, not the dialect's isolation-level calls: two
            # setter calls instead of four, and the engine's isolation level stays as it was.
            autocommit = conn.autocommit = True
            if not dbapi.autocommit:
                dbapi.autocommit = True
                restore = False
        elif name == "postgresql" and dbapi.autocommit:
            # a transaction on a spare kept in autocommit mode (see Spares)
            dbapi.autocommit = False
            restore = True
        result = fn(conn, *args)
        if commit and not autocommit:
            raw.commit()
        return result
    except dbapi_error as e:
        invalid = dialect.is_disconnect(e, raw.dbapi_connection, None) or _broken(raw)
        if invalid:
            raw.invalidate(e)
            _invalidate_older(engine)
            if spares is not None:
                spares.discard()
        else:
            _rollback(raw)
        raise exc.DBAPIError.instance(
            None, None, e, dbapi_error, connection_invalidated=invalid, dialect=dialect
        ) from e
    except BaseException:
        _rollback(raw)
        raise
    finally:
        if restore is not None and raw.is_valid:
            try:
                dbapi.autocommit = restore
            except dbapi_error:
                raw.invalidate()
        if spares is None or conn is None:
            raw.close()
        else:
            spares.give(conn)


def _broken(raw: PoolProxiedConnection) -> bool:
    """Whether the driver says its connection is gone (psycopg: ``closed``; PyMySQL: not
    ``open``), for disconnect messages the dialect does not know, such as psycopg's
    "connection socket closed"."""
    conn = raw.dbapi_connection
    return getattr(conn, "closed", False) is True or getattr(conn, "open", True) is False


def _rollback(raw: PoolProxiedConnection) -> None:
    try:
        if raw.is_valid:
            raw.rollback()
    except Exception:
        raw.invalidate()


def _invalidate_older(engine: Engine) -> None:
    """After a disconnect, retire the pool's idle connections too (a restarted server dropped
    them all), as SQLAlchemy's ``Connection`` does."""
    engine.dispose(close=False)
