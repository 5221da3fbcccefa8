"""Engines: one place that turns "where is the database" into pooled sync and async engines.

Every adapter in the package (chat history, checkpointer, store) goes through
:func:`get_database`, which accepts

* a URL string (``"sqlite:///memory.db"``, ``"postgresql://..."``, ``"mariadb://..."``),
* a plain path (``"memory.db"`` becomes a SQLite file),
* a SQLAlchemy :class:`~sqlalchemy.engine.Engine`, or
* a SQLAlchemy :class:`~sqlalchemy.ext.asyncio.AsyncEngine`,

and returns a shared :class:`Database` holding a sync engine and, where the driver has an async
twin, an async engine for the same database. Databases are cached, so building a history object
per request (as ``RunnableWithMessageHistory`` does) never creates a new pool.

Each storage operation is written once, as a function taking a sync
:class:`~sqlalchemy.engine.Connection`. :meth:`Database.run` executes it in a transaction on the
sync engine; :meth:`Database.arun` executes the *same* function on the async engine through
:meth:`~sqlalchemy.ext.asyncio.AsyncConnection.run_sync`, except on a SQLite file reached by a
URL, a path or an ``Engine``: there it runs :meth:`Database.run` in a worker thread (see
:meth:`Database.arun`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import re
import threading
import time
import weakref
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import event, exc
from sqlalchemy.engine import URL, Connection, Engine, create_engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.util import greenlet_spawn

from .lite import run_lite, spares_for

__all__ = ["Database", "DatabaseLike", "Plan", "Step", "get_database"]

T = TypeVar("T")

DatabaseLike = str | os.PathLike[str] | URL | Engine | AsyncEngine
"""Anything :func:`get_database` accepts."""

#: sync driver name -> async driver name for the same database
_ASYNC_DRIVER = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+pysqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg_async",
    "postgresql+psycopg": "postgresql+psycopg_async",
    "postgresql+psycopg2": "postgresql+psycopg_async",
    "mysql": "mysql+asyncmy",
    "mysql+pymysql": "mysql+asyncmy",
    "mariadb": "mariadb+asyncmy",
    "mariadb+pymysql": "mariadb+asyncmy",
}
#: async driver name -> sync driver name for the same database
_SYNC_DRIVER = {
    "sqlite+aiosqlite": "sqlite+pysqlite",
    "postgresql+psycopg_async": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
    "postgresql+asyncpg": "postgresql+psycopg",
    "mysql+aiomysql": "mysql+pymysql",
    "mysql+asyncmy": "mysql+pymysql",
    "mariadb+aiomysql": "mariadb+pymysql",
    "mariadb+asyncmy": "mariadb+pymysql",
}
#: bare dialect names -> the driver this package uses
_DEFAULT_DRIVER = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite connection waits for another writer before giving up."""

SQLITE_WAL_AUTOCHECKPOINT_PAGES = 4000
"""Pages in the write-ahead log before a commit copies them into the database (SQLite's default
is 1,000). A checkpoint writes each page once however often it changed since the last one and
ends with the only fsync of ``synchronous=NORMAL``: a batch of 1,000 store items with vectors
dirties about 1,080 pages, so with the default every such commit also checkpointed (41 ms per
batch at 40,000 items; 35 ms with 4,000)."""

SQLITE_JOURNAL_SIZE_LIMIT = 32 * 1024 * 1024
"""Bytes of write-ahead log left on disk after a checkpoint resets it (the rest is truncated)."""

_RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


class Step(NamedTuple):
    """One transaction of a :data:`Plan`: ``fn(connection, *args)`` (a named tuple: made on
    every call of the hot paths, where a frozen dataclass cost 1.5 us more)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    write: bool = False
    own_transaction: bool = False
    lite: bool = False
    """``fn`` takes a :class:`~langmem_sqlite.lite.LiteConnection` (see :mod:`.lite`)."""
    single: bool = False
    """(light lane) ``fn`` reads with one statement: no transaction needed around it."""


Plan = Generator[Step, Any, T]
"""An operation made of several transactions, written once for sync and async callers.

A plan is a generator that yields :class:`Step` objects and receives each step's result (or has
its exception thrown in). :meth:`Database.drive` runs it with :meth:`Database.run`,
:meth:`Database.adrive` with :meth:`Database.arun`.
"""


def _normalize_url(url: URL) -> URL:
    """Pick this package's drivers for bare dialect names (``postgresql://`` -> psycopg 3)."""
    name = url.drivername
    if name == "postgres":
        name = "postgresql"
    return url.set(drivername=_DEFAULT_DRIVER.get(name, name))


def _to_url(target: str | os.PathLike[str] | URL) -> URL:
    if isinstance(target, URL):
        return _normalize_url(target)
    text = os.fspath(target)
    if not text or not text.strip():
        raise ValueError("connection: empty database URL or path")
    if "://" not in text:
        # A plain path: a SQLite file (":memory:" stays in memory).
        if text == ":memory:":
            return make_url("sqlite://")
        return make_url("sqlite:///" + str(Path(text).expanduser().absolute()))
    try:
        return _normalize_url(make_url(text))
    except exc.ArgumentError as e:
        raise ValueError(f"connection: not a database URL: {text!r}") from e


def _is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    """Per-connection SQLite settings: WAL (checkpointed every 4,000 pages), busy timeout, NORMAL
    sync, foreign keys.

    Also hands transaction control to SQLAlchemy's ``begin`` event (see :func:`_sqlite_on_begin`),
    so that write transactions can start with ``BEGIN IMMEDIATE``.
    """
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
    cur.execute(f"PRAGMA journal_size_limit = {SQLITE_JOURNAL_SIZE_LIMIT}")
    cur.execute("PRAGMA journal_mode")
    mode = str(cur.fetchone()[0]).lower()
    if mode not in ("wal", "memory"):
        cur.execute("PRAGMA journal_mode = WAL")
    cur.close()


def _sqlite_on_begin(conn: Connection) -> None:
    """Start SQLite transactions ourselves: ``BEGIN IMMEDIATE`` for writers.

    A deferred transaction that reads and then writes can fail with ``SQLITE_BUSY`` without
    waiting for ``busy_timeout``; taking the write lock up front makes writers queue instead.
    """
    options = conn.get_execution_options()
    if options.get("isolation_level") == "AUTOCOMMIT":
        return  # e.g. VACUUM, which cannot run inside a transaction
    mode = "IMMEDIATE" if options.get("langmem_write") else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")


def _configure(engine: Engine) -> None:
    """Install the per-dialect connection settings on a sync engine (or an async one's core)."""
    if engine.dialect.name == "sqlite" and not getattr(engine, "_langmem_configured", False):
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        engine._langmem_configured = True  # type: ignore[attr-defined]


def _engine_kwargs(url: URL) -> dict[str, Any]:
    if _is_memory_sqlite(url):
        return {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    if url.get_backend_name() == "sqlite":
        # SQLite connections are cheap and writers queue on the file lock, not in the pool:
        # enough of them that threads never wait 30 s for one (the default is 5 + 10).
        return {
            "connect_args": {"check_same_thread": False},
            "pool_size": 16,
            "max_overflow": 48,
        }
    # No pre-ping (a round trip on every checkout): a dropped connection fails the
    # transaction's first statement, and Database.run re-runs the transaction on a new one.
    kwargs: dict[str, Any] = {"pool_size": 10, "max_overflow": 22}
    if url.get_backend_name() == "postgresql":
        kwargs["json_serializer"] = jsonb_dumps
    if url.get_backend_name() in ("mysql", "mariadb"):
        kwargs["pool_recycle"] = 3600
        if "charset" not in url.query:
            kwargs["connect_args"] = {"charset": "utf8mb4"}
    return kwargs


# A JSON string, or a number with a positive exponent (outside strings).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?e\+\d+')


def _plain_number(match: re.Match[str]) -> str:
    token = match.group()
    if token[0] == '"':
        return token
    return format(Decimal(token), "f") + ".0"


def jsonb_dumps(value: Any) -> str:
    """``json.dumps`` for PostgreSQL's ``JSONB``, which keeps numbers as ``numeric``: a float such
    as ``3.9e16`` would come back as the integer ``39000000000000000``. Floats written with a
    positive exponent are spelled out with a decimal point instead (``39000000000000000.0``),
    which ``numeric`` keeps and JSON decoders read back as the same float."""
    return jsonb_text(json.dumps(value))


def jsonb_text(text: str) -> str:
    """JSON text made safe for ``JSONB`` as :func:`jsonb_dumps` does (for text already made)."""
    if "e+" not in text:
        return text
    return _JSON_TOKEN.sub(_plain_number, text)


def _is_retryable(error: BaseException) -> bool:
    """Transient errors worth re-running a whole transaction for."""
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    if not isinstance(error, exc.OperationalError):
        return False
    text = str(error.orig).lower()
    return any(
        s in text
        for s in (
            "database is locked",
            "database table is locked",
            "deadlock",
            "lock wait timeout",
            "could not serialize",
            "server closed the connection",
            "lost connection",
            "gone away",
            "terminating connection",
            "connection socket closed",
            "connection is closed",
            # a server restarting: refused or not yet accepting (bounded by the retry delays)
            "connection refused",
            "shutting down",
            "starting up",
            "can't connect",
        )
    )


class _Done(NamedTuple):
    value: Any


def _advance(plan: Plan[Any], result: Any, error: BaseException | None) -> Step | _Done:
    """Feed a step's outcome into a plan; return its next step, or its result when finished."""
    try:
        return plan.throw(error) if error is not None else plan.send(result)
    except StopIteration as stop:
        return _Done(stop.value)


_WORKER_THREADS = 16
"""Worker threads per database for async calls that run the sync path (see ``Database.arun``):
as many as the SQLite file pool keeps, so that reads go on while writers wait for the file's
lock."""

_file_locks: dict[str, threading.RLock] = {}
_file_locks_guard = threading.Lock()


def _file_write_lock(database: str) -> threading.RLock:
    """The lock that this process's writers to one SQLite file share (one per file, whatever
    the engine or URL spelling that reached it)."""
    key = database if database.startswith("file:") else os.path.realpath(database)
    with _file_locks_guard:
        lock = _file_locks.get(key)
        if lock is None:
            lock = _file_locks[key] = threading.RLock()
        return lock


def _reinit_file_locks() -> None:
    """In a forked child, no thread holds a lock (the parent's holders did not come along)."""
    for lock in _file_locks.values():
        reinit = getattr(lock, "_at_fork_reinit", None)
        if reinit is not None:
            reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_file_locks)


def _retry_delay(error: exc.DBAPIError, delay: float) -> float:
    """Seconds to wait before re-running a transaction that failed with ``error``; re-raise it
    when it is not transient."""
    if not _is_retryable(error):
        raise error
    return delay * (1 + random.random())


class Database:
    """A database reachable through a sync engine and, where possible, an async engine.

    Obtain instances with :func:`get_database`; they are shared per URL or engine. Both
    engines point at the same database, so data written with :meth:`run` is visible to
    :meth:`arun` and vice versa.
    """

    def __init__(
        self,
        sync_engine: Engine | None,
        async_engine: AsyncEngine | None = None,
        async_url: URL | None = None,
    ) -> None:
        if sync_engine is None and async_engine is None:
            raise ValueError("connection: need a sync or an async engine")
        self._sync = sync_engine
        self._given_async = async_engine
        self._async_url = async_url
        self._loop_engines: weakref.WeakKeyDictionary[Any, tuple[AsyncEngine, AsyncEngine]] = (
            weakref.WeakKeyDictionary()
        )
        if sync_engine is not None:
            _configure(sync_engine)
        if async_engine is not None:
            _configure(async_engine.sync_engine)
        self._writer_sync = (
            sync_engine.execution_options(langmem_write=True) if sync_engine else None
        )
        # An in-memory SQLite database is one connection shared by every thread
        # (StaticPool): its transactions must take turns.
        shared = sync_engine is not None and isinstance(sync_engine.pool, StaticPool)
        self._turns: threading.RLock | contextlib.nullcontext[None] = (
            threading.RLock() if shared else contextlib.nullcontext()
        )
        # the light lane keeps its own idle connections (see lite.Spares)
        sqlite_file = (
            sync_engine is not None and sync_engine.dialect.name == "sqlite" and not shared
        )
        self._spares = spares_for(sync_engine) if sync_engine is not None else None
        # ... and its writers in this process take turns on a lock rather than on SQLite's
        # busy handler, which sleeps (1, 2, 5, 10 ... ms) between polls of the file lock
        self._writers: threading.RLock | contextlib.nullcontext[None] = self._turns
        if sqlite_file:
            assert sync_engine is not None
            self._writers = _file_write_lock(sync_engine.url.database or "")
        # Async calls on a SQLite file run the sync path in a worker thread: one thread hop per
        # transaction, where aiosqlite makes one per statement (see arun). Not for an AsyncEngine
        # the caller gave: it is used as given.
        self._threaded = sqlite_file and async_engine is None
        self._workers: ThreadPoolExecutor | None = None
        self._workers_pid = 0
        self.facts: dict[str, Any] = {}
        """Server settings read once and remembered (e.g. MySQL's ``max_allowed_packet``)."""
        self.ready: set[Any] = set()
        """Keys of schemas already migrated in this process (see :mod:`langmem_sqlite.migrate`)."""
        self.lock = threading.Lock()

    @property
    def async_engine(self) -> AsyncEngine | None:
        """The caller's AsyncEngine, or the one this package made for the running event loop
        (``None`` when the database has no async driver: async calls then use a thread)."""
        pair = self._async_pair()
        return None if pair is None else pair[0]

    def _async_pair(self) -> tuple[AsyncEngine, AsyncEngine] | None:
        """(engine, writer) for the running loop.

        Async drivers bind pooled connections to the event loop that opened them, so an engine
        this package creates serves one loop only: ``asyncio.run`` twice, or one loop per test,
        each get their own pool instead of connections from a closed loop.
        """
        if self._given_async is not None:
            engine = self._given_async
            return engine, engine.execution_options(langmem_write=True)
        if self._async_url is None:
            return None
        loop = asyncio.get_running_loop()
        pair = self._loop_engines.get(loop)
        if pair is None:
            engine = create_async_engine(self._async_url, **_engine_kwargs(self._async_url))
            _configure(engine.sync_engine)
            pair = (engine, engine.execution_options(langmem_write=True))
            with self.lock:
                self._loop_engines[loop] = pair
        return pair

    @property
    def sync_engine(self) -> Engine:
        """The sync engine (every database has one; see :func:`get_database`)."""
        if self._sync is None:
            raise TypeError(
                "connection: this AsyncEngine's driver has no known sync twin; "
                "use the async methods (a*) or pass a URL"
            )
        return self._sync

    @property
    def dialect(self) -> str:
        """``"sqlite"``, ``"postgresql"``, ``"mysql"`` or ``"mariadb"``."""
        engine = self._sync if self._sync is not None else self._given_async.sync_engine  # type: ignore[union-attr]
        name = engine.dialect.name
        if name == "mysql" and getattr(engine.dialect, "is_mariadb", False):
            return "mariadb"
        return name

    @property
    def url(self) -> URL:
        """The database URL (password hidden when rendered with ``str``)."""
        engine = self._sync if self._sync is not None else self._given_async.sync_engine  # type: ignore[union-attr]
        return engine.url

    def run(
        self,
        fn: Callable[..., T],
        *args: Any,
        write: bool = False,
        own_transaction: bool = False,
        lite: bool = False,
        single: bool = False,
    ) -> T:
        """Run ``fn(connection, *args)`` in one transaction on the sync engine.

        ``write=True`` takes SQLite's write lock at the start. Transient errors (a locked
        SQLite file, a dropped server connection, a deadlock) re-run the whole transaction a
        bounded number of times. With ``own_transaction=True``, ``fn`` gets a connection in
        "commit as you go" mode and commits itself (what is not committed is rolled back).
        With ``lite=True``, ``fn`` gets a :class:`~langmem_sqlite.lite.LiteConnection` instead:
        the same statements without the per-transaction cost of a SQLAlchemy ``Connection``
        (``single=True``: a read of one statement, run without a transaction around it).
        """
        if lite:
            base = self.sync_engine

            turn = self._writers if write else self._turns

            def attempt() -> T:
                with turn:
                    return run_lite(base, fn, args, write, single, self._spares)  # type: ignore[no-any-return]

        else:
            engine = self._writer_sync if write else self.sync_engine
            assert engine is not None
            opener = engine.connect if own_transaction else engine.begin
            # a transaction that commits as it goes may be long: it does not hold the turn
            turn = self._writers if write and not own_transaction else self._turns

            def attempt() -> T:
                with turn, opener() as conn:
                    return fn(conn, *args)

        for delay in _RETRY_DELAYS:
            try:
                return attempt()
            except exc.DBAPIError as e:
                time.sleep(_retry_delay(e, delay))
        return attempt()

    async def arun(
        self,
        fn: Callable[..., T],
        *args: Any,
        write: bool = False,
        own_transaction: bool = False,
        lite: bool = False,
        single: bool = False,
    ) -> T:
        """The async twin of :meth:`run`: the same ``fn``, on the async engine via ``run_sync``.

        A SQLite file reached by a URL, a path or an ``Engine`` runs :meth:`run` itself in one of
        this database's worker threads instead: one thread hop per transaction, where aiosqlite
        makes one per statement (an async ``put`` of a small checkpoint took 3.5 times the sync
        one that way, and about 1.7 times this way), and the process's sync and async writers to the
        file take turns on the same lock. So does a database without an async engine (an
        in-memory SQLite database, or an engine whose driver has no async twin). Either way the
        event loop never blocks. A cancelled call stops waiting at once; the transaction it
        started in a worker thread still ends (committed or rolled back) there.
        """
        pair = None if self._threaded else self._async_pair()
        if pair is None:
            call = functools.partial(
                self.run,
                fn,
                *args,
                write=write,
                own_transaction=own_transaction,
                lite=lite,
                single=single,
            )
            return await asyncio.get_running_loop().run_in_executor(self._worker_threads(), call)
        if lite:
            core = pair[0].sync_engine

            async def attempt() -> T:
                return await greenlet_spawn(run_lite, core, fn, args, write, single)  # type: ignore[no-any-return]

        else:
            engine = pair[1] if write else pair[0]
            opener = engine.connect if own_transaction else engine.begin

            async def attempt() -> T:
                async with opener() as conn:
                    return await conn.run_sync(fn, *args)

        for delay in _RETRY_DELAYS:
            try:
                return await attempt()
            except exc.DBAPIError as e:
                await asyncio.sleep(_retry_delay(e, delay))
        return await attempt()

    def run_step(self, step: Step) -> Any:
        """Run one :class:`Step` of a plan with :meth:`run`."""
        return self.run(
            step.fn,
            *step.args,
            write=step.write,
            own_transaction=step.own_transaction,
            lite=step.lite,
            single=step.single,
        )

    async def arun_step(self, step: Step) -> Any:
        """The async twin of :meth:`run_step`."""
        return await self.arun(
            step.fn,
            *step.args,
            write=step.write,
            own_transaction=step.own_transaction,
            lite=step.lite,
            single=step.single,
        )

    def drive(self, plan: Plan[T]) -> T:
        """Run a :data:`Plan` synchronously and return its result."""
        step = _advance(plan, None, None)
        while isinstance(step, Step):
            try:
                step = _advance(plan, self.run_step(step), None)
            except Exception as e:
                step = _advance(plan, None, e)
        return step.value  # type: ignore[no-any-return]

    async def adrive(self, plan: Plan[T]) -> T:
        """Run a :data:`Plan` on the async engine and return its result."""
        step = _advance(plan, None, None)
        while isinstance(step, Step):
            try:
                result = await self.arun_step(step)
            except Exception as e:
                step = _advance(plan, None, e)
            else:
                step = _advance(plan, result, None)
        return step.value  # type: ignore[no-any-return]

    def _worker_threads(self) -> ThreadPoolExecutor:
        """The threads that run this database's async calls when they run the sync path (made
        on first use, and again in a forked child, which has none of its parent's threads)."""
        pid = os.getpid()
        workers = self._workers
        if workers is None or self._workers_pid != pid:
            with self.lock:
                workers = self._workers
                if workers is None or self._workers_pid != pid:
                    workers = ThreadPoolExecutor(_WORKER_THREADS, "langmem-sqlite")
                    self._workers, self._workers_pid = workers, pid
        return workers

    def dispose(self) -> None:
        """Close pooled connections of the engines this package created (and let this
        database's idle worker threads end)."""
        workers, self._workers = self._workers, None
        if workers is not None and self._workers_pid == os.getpid():
            workers.shutdown(wait=False)
        if self._spares is not None:
            self._spares.close()
        if self._sync is not None:
            self._sync.dispose()
        for engine, _ in list(self._loop_engines.values()):
            engine.sync_engine.dispose(close=False)
        self._loop_engines.clear()

    async def adispose(self) -> None:
        """Close the async pool of the running event loop (call before the loop ends)."""
        pair = (
            None
            if self._given_async is not None
            else self._loop_engines.pop(asyncio.get_running_loop(), None)
        )
        if pair is not None:
            await pair[0].dispose()


_registry: dict[Any, Database] = {}
_registry_lock = threading.Lock()


_EXTRA_FOR = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql"}


def _from_url(url: URL, engine_args: dict[str, Any]) -> Database:
    try:
        sync = create_engine(url, **{**_engine_kwargs(url), **engine_args})
    except exc.NoSuchModuleError as e:
        raise ValueError(f"connection: unknown database kind {url.drivername!r}") from e
    except ImportError as e:
        extra = _EXTRA_FOR.get(url.get_backend_name(), url.get_backend_name())
        raise ImportError(
            f"connection: the driver for {url.drivername!r} is not installed: "
            f"pip install 'langmem-sqlite[{extra}]' ({e})"
        ) from e
    async_name = _ASYNC_DRIVER.get(url.drivername)
    if async_name is None or _is_memory_sqlite(url):
        return Database(sync)
    return Database(sync, async_url=url.set(drivername=async_name))


def _from_engine(engine: Engine) -> Database:
    url = engine.url
    async_name = _ASYNC_DRIVER.get(url.drivername)
    if async_name is None or _is_memory_sqlite(url) or engine.pool.__class__ is StaticPool:
        return Database(engine)
    return Database(engine, async_url=url.set(drivername=async_name))


def _from_async_engine(engine: AsyncEngine) -> Database:
    url = engine.url
    sync_name = _SYNC_DRIVER.get(url.drivername)
    if sync_name is None or _is_memory_sqlite(url):
        return Database(None, engine)
    surl = url.set(drivername=sync_name)
    return Database(create_engine(surl, **_engine_kwargs(surl)), engine)


def get_database(
    connection: DatabaseLike | Database, *, engine_args: dict[str, Any] | None = None
) -> Database:
    """Return the shared :class:`Database` for a URL, a path, an Engine or an AsyncEngine.

    Calling it again with the same URL (and ``engine_args``) or engine returns the same object,
    and so the same connection pools. ``engine_args`` go to ``create_engine`` for URLs.

    Raises:
        ValueError: ``connection`` is empty or not a database URL.
        TypeError: ``connection`` is of an unsupported type.
    """
    if isinstance(connection, Database):
        return connection
    if isinstance(connection, AsyncEngine):
        key: Any = ("async", id(connection.sync_engine))
        build: Callable[[], Database] = lambda: _from_async_engine(connection)  # noqa: E731
    elif isinstance(connection, Engine):
        key = ("sync", id(connection))
        build = lambda: _from_engine(connection)  # noqa: E731
    elif isinstance(connection, str | os.PathLike | URL):
        url = _to_url(connection)
        extra = dict(engine_args or {})
        key = ("url", url.render_as_string(hide_password=False), repr(sorted(extra.items())))
        build = lambda: _from_url(url, extra)  # noqa: E731
    else:
        raise TypeError(
            "connection: expected a URL, a path, an Engine or an AsyncEngine, "
            f"got {type(connection).__name__}"
        )
    with _registry_lock:
        db = _registry.get(key)
        if db is None or (key[0] != "url" and not _alive(db, connection)):  # type: ignore[arg-type]
            db = _registry[key] = build()
        return db


def _alive(db: Database, engine: Engine | AsyncEngine) -> bool:
    # id() of a garbage-collected engine can be reused; make sure the entry is that engine.
    if isinstance(engine, AsyncEngine):
        return db._given_async is engine
    return db._sync is engine
