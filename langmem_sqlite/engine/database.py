"""A [`Database`][langmem_sqlite.Database]: an engine, its rules object, and the running of units
of work on it (sync, in worker threads, or on a caller's `AsyncEngine`) under the retry rule."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import exc
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import StaticPool

from .. import plans
from .dialects import Rules, rules_for
from .retry import Attempts, default_retry_seconds
from .unit import Statements, Step, watch_disconnects, work

T = TypeVar("T")


_SHORTEST_TURN_WAIT = 1.0
"""Seconds a call waits at least for its turn among this process's writers (one try's wait for
a SQLite file's lock), even past its retry deadline."""

_WORKER_THREADS = 16
"""Worker threads per database for the async API (as many as a SQLite file's pool keeps)."""


Plan = Generator[Step, Any, T]
"""An operation of several units of work, written once for sync and async callers: a generator
that yields [`Step`][langmem_sqlite.engine.Step]s and receives each one's result (or has its
exception thrown in)."""


_file_locks: dict[str, threading.RLock] = {}
_file_locks_guard = threading.Lock()


def _file_write_lock(database: str) -> threading.RLock:
    """The lock this process's writers to one SQLite file share, whatever the engine or URL
    that reached it: they take turns on it rather than on SQLite's polling busy handler."""
    key = database if database.startswith("file:") else os.path.realpath(database)
    with _file_locks_guard:
        lock = _file_locks.get(key)
        if lock is None:
            lock = _file_locks[key] = threading.RLock()
        return lock


_created: weakref.WeakSet[Database] = weakref.WeakSet()
"""Databases whose engines this package created (disposed at exit, and in a forked child)."""


def _after_fork_in_child() -> None:
    """In a forked child: free the locks (their holders stayed in the parent) and drop the
    parent's pooled connections without closing them."""
    for lock in _file_locks.values():
        reinit = getattr(lock, "_at_fork_reinit", None)
        if reinit is not None:
            reinit()
    for db in list(_created):
        if db._sync is not None:
            db._sync.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_at_exit() -> None:
    """Close the pooled connections this package opened (SQLite's last connection to a file
    removes its `-wal` and `-shm`)."""
    pid = os.getpid()
    for db in list(_created):
        if db._pid == pid:
            with contextlib.suppress(Exception):
                db.dispose()


class Database:
    """A database: its sync engine, its rules object, and the running of work on it.

    Obtain instances with [`get_database`][langmem_sqlite.get_database]. An `AsyncEngine` given by
    the caller is used for the async API as given (the sync API uses a sync engine for the same
    URL).
    """

    def __init__(
        self,
        sync_engine: Engine | None,
        async_engine: AsyncEngine | None = None,
        *,
        retry_seconds: float | None = None,
        owned: bool = False,
    ) -> None:
        if sync_engine is None and async_engine is None:
            raise ValueError("connection: need a sync or an async engine")
        self._sync = sync_engine
        self.async_engine = async_engine
        """The caller's `AsyncEngine`, if one was given (else async calls use worker threads)."""
        core = sync_engine if sync_engine is not None else async_engine.sync_engine  # type: ignore[union-attr]
        self.url: URL = core.url
        """The database URL (password hidden when rendered with `str`)."""
        self.rules: Rules = rules_for(core)
        """This database's rules object (see `langmem_sqlite.engine.dialects`)."""
        for engine in (sync_engine, async_engine.sync_engine if async_engine else None):
            if engine is not None:
                self.rules.configure(engine)
                watch_disconnects(engine)
        self._statements = Statements()
        self.retry_seconds: float = (
            default_retry_seconds() if retry_seconds is None else float(retry_seconds)
        )
        """How long a call keeps retrying transient failures (see `retry`)."""
        self.reached = False
        """Whether this process has connected once (until then connecting is not retried)."""
        self.noticed_at = -math.inf
        """When a call last logged that it waits for this database."""
        self.busy: str | None = None
        """Why the last try that met contention failed (until a unit holding a turn succeeds)."""
        # An in-memory SQLite database is one connection shared by every thread
        # (StaticPool): its units of work take turns.
        shared = sync_engine is not None and isinstance(sync_engine.pool, StaticPool)
        self._turns: threading.RLock | contextlib.nullcontext[None] = (
            threading.RLock() if shared else contextlib.nullcontext()
        )
        self._writers: threading.RLock | contextlib.nullcontext[None] = self._turns
        path = self.rules.file_path(sync_engine.url) if sync_engine is not None else None
        if path and not shared:  # an embedded file: its writers in this process take turns
            self._writers = _file_write_lock(path)
        self._workers: ThreadPoolExecutor | None = None
        self._pid = os.getpid()
        self.facts: dict[str, Any] = {}
        """Server settings read once and remembered (e.g. MySQL's `max_allowed_packet`)."""
        self.ready: set[Any] = set()
        """Keys of the sets of tables seen up to date by this process."""
        self.lock = threading.Lock()
        self.reading: bool = bool(core.get_execution_options().get("langmem_reading", False))
        """Opened by [`reading_database`][langmem_sqlite.engine.reading_database]:
        the package's schema is checked, never created or migrated, on this database."""
        if owned:
            _created.add(self)

    # -- what it is -----------------------------------------------------------------------------

    @property
    def sync_engine(self) -> Engine:
        """The sync engine."""
        if self._sync is None:
            raise TypeError(
                "connection: this AsyncEngine's driver has no known sync twin; "
                "use the async methods (a*) or pass a URL"
            )
        return self._sync

    @property
    def backend(self) -> str:
        """`"sqlite"`, `"postgresql"`, `"mysql"` or `"mariadb"`."""
        return self.rules.name

    def safe_url(self) -> str:
        """The URL as text, password hidden (for messages)."""
        return self.url.render_as_string(hide_password=True)

    def location(self) -> str:
        """Where the database is, for messages: a SQLite file's path, else `safe_url()`."""
        return self.rules.file_path(self.url) or self.safe_url()

    # -- running work ---------------------------------------------------------------------------

    def run(self, fn: Callable[..., T], *args: Any, **flags: bool) -> T:
        """Run `fn(unit, *args)` as one unit of work (`flags`: those of
        [`Step`][langmem_sqlite.engine.Step]).

        Transient failures re-run the whole unit, connection checkout included, until the
        retry deadline (`retry`).
        """
        return self._run(Step(fn, args, **flags))  # type: ignore[arg-type, no-any-return]

    async def arun(self, fn: Callable[..., T], *args: Any, **flags: bool) -> T:
        """The async twin of [`run`][langmem_sqlite.engine.Database.run]: the same call, in one of
        this database's worker threads, or on the caller's `AsyncEngine`.

        A cancelled call stops waiting at once; a unit of work it started in a worker thread
        still ends (committed or rolled back) there.
        """
        return await self._arun(Step(fn, args, **flags))  # type: ignore[arg-type, no-any-return]

    def _run(self, step: Step) -> Any:
        attempts = Attempts(self)
        while True:
            try:
                return self._once(step, attempts)
            except exc.DBAPIError as e:
                time.sleep(attempts.pause(e))

    async def _arun(self, step: Step) -> Any:
        if self.async_engine is None:
            call = functools.partial(self._run, step)
            return await asyncio.get_running_loop().run_in_executor(self._worker_threads(), call)
        attempts = Attempts(self)
        while True:
            try:
                return await self._aonce(step)
            except exc.DBAPIError as e:
                await asyncio.sleep(attempts.pause(e))

    def drive(self, plan: Plan[T]) -> T:
        """Run a [`Plan`][langmem_sqlite.engine.Plan] synchronously and return its result."""
        return plans.drive(plan, self._run)

    async def adrive(self, plan: Plan[T]) -> T:
        """The async twin of [`drive`][langmem_sqlite.engine.Database.drive]."""
        return await plans.adrive(plan, self._arun)

    def _once(self, step: Step, attempts: Attempts) -> Any:
        # a unit that commits as it goes may be long: it does not hold the writers' turn
        turn = self._writers if step.write and not step.own_transaction else self._turns
        with self._taking(turn, attempts), self.sync_engine.connect() as conn:
            self.reached = True
            if step.own_transaction:
                return step.fn(conn, *step.args)
            return work(conn, self.rules, self._statements, step)

    async def _aonce(self, step: Step) -> Any:
        engine = self.async_engine
        assert engine is not None
        rules, statements = self.rules, self._statements

        def on(conn: Connection) -> Any:
            self.reached = True
            if step.own_transaction:
                return step.fn(conn, *step.args)
            return work(conn, rules, statements, step)

        async with engine.connect() as conn:
            return await conn.run_sync(on)

    @contextlib.contextmanager
    def _taking(
        self, turn: threading.RLock | contextlib.nullcontext[None], attempts: Attempts
    ) -> Iterator[None]:
        """Hold `turn` (writers' turn on a SQLite file, units' turn on a database in memory),
        waiting for it until the call's deadline at most.

        Raises:
            DatabaseUnavailableError: the turn did not come before the deadline.
        """
        if isinstance(turn, contextlib.nullcontext):
            yield
            return
        if not turn.acquire(timeout=max(attempts.left(), _SHORTEST_TURN_WAIT)):
            # the writer holding the turn is either waiting for the file too or is a long one
            raise attempts.expired(self.busy or "a long write of this process holds its lock")
        try:
            yield
            self.busy = None  # the unit succeeded: nothing holds the file now
        finally:
            turn.release()

    def _worker_threads(self) -> ThreadPoolExecutor:
        """The threads that run async calls (made again in a forked child)."""
        with self.lock:
            if self._workers is None or self._pid != os.getpid():
                self._workers = ThreadPoolExecutor(_WORKER_THREADS, "langmem-sqlite")
                self._pid = os.getpid()
            return self._workers

    # -- the end --------------------------------------------------------------------------------

    def dispose(self) -> None:
        """Close the pooled connections of the sync engine (a SQLite file's last one removes
        its write-ahead log) and let idle worker threads end; later calls open new ones."""
        workers, self._workers = self._workers, None
        if workers is not None and self._pid == os.getpid():
            workers.shutdown(wait=False)
        if self._sync is not None:
            self._sync.dispose()

    async def adispose(self) -> None:
        """The async twin of [`dispose`][langmem_sqlite.engine.Database.dispose] (a caller's
        `AsyncEngine` is left to its owner)."""
        await asyncio.get_running_loop().run_in_executor(None, self.dispose)
