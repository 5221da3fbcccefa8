"""The store's lifecycle: setup, TTL sweeping (a thread, or a task of an event loop), closing,
and `from_conn_string`.

LangGraph's async stores spell these `await store.setup()`, `await store.sweep_ttl()`,
`await store.start_ttl_sweeper()` and `await store.stop_ttl_sweeper()`. Called from a
coroutine (an `async def`), these methods return the awaitable of their `a` twin, so that
code written for AsyncSqliteStore or AsyncPostgresStore runs as it is, without blocking its
event loop; called from anywhere else they run at once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from langgraph.store.base import TTLConfig
from sqlalchemy.engine import URL

from .. import clock
from ..engine import Database, Plan, Step
from ..engine.migrations import schema_plan
from ..engine.schema import Tables
from .checks import check_sweep_minutes, check_timeout
from .writes import sweep_expired

if TYPE_CHECKING:
    from .store import SQLStore

__all__: list[str] = []

logger = logging.getLogger(__name__)


class _Lifecycle:
    """Setup, sweepers and closing of [`SQLStore`][langmem_sqlite.SQLStore]."""

    db: Database
    tables: Tables
    ttl_config: TTLConfig | None
    _sweeper: threading.Thread | None
    _stop: threading.Event
    _atask: asyncio.Task[None] | None
    _astop: asyncio.Event | None

    if TYPE_CHECKING:  # the sync API's (see .store)

        def _pgvector_plan(self) -> Plan[bool]: ...

    def _sweep_plan(self) -> Plan[int]:
        yield from schema_plan(self.db, self.tables)
        return (yield Step(sweep_expired, (self.tables, clock.now_us()), write=True))

    def sweep_ttl(self) -> int:
        """Delete every item whose TTL has lapsed (and its vectors); return how many (from a
        coroutine: an awaitable of that number, as `AsyncPostgresStore.sweep_ttl`)."""
        if _called_from_coroutine():
            return self.asweep_ttl()  # type: ignore[return-value]
        return self.db.drive(self._sweep_plan())

    async def asweep_ttl(self) -> int:
        """Async [`sweep_ttl`][langmem_sqlite.store.store.SQLStore.sweep_ttl]."""
        return await self.db.adrive(self._sweep_plan())

    def _sweep_seconds(self, sweep_interval_minutes: float | None) -> float:
        interval = sweep_interval_minutes
        if interval is None:
            interval = (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        return check_sweep_minutes(interval)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> threading.Thread:
        """Sweep in a daemon thread every `sweep_interval_minutes` (default: the TTL config's
        `sweep_interval_minutes`, else 5) until
        [`stop_ttl_sweeper`][langmem_sqlite.store.store.SQLStore.stop_ttl_sweeper]; idempotent. From
        a coroutine: an awaitable of
        [`astart_ttl_sweeper`][langmem_sqlite.store.store.SQLStore.astart_ttl_sweeper]'s task
        instead."""
        seconds = self._sweep_seconds(sweep_interval_minutes)
        if _called_from_coroutine():
            return self.astart_ttl_sweeper(sweep_interval_minutes)  # type: ignore[return-value]
        if self._sweeper is not None and self._sweeper.is_alive():
            return self._sweeper
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(seconds):
                try:
                    self.sweep_ttl()
                except Exception:  # keep sweeping after a transient failure
                    logger.exception("TTL sweep failed")

        self._sweeper = threading.Thread(target=loop, name="langmem-store-ttl", daemon=True)
        self._sweeper.start()
        return self._sweeper

    async def astart_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep in a task of the running event loop every `sweep_interval_minutes` until
        [`astop_ttl_sweeper`][langmem_sqlite.store.store.SQLStore.astop_ttl_sweeper] (or the task is
        cancelled); idempotent. Returns the task, as `AsyncSqliteStore.start_ttl_sweeper` and
        `AsyncPostgresStore.start_ttl_sweeper`."""
        seconds = self._sweep_seconds(sweep_interval_minutes)
        if self._atask is not None and not self._atask.done():
            return self._atask
        stop = self._astop = asyncio.Event()

        async def loop() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), seconds)
                    return
                except asyncio.TimeoutError:
                    pass
                try:
                    await self.asweep_ttl()
                except Exception:  # keep sweeping after a transient failure
                    logger.exception("TTL sweep failed")

        self._atask = asyncio.get_running_loop().create_task(loop(), name="langmem-store-ttl")
        return self._atask

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; True once it has stopped (or was not running). From a
        coroutine: an awaitable of
        [`astop_ttl_sweeper`][langmem_sqlite.store.store.SQLStore.astop_ttl_sweeper]."""
        timeout = check_timeout(timeout)
        if _called_from_coroutine():
            return self.astop_ttl_sweeper(timeout)  # type: ignore[return-value]
        self._stop.set()
        if self._astop is not None:  # a task sweeper: its loop ends it (see astop_ttl_sweeper)
            self._astop_soon()
        if self._sweeper is None:
            return True
        self._sweeper.join(timeout)
        return not self._sweeper.is_alive()

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweepers (task and thread); True once they have stopped (or were not
        running), False if `timeout` seconds passed first."""
        timeout = check_timeout(timeout)
        self._stop.set()
        task, self._atask = self._atask, None
        if task is not None and not task.done():
            assert self._astop is not None
            self._astop.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except asyncio.TimeoutError:
                self._atask = task
                return False
        if self._sweeper is not None and self._sweeper.is_alive():
            await asyncio.get_running_loop().run_in_executor(None, self._sweeper.join, timeout)
            return not self._sweeper.is_alive()
        return True

    def _astop_soon(self) -> None:
        """Ask the task sweeper to end, from any thread (its event loop may be elsewhere)."""
        task, stop = self._atask, self._astop
        if task is None or stop is None or task.done():
            return
        loop = task.get_loop()
        if loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            stop.set()
        else:
            loop.call_soon_threadsafe(stop.set)

    def close(self) -> None:
        """Stop the sweepers (the shared engines stay open for other adapters)."""
        self._stop.set()
        self._astop_soon()
        if self._sweeper is not None:
            self._sweeper.join()

    async def aclose(self) -> None:
        """Async [`close`][langmem_sqlite.store.store.SQLStore.close]."""
        await self.astop_ttl_sweeper()

    @classmethod
    def from_conn_string(cls, conn_string: str | os.PathLike[str] | URL, **kwargs: Any) -> _Opened:
        """A store on `conn_string` (a URL or a path; `":memory:"`), as a context manager
        for `with` and `async with`, like the `from_conn_string` of LangGraph's stores.

        `kwargs` go to [`SQLStore`][langmem_sqlite.SQLStore] (`index`, `ttl`, `table_prefix`...). On
        exit the sweepers stop and the pooled connections of the store's database are closed (its
        engines are shared per URL: another adapter on the same URL opens new ones on its next
        call).

        Raises:
            TypeError: `conn_string` is an engine or a [`Database`][langmem_sqlite.Database] (pass
                those to [`SQLStore`][langmem_sqlite.SQLStore] itself: they are the caller's to
                dispose).
        """
        if not isinstance(conn_string, str | os.PathLike | URL):
            raise TypeError(
                "conn_string: expected a URL or a path, got "
                f"{type(conn_string).__name__} (give engines to SQLStore(...) directly)"
            )
        return _Opened(cls(conn_string, **kwargs))  # type: ignore[call-arg,arg-type]

    def setup(self) -> None:
        """Create or migrate the tables now (otherwise done on first use). From a coroutine:
        an awaitable of [`asetup`][langmem_sqlite.store.store.SQLStore.asetup], as
        `await AsyncPostgresStore.setup()`."""
        if _called_from_coroutine():
            return self.asetup()  # type: ignore[return-value]
        self.db.drive(self._setup_plan())

    async def asetup(self) -> None:
        """Async [`setup`][langmem_sqlite.store.store.SQLStore.setup]."""
        await self.db.adrive(self._setup_plan())

    def _setup_plan(self) -> Plan[None]:
        yield from schema_plan(self.db, self.tables)
        yield from self._pgvector_plan()


_ASYNC_CODE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _called_from_coroutine() -> bool:
    """Whether the caller of the public method calling this is a coroutine (`async def`,
    async generator, or a notebook cell with a top-level `await`): then it awaits the result,
    as with LangGraph's async stores."""
    frame = inspect.currentframe()
    caller = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    try:
        return caller is not None and bool(caller.f_code.co_flags & _ASYNC_CODE)
    finally:
        del frame, caller


class _Opened:
    """What [`SQLStore.from_conn_string`][langmem_sqlite.store.store.SQLStore.from_conn_string]
    returns: the store, for `with` and `async with`; on exit its sweepers stop and its database's
    pooled connections close."""

    def __init__(self, store: SQLStore) -> None:
        self.store = store

    def __enter__(self) -> SQLStore:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()
        self.store.db.dispose()

    async def __aenter__(self) -> SQLStore:
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        await self.store.aclose()
        await self.store.db.adispose()
        self.store.db.dispose()
