"""The async API of [`SQLStore`][langmem_sqlite.SQLStore]: the same validation, statements
and plans as the sync API ([`store`][langmem_sqlite.store.store]), run with
[`Database.arun`][langmem_sqlite.engine.Database.arun] and
[`Database.adrive`][langmem_sqlite.engine.Database.adrive]; concurrent calls of one store are
bounded by a semaphore."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    Item,
    NotProvided,
    Op,
    Result,
    SearchItem,
)

from ..engine import Database, Plan
from .checks import public_namespace
from .prepared import _Batch
from .vectors import VectorIndex

__all__: list[str] = []


class _AsyncAPI(BaseStore):
    """`aget`, `aput`, `asearch` and `abatch` of [`SQLStore`][langmem_sqlite.SQLStore] (the
    plans they run are the sync API's)."""

    db: Database
    index: VectorIndex | None
    _semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]

    if TYPE_CHECKING:  # what the sync API provides (see .store)

        def _prepare(self, ops: Iterable[Op]) -> _Batch: ...

        def _plan(
            self, batch: _Batch, doc_vectors: list[list[float]], query_vectors: list[list[float]]
        ) -> Plan[list[Result]]: ...

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """Async [`get`][langmem_sqlite.store.store.SQLStore.get]."""
        public_namespace(namespace)
        return await super().aget(namespace, key, refresh_ttl=refresh_ttl)

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Async [`put`][langmem_sqlite.store.store.SQLStore.put]."""
        public_namespace(namespace, allow_empty=False)
        await super().aput(namespace, key, value, index, ttl=ttl)

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Async [`search`][langmem_sqlite.store.store.SQLStore.search]."""
        public_namespace(namespace_prefix, "namespace_prefix")
        return await super().asearch(
            namespace_prefix,
            query=query,
            filter=filter,
            limit=limit,
            offset=offset,
            refresh_ttl=refresh_ttl,
        )

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async [`batch`][langmem_sqlite.store.store.SQLStore.batch] (same plan, on the async
        engine; at most `SLOTS` calls of one store run at once per event loop, the others
        wait for a slot)."""
        prepared = self._prepare(ops)
        async with self._slots():
            vectors = (
                await self.index.aembed(prepared.texts, prepared.queries)
                if self.index
                else ([], [])
            )
            return await self.db.adrive(self._plan(prepared, *vectors))

    def _slots(self) -> asyncio.Semaphore:
        """This store's slots on the running event loop (a semaphore serves one loop)."""
        loop = asyncio.get_running_loop()
        slots = self._semaphores.get(loop)
        if slots is None:
            slots = self._semaphores[loop] = asyncio.Semaphore(SLOTS)
        return slots


SLOTS = 8
"""Calls of one store running at once per event loop: well within the pools (SQLite's 16
worker threads, a server's 10 + 22 connections) shared with the other adapters, so that a
burst of calls never waits for a pooled connection past its timeout."""
