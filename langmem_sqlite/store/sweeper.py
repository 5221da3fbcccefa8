"""The store's TTL sweeper (a daemon thread or an event loop's task), and
`awaitable_from_coroutines`: the sync lifecycle methods that a coroutine may `await`, as on
LangGraph's async stores."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .checks import check_sweep_minutes

F = TypeVar("F", bound=Callable[..., Any])

logger = logging.getLogger(__name__)


class Sweeper:
    """Runs `sweep` (in a thread) or `asweep` (in a task) every `minutes` (default 5)."""

    def __init__(
        self,
        sweep: Callable[[], object],
        asweep: Callable[[], Awaitable[object]],
        minutes: float | None,
    ) -> None:
        self._sweep = sweep
        self._asweep = asweep
        self._minutes = minutes or 5
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._astop: asyncio.Event | None = None

    def start(self, minutes: float | None) -> threading.Thread:
        """The sweeping thread (started unless running)."""
        seconds = check_sweep_minutes(self._minutes if minutes is None else minutes)
        if self._thread is not None and self._thread.is_alive():
            return self._thread
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(seconds):
                try:
                    self._sweep()
                except Exception:  # keep sweeping after a transient failure
                    logger.exception("TTL sweep failed")

        self._thread = threading.Thread(target=loop, name="langmem-store-ttl", daemon=True)
        self._thread.start()
        return self._thread

    def astart(self, minutes: float | None) -> asyncio.Task[None]:
        """The sweeping task of the running event loop (started unless running)."""
        seconds = check_sweep_minutes(self._minutes if minutes is None else minutes)
        if self._task is not None and not self._task.done():
            return self._task
        stop = self._astop = asyncio.Event()

        async def loop() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), seconds)
                    return
                except asyncio.TimeoutError:
                    pass
                try:
                    await self._asweep()
                except Exception:  # keep sweeping after a transient failure
                    logger.exception("TTL sweep failed")

        self._task = asyncio.get_running_loop().create_task(loop(), name="langmem-store-ttl")
        return self._task

    def stop(self, timeout: float | None) -> bool:
        """Stop both; True once the thread has stopped (the task ends on its own loop)."""
        self._stop.set()
        task, stop = self._task, self._astop
        if task is not None and stop is not None and not task.done():
            loop = task.get_loop()  # it may run in another thread
            if not loop.is_closed():
                loop.call_soon_threadsafe(stop.set)
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    async def astop(self, timeout: float | None) -> bool:
        """Stop both; True once they have stopped, False if `timeout` seconds passed first."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            assert self._astop is not None
            self._astop.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except asyncio.TimeoutError:
                self._task = task
                return False
        if self._thread is not None and self._thread.is_alive():
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join, timeout)
            return not self._thread.is_alive()
        return True


_ASYNC_CODE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def awaitable_from_coroutines(twin: str) -> Callable[[F], F]:
    """A method that, called from a coroutine, returns `self.<twin>(...)` instead of running."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            frame = inspect.currentframe()
            caller = frame.f_back if frame is not None else None
            try:
                if caller is not None and caller.f_code.co_flags & _ASYNC_CODE:
                    return getattr(self, twin)(*args, **kwargs)
            finally:
                del frame, caller
            return method(self, *args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
