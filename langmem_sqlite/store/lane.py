"""Concurrent async calls of one store: a few run at once, the rest queue and run as batches.

A `Lane` lets `SLOTS` calls run at once, so that a burst of calls does not exhaust the
connection pool; the calls that find every slot taken queue, and whoever frees a slot runs the
queue (up to `MAX_OPS` operations) as one batch, as LangGraph's `AsyncBatchedBaseStore` does.
Each call still gets its own result, and a failed batch is run again call by call, so that an
error reaches only the call that caused it. As in one `abatch`, the reads of a batch see the
data before its writes, and of several writes to one item the last queued wins. One lane per
store and event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ["MAX_OPS", "SLOTS", "Lane"]

logger = logging.getLogger(__name__)

P = TypeVar("P")

SLOTS = 8
"""Calls (or batches) of one store running at once per event loop: well within the pools
(SQLite's 16 worker threads, a server's 10 + 22 connections) shared with the other adapters."""

MAX_OPS = 2500
"""Most operations run as one batch."""


class Lane(Generic[P]):
    """The queue and slots of one store on one event loop.

    Args:
        run: runs validated operations (a store's `abatch` after validation) in order as one
            batch, returning one result per operation.
    """

    def __init__(
        self,
        run: Callable[[list[P]], Awaitable[list[Any]]],
        slots: int = SLOTS,
        max_ops: int = MAX_OPS,
    ) -> None:
        self._run = run
        self.slots = slots
        self.max_ops = max_ops
        self.busy = 0
        self._queue: deque[tuple[asyncio.Future[Any], Any, bool]] = deque()
        """(future, operations or one operation, whether one)"""
        self.loop = asyncio.get_running_loop()

    def enter(self) -> bool:
        """Take a slot for a call run as it is, if one is free and nothing waits; then
        `leave` must follow."""
        if self.busy < self.slots and not self._queue:
            self.busy += 1
            return True
        return False

    def leave(self) -> None:
        """Free a slot taken by `enter` (the queue's next batch takes it, if any)."""
        self.busy -= 1
        self._start_drain()

    def submit(self, batch: list[P]) -> asyncio.Future[list[Any]]:
        """Run `batch` with what else is queued, when a slot frees: the future of its results
        (a plain function: no coroutine per queued call)."""
        future: asyncio.Future[list[Any]] = self.loop.create_future()
        self._queue.append((future, batch, False))
        self._start_drain()
        return future

    def submit_one(self, op: P) -> asyncio.Future[Any]:
        """`submit` of one operation: the future of its result."""
        future: asyncio.Future[Any] = self.loop.create_future()
        self._queue.append((future, op, True))
        self._start_drain()
        return future

    async def run(self, batch: list[P]) -> list[Any]:
        """`batch` at once if a slot is free and nothing waits, else through the queue."""
        if not self.enter():
            return await self.submit(batch)
        try:
            return await self._run(batch)
        finally:
            self.leave()

    def _start_drain(self) -> None:
        if self._queue and self.busy < self.slots:
            self.busy += 1
            self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        """Run queued batches, merged up to `max_ops` operations, until none waits."""
        try:
            while self._queue:
                units: list[tuple[asyncio.Future[Any], Any, bool]] = []
                ops = 0
                while self._queue and (not units or ops < self.max_ops):
                    unit = self._queue.popleft()
                    if not unit[0].done():  # a cancelled caller's batch is dropped
                        units.append(unit)
                        ops += 1 if unit[2] else len(unit[1])
                if units:
                    await self._run_units(units)
        finally:
            self.busy -= 1
            self._start_drain()

    async def _run_units(self, units: list[tuple[asyncio.Future[Any], Any, bool]]) -> None:
        if len(units) == 1:
            await self._settle(*units[0])
            return
        merged: list[P] = []
        for _, batch, one in units:
            if one:
                merged.append(batch)
            else:
                merged.extend(batch)
        try:
            results = await self._run(merged)
        except asyncio.CancelledError:
            for future, _, _ in units:
                future.cancel()
            raise
        except Exception:
            logger.debug("a merged batch failed: running its calls one by one", exc_info=True)
            for unit in units:
                await self._settle(*unit)
            return
        start = 0
        for future, batch, one in units:
            end = start + (1 if one else len(batch))
            if not future.done():
                future.set_result(results[start] if one else results[start:end])
            start = end

    async def _settle(self, future: asyncio.Future[Any], batch: Any, one: bool) -> None:
        """Run one caller's batch; its result or exception goes to its future only."""
        if future.done():
            return
        try:
            result = await self._run([batch] if one else batch)
            if one:
                result = result[0]
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as e:
            if not future.done():
                future.set_exception(e)
        else:
            if not future.done():
                future.set_result(result)
