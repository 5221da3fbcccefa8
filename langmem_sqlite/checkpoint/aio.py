"""The async twins of [`SQLSaver`][langmem_sqlite.SQLSaver]'s methods: the same plans
(`plans`), run with [`Database.adrive`][langmem_sqlite.engine.Database.adrive]."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from .plans import SaverPlans
from .records import ThreadInfo

__all__ = ["AsyncSaverAPI"]


class AsyncSaverAPI(SaverPlans):
    """The async API (a base class of [`SQLSaver`][langmem_sqlite.SQLSaver])."""

    async def asetup(self) -> None:
        """Async [`setup`][langmem_sqlite.checkpoint.saver.SQLSaver.setup]."""
        await self.db.adrive(self._setup_plan())

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async [`get_tuple`][langmem_sqlite.checkpoint.saver.SQLSaver.get_tuple]."""
        return await self.db.adrive(self._get_plan(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async [`list`][langmem_sqlite.checkpoint.saver.SQLSaver.list]."""
        pager = self._pager(config, filter, before, limit)
        while not pager.done:
            for item in pager.take(await self.db.adrive(pager.plan())):
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async [`put`][langmem_sqlite.checkpoint.saver.SQLSaver.put]."""
        return await self.db.adrive(self._put_plan(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async [`put_writes`][langmem_sqlite.checkpoint.saver.SQLSaver.put_writes]."""
        await self.db.adrive(self._writes_plan(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async [`delete_thread`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_thread]."""
        await self.db.adrive(self._delete_plan(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async [`delete_for_runs`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_for_runs]."""
        await self.db.adrive(self._delete_runs_plan(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async [`copy_thread`][langmem_sqlite.checkpoint.saver.SQLSaver.copy_thread]."""
        await self.db.adrive(self._copy_plan(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async [`prune`][langmem_sqlite.checkpoint.saver.SQLSaver.prune]."""
        await self.db.adrive(self._prune_plan(thread_ids, strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async
        [`get_delta_channel_history`][langmem_sqlite.checkpoint.saver.SQLSaver.get_delta_channel_history]."""
        return await self.db.adrive(self._history_plan(config, channels))

    async def alist_threads(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[ThreadInfo]:
        """Async [`list_threads`][langmem_sqlite.checkpoint.saver.SQLSaver.list_threads]."""
        return await self.db.adrive(self._threads_plan(metadata, limit, offset))

    async def adelete_idle_threads(self, days: float) -> int:
        """Async
        [`delete_idle_threads`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_idle_threads]."""
        return await self.db.adrive(self._idle_plan(days))

    async def avacuum(self, *, full: bool = False) -> None:
        """Async [`vacuum`][langmem_sqlite.checkpoint.saver.SQLSaver.vacuum] (in a worker
        thread)."""
        await asyncio.to_thread(self.db.rules.give_back_space, self.db.sync_engine, full)
