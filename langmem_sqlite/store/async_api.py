"""The async API of [`SQLStore`][langmem_sqlite.SQLStore]: the same validation, statements
and plans as the sync API ([`store`][langmem_sqlite.store.store]), run with
[`Database.arun`][langmem_sqlite.engine.Database.arun] and
[`Database.adrive`][langmem_sqlite.engine.Database.adrive]; concurrent calls of one store share a
`Lane`."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    Item,
    NotProvided,
    Op,
    Result,
    SearchItem,
)

from ..engine import Database, Plan, Step
from .filter_sql import SearchQuery
from .lane import Lane
from .prepared import Prepared, _Batch
from .vectors import VectorIndex

__all__: list[str] = []

T = TypeVar("T")
Shortcut = tuple[
    Callable[..., Any], tuple[Any, ...], bool, bool, Callable[[Any], tuple[T, "Step | None"]]
]
"""A shortcut's statement on the light lane (`fn`, `args`, `write`, `single`), and what
turns its result into (answer, refresh step or None): see [`store`][langmem_sqlite.store.store]."""


class _AsyncAPI(BaseStore):
    """`aget`, `aput`, `asearch` and `abatch` of [`SQLStore`][langmem_sqlite.SQLStore]
    (the shortcuts and plans they run are the sync API's)."""

    db: Database
    index: VectorIndex | None
    _lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Lane[Prepared]]
    _last_lane: Lane[Prepared] | None

    if TYPE_CHECKING:  # what the sync API provides (see .store)

        def _prepare_op(self, op: Op) -> Prepared: ...

        def _plan(
            self, batch: _Batch, doc_vectors: list[list[float]], query_vectors: list[list[float]]
        ) -> Plan[list[Result]]: ...

        def _get_args(self, namespace: tuple[str, ...], key: str) -> tuple[str, str] | None: ...

        def _get_shortcut_of(
            self, ns: str, k: str, refresh_ttl: bool | None
        ) -> Shortcut[Item | None]: ...

        def _put_prepared(
            self,
            namespace: tuple[str, ...],
            key: str,
            value: Mapping[str, Any],
            index: Literal[False] | list[str] | None,
            ttl: float | NotProvided | None,
        ) -> Prepared | None: ...

        def _put_shortcut_of(self, put: Prepared) -> Shortcut[None]: ...

        def _search_args(
            self,
            namespace_prefix: tuple[str, ...],
            query: str | None,
            filter: dict[str, Any] | None,
            limit: int,
            offset: int,
        ) -> SearchQuery | None: ...

        def _search_shortcut_of(
            self, search: SearchQuery, refresh_ttl: bool | None
        ) -> Shortcut[list[SearchItem]]: ...

        def _refreshes(self, refresh_ttl: bool | None) -> bool: ...

    async def aget(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
    ) -> Item | None:
        """Async [`get`][langmem_sqlite.store.store.SQLStore.get] (see `lane` for many concurrent
        calls)."""
        found = self._get_args(namespace, key)
        if found is None:
            return await super().aget(namespace, key, refresh_ttl=refresh_ttl)
        lane = self._lane()
        if lane.enter():
            try:
                return await self._arun(self._get_shortcut_of(*found, refresh_ttl))
            finally:
                lane.leave()
        return await lane.submit_one(("g", *found, self._refreshes(refresh_ttl)))  # type: ignore[no-any-return]

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Async [`put`][langmem_sqlite.store.store.SQLStore.put] (see `lane` for many concurrent
        calls)."""
        put = self._put_prepared(namespace, key, value, index, ttl)
        if put is None:
            await super().aput(namespace, key, value, index, ttl=ttl)
            return
        lane = self._lane()
        if lane.enter():
            try:
                await self._arun(self._put_shortcut_of(put))
            finally:
                lane.leave()
            return
        await lane.submit_one(put)

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
        """Async [`search`][langmem_sqlite.store.store.SQLStore.search] (see `lane` for many
        concurrent calls)."""
        search = self._search_args(namespace_prefix, query, filter, limit, offset)
        if search is None:
            return await super().asearch(
                namespace_prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh_ttl,
            )
        lane = self._lane()
        if lane.enter():
            try:
                return await self._arun(self._search_shortcut_of(search, refresh_ttl))
            finally:
                lane.leave()
        return await lane.submit_one(("s", search, None, self._refreshes(refresh_ttl)))  # type: ignore[no-any-return]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async [`batch`][langmem_sqlite.store.store.SQLStore.batch] (same plan, on the async
        engine; concurrent calls queue and run together, see `lane`)."""
        return await self._lane().run([self._prepare_op(op) for op in ops])

    def _lane(self) -> Lane[Prepared]:
        """This store's lane on the running event loop."""
        loop = asyncio.get_running_loop()
        lane = self._last_lane
        if lane is not None and lane.loop is loop:
            return lane
        lane = self._lanes.get(loop)
        if lane is None:
            lane = self._lanes[loop] = Lane(self._abatch_prepared)
        self._last_lane = lane
        return lane

    async def _abatch_prepared(self, items: list[Prepared]) -> list[Result]:
        prepared = _Batch.build(items)
        vectors = (
            await self.index.aembed(prepared.texts, prepared.queries) if self.index else ([], [])
        )
        return await self.db.adrive(self._plan(prepared, *vectors))

    async def _arun(self, shortcut: Shortcut[T]) -> T:
        fn, args, write, single, finish = shortcut
        answer, more = finish(await self.db.arun(fn, *args, write=write, single=single))
        if more is not None:
            await self.db.arun_step(more)
        return answer
