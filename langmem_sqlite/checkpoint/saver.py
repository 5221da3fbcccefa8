"""`SQLSaver`: a LangGraph checkpointer on SQLite, PostgreSQL or MariaDB/MySQL, sync and async.

Each method drives the operation's plan (`plans`) with `Database.drive` or `Database.adrive`.
"""

from __future__ import annotations

import asyncio
import builtins
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from sqlalchemy.engine import URL

from ..engine import Database, DatabaseLike, get_database
from ..engine.schema import DEFAULT_PREFIX, get_tables
from ..validation import check_positive
from . import plans
from .records import MAX_IDLE_DAYS, ThreadInfo
from .storage import ListCache, next_version

__all__ = ["MAX_IDLE_DAYS", "SQLSaver", "ThreadInfo"]


class _SaverContext:
    """What [`SQLSaver.from_conn_string`][langmem_sqlite.checkpoint.saver.SQLSaver.from_conn_string]
    returns: usable with `with` and `async with`; leaving the block closes the saver's
    connections if they are `owned` (opened from a URL or a path)."""

    def __init__(self, saver: SQLSaver, owned: bool) -> None:
        self.saver = saver
        self.owned = owned

    def __enter__(self) -> SQLSaver:
        self.saver.setup()
        return self.saver

    def __exit__(self, *exc_info: object) -> None:
        if self.owned:
            self.saver.db.dispose()

    async def __aenter__(self) -> SQLSaver:
        await self.saver.asetup()
        return self.saver

    async def __aexit__(self, *exc_info: object) -> None:
        if self.owned:
            await self.saver.db.adispose()
            self.saver.db.dispose()


class SQLSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer storing threads in SQL, for sync and async graphs alike.

    Args:
        conn: a URL (`"sqlite:///chat.db"`, `"postgresql://..."`, `"mariadb://..."`), a
            path (a SQLite file), a SQLAlchemy `Engine` or `AsyncEngine`, or a
            [`Database`][langmem_sqlite.Database]. Pools are shared per URL.
        serde: the serializer for everything stored (default: LangGraph's
            `JsonPlusSerializer`, no pickle fallback; wrap it in `EncryptedSerializer` to
            encrypt values, deltas, checkpoints, metadata and writes at rest).
        encrypted_only: refuse stored values that `serde` (an `EncryptedSerializer`) did
            not write: a read that meets one raises
            [`CheckpointEncryptionError`][langmem_sqlite.CheckpointEncryptionError]. A value stored
            unencrypted (by a saver without the key, or before encryption was turned on) and one
            that the key cannot decrypt (another key, or altered bytes) are refused alike. On by
            default with an `EncryptedSerializer`; pass `False` to read a database that holds rows
            written before encryption was turned on (`EncryptedSerializer` then reads unencrypted
            values as they are).
        table_prefix: prefix of the table names.
        schema: PostgreSQL schema for the tables.
        engine_args: extra `create_engine` arguments when `conn` is a URL.
        list_cache_size: how many `(thread, namespace, channel)` lists to remember for
            storing the next version as a delta (their versions and item digests, never the
            items; 0 disables deltas: every list is stored whole).
        page_size: checkpoints read per query by
            [`list`][langmem_sqlite.checkpoint.saver.SQLSaver.list].
        searchable_metadata: keep a plain JSON copy of the metadata's scalar keys, so that SQL
            narrows `list(filter=...)` and
            [`list_threads`][langmem_sqlite.checkpoint.saver.SQLSaver.list_threads] can filter by
            metadata. Off by default when `serde` is an `EncryptedSerializer` (nothing stays in
            plaintext; `list(filter=...)` then filters the decrypted metadata in Python).

    The tables are created on first use ([`setup`][langmem_sqlite.checkpoint.saver.SQLSaver.setup]
    does it explicitly). What a read returns is the caller's own, as with LangGraph's serializing
    savers: every value is decoded afresh for each call.

    Raises:
        ValueError: `encrypted_only=True` without an `EncryptedSerializer`.
    """

    def __init__(
        self,
        conn: DatabaseLike | Database,
        *,
        serde: SerializerProtocol | None = None,
        table_prefix: str = DEFAULT_PREFIX,
        schema: str | None = None,
        engine_args: dict[str, Any] | None = None,
        list_cache_size: int = 256,
        page_size: int = 100,
        searchable_metadata: bool | None = None,
        encrypted_only: bool | None = None,
    ) -> None:
        cache_size = check_positive(list_cache_size, "list_cache_size", allow_zero=True)
        page = check_positive(page_size, "page_size")
        super().__init__(serde=serde)
        encrypted = isinstance(serde, EncryptedSerializer)
        if searchable_metadata is None:
            searchable_metadata = not encrypted
        self.searchable_metadata = bool(searchable_metadata)
        if encrypted_only is None:
            encrypted_only = encrypted
        elif encrypted_only and not encrypted:
            raise ValueError("encrypted_only: needs an EncryptedSerializer as serde")
        self.encrypted_only = bool(encrypted_only)
        self.db = get_database(conn, engine_args=engine_args)
        self.tables = get_tables(table_prefix, schema)
        self.lists = ListCache(cache_size)
        self.page_size = page

    @classmethod
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> _SaverContext:
        """A context manager (`with` or `async with`) yielding a set-up saver.

        Given a URL or a path, leaving the block closes the connections the saver's engines
        hold (sync and, after `async with`, the event loop's async pool), so that the
        database can be dropped or the file removed right after. The pool is shared per URL:
        another saver of the same URL opens new connections at its next use. Given an
        `Engine`, an `AsyncEngine` or a [`Database`][langmem_sqlite.Database], the block
        leaves it as it found it: the caller owns it.
        """
        owned = isinstance(conn_string, str | os.PathLike | URL)
        return _SaverContext(cls(conn_string, **kwargs), owned)

    def setup(self) -> None:
        """Create or migrate the tables (idempotent; also done automatically on first use)."""
        self.db.drive(plans.setup(self))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (the thread's latest without a `checkpoint_id`),
        with its parent config and its pending writes in `writes_sort_key` order."""
        return self.db.drive(plans.get_tuple(self, config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (and namespace, if given) or, with
        `config=None`, of all threads; `filter` matches metadata keys by equality."""
        pager = plans.Pager(self, config, filter, before, limit)
        while not pager.done:
            yield from self.db.drive(pager.plan())

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the values of its channels listed in `new_versions`."""
        return self.db.drive(plans.put(self, config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes (first write wins; special channels are replaced)."""
        self.db.drive(plans.put_writes(self, config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value and write of a thread, in every namespace."""
        self.db.drive(plans.delete_thread(self, thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose `metadata['run_id']` is listed.

        Values still referenced by remaining checkpoints are kept. Deleting a run whose
        checkpoints a live `DeltaChannel` still needs breaks that channel (see `prune`).
        """
        self.db.drive(plans.delete_for_runs(self, run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread whole (every namespace, checkpoint, value and write; same ids).

        Raises:
            ValueError: the target thread already has checkpoints, or is the source.
        """
        self.db.drive(plans.copy_thread(self, source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: keep each namespace's latest checkpoint, plus the ancestors its
        `DeltaChannel` values are rebuilt from (back to their nearest snapshot);
        `delete`: delete the threads.

        Run it (and [`delete_for_runs`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_for_runs])
        on threads that are not being written at the same moment: on PostgreSQL and MySQL a
        concurrent `put` could build a delta on a value this call is deleting (SQLite serializes
        writers, so it is safe there).
        """
        self.db.drive(plans.prune(self, thread_ids, strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes of `channels` along the parent chain back to each one's nearest stored
        value (the `seed`), in one transaction with one recursive query per 900 ancestors."""
        return self.db.drive(plans.delta_channel_history(self, config, channels))

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        """A version greater than `current` and unique across forks."""
        return next_version(current)

    def list_threads(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[ThreadInfo]:
        """Threads, most recently updated first, with checkpoint counts (no value is read).

        `metadata` filters on the scalar metadata of each thread's latest checkpoint, e.g.
        `{"user_id": "u1"}` (keys of `configurable` are copied into metadata).
        """
        return self.db.drive(plans.list_threads(self, metadata, limit, offset))

    def delete_idle_threads(self, days: float) -> int:
        """Delete the threads not updated for `days` days; return how many."""
        return self.db.drive(plans.delete_idle_threads(self, days))

    def vacuum(self, *, full: bool = False) -> None:
        """Give freed space back to the OS (SQLite only; a no-op elsewhere).

        `full=False` runs `PRAGMA incremental_vacuum` (effective on files created by this
        saver, which turns on incremental auto-vacuum); `full=True` runs `VACUUM`, which
        also switches an older file to incremental auto-vacuum. `VACUUM` rewrites the file
        and needs as much free disk space.
        """
        self.db.rules.give_back_space(self.db.sync_engine, full)

    async def asetup(self) -> None:
        """Async [`setup`][langmem_sqlite.checkpoint.saver.SQLSaver.setup]."""
        await self.db.adrive(plans.setup(self))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async [`get_tuple`][langmem_sqlite.checkpoint.saver.SQLSaver.get_tuple]."""
        return await self.db.adrive(plans.get_tuple(self, config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async [`list`][langmem_sqlite.checkpoint.saver.SQLSaver.list]."""
        pager = plans.Pager(self, config, filter, before, limit)
        while not pager.done:
            for item in await self.db.adrive(pager.plan()):
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async [`put`][langmem_sqlite.checkpoint.saver.SQLSaver.put]."""
        return await self.db.adrive(plans.put(self, config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async [`put_writes`][langmem_sqlite.checkpoint.saver.SQLSaver.put_writes]."""
        await self.db.adrive(plans.put_writes(self, config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async [`delete_thread`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_thread]."""
        await self.db.adrive(plans.delete_thread(self, thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async [`delete_for_runs`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_for_runs]."""
        await self.db.adrive(plans.delete_for_runs(self, run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async [`copy_thread`][langmem_sqlite.checkpoint.saver.SQLSaver.copy_thread]."""
        await self.db.adrive(plans.copy_thread(self, source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async [`prune`][langmem_sqlite.checkpoint.saver.SQLSaver.prune]."""
        await self.db.adrive(plans.prune(self, thread_ids, strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async
        [`get_delta_channel_history`][langmem_sqlite.checkpoint.saver.SQLSaver.get_delta_channel_history]."""
        return await self.db.adrive(plans.delta_channel_history(self, config, channels))

    async def alist_threads(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[ThreadInfo]:
        """Async [`list_threads`][langmem_sqlite.checkpoint.saver.SQLSaver.list_threads]."""
        return await self.db.adrive(plans.list_threads(self, metadata, limit, offset))

    async def adelete_idle_threads(self, days: float) -> int:
        """Async
        [`delete_idle_threads`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_idle_threads]."""
        return await self.db.adrive(plans.delete_idle_threads(self, days))

    async def avacuum(self, *, full: bool = False) -> None:
        """Async [`vacuum`][langmem_sqlite.checkpoint.saver.SQLSaver.vacuum] (in a worker
        thread)."""
        await asyncio.to_thread(self.db.rules.give_back_space, self.db.sync_engine, full)
