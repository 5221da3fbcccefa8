"""[`SQLStore`][langmem_sqlite.SQLStore]: LangGraph's `BaseStore` in SQL. `batch` and `abatch`
validate the operations, embed, then drive one plan, through `plans.StorePlans`."""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    IndexConfig,
    Item,
    NotProvided,
    Op,
    Result,
    SearchItem,
    TTLConfig,
)
from sqlalchemy.engine import URL

from ..crypto import MessageCipher, resolve_cipher
from ..engine import Database, DatabaseLike, get_database
from ..engine.schema import DEFAULT_PREFIX, Tables, get_tables
from .checks import check_timeout, check_ttl_config, public_namespace
from .plans import StorePlans
from .sealed import Sealer
from .sweeper import Sweeper, awaitable_from_coroutines
from .vectors import VectorIndex

__all__ = ["SLOTS", "SQLStore"]

SLOTS = 8
"""Async calls of one store running at once per event loop: well within the pools (SQLite's
16 worker threads, a server's 10 + 22 connections) shared with the other adapters."""


class SQLStore(BaseStore):
    """LangGraph's `BaseStore` in SQL, with TTL and optional semantic search.

    Args:
        connection: URL, path, `Engine`, `AsyncEngine` or [`Database`][langmem_sqlite.Database]
            (default: `$LANGMEM_SQLITE_URL` or `langmem.db`); engines are shared per URL with the
            conversation store and the checkpointer.
        index: LangGraph `IndexConfig` (`embed`, `dims`, `fields`) to enable semantic
            search; without it `query` is ignored, as in `InMemoryStore`. Ranking is exact
            by default; on PostgreSQL with pgvector, `"ann_index_config": {"kind": "hnsw"}`
            (optional `m`, `ef_construction`, `ef_search`; needs `dims`) ranks through
            an HNSW index instead, approximately, as LangGraph's PostgresStore does.
        ttl: LangGraph `TTLConfig`: `default_ttl` and `sweep_interval_minutes` in
            minutes, `refresh_on_read` (default True), `omit_expired` (default **True**
            here: lapsed items are never returned, even before a sweep deletes them).
        table_prefix: prefix of the table names (shared with the other adapters).
        schema: PostgreSQL schema name.
        pgvector: on PostgreSQL, rank with the pgvector extension: `None` (default) when
            it is installed or can be created, `True` to require it, `False` never. Unless
            `index` asks for an HNSW index, the ranking is exact either way, so the results
            are the same.
        encryption_key: encrypt item values and their embeddings at rest (AES-GCM, a 16, 24
            or 32 byte key, as the chat history's; needs the `encryption` extra): filters and
            vector search then run in Python on the decrypted values, without pgvector.
        cipher: a [`MessageCipher`][langmem_sqlite.MessageCipher], instead of `encryption_key`.

    Namespaces are tuples of non-empty strings (any character but NUL, so labels with dots,
    reachable through `batch`, are stored as themselves); keys are strings of at most 255
    characters, compared byte for byte. Searches without a query return the most recently
    updated items first.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        connection: DatabaseLike | Database | None = None,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        table_prefix: str = DEFAULT_PREFIX,
        schema: str | None = None,
        pgvector: bool | None = None,
        engine_args: dict[str, Any] | None = None,
        encryption_key: bytes | str | None = None,
        cipher: MessageCipher | None = None,
    ) -> None:
        from ..defaults import default_connection

        self.db: Database = get_database(
            default_connection() if connection is None else connection, engine_args=engine_args
        )
        self.tables: Tables = get_tables(table_prefix, schema)
        self.index_config = index
        self.index = VectorIndex.from_config(index) if index is not None else None
        self.ttl_config = check_ttl_config(ttl)
        self.omit_expired = bool((self.ttl_config or {}).get("omit_expired", True))
        if pgvector is not None and not isinstance(pgvector, bool):
            raise TypeError("pgvector: expected None, True or False")
        self.cipher = resolve_cipher(encryption_key, cipher)
        sealer = Sealer(self.cipher) if self.cipher is not None else None
        if sealer is not None and pgvector:
            raise ValueError(
                "pgvector: True cannot rank encrypted vectors (its copy would be plaintext)"
            )
        # a jsonb column cannot hold NUL; ciphertext has none
        nul_ok = self.db.rules.text_holds_nul or sealer is not None
        self._plans = StorePlans(
            self.db, self.tables, self.index, self.omit_expired, nul_ok, sealer, pgvector
        )
        minutes = (self.ttl_config or {}).get("sweep_interval_minutes")
        self._sweeper = Sweeper(self.sweep_ttl, self.asweep_ttl, minutes)
        self._disposes = False  # from_conn_string: the database's connections close on exit
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run store operations (Get, Put, Search, ListNamespaces) and return their results."""
        batch = self._plans.prepare(ops)
        vectors = self.index.embed(batch.texts, batch.queries) if self.index else ([], [])
        return self.db.drive(self._plans.batch(batch, *vectors))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async [`batch`][langmem_sqlite.store.store.SQLStore.batch] (the same plan, on the
        async engine; at most `SLOTS` calls of one store run at once per event loop)."""
        batch = self._plans.prepare(ops)
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:  # a semaphore serves one event loop
            slots = self._slots[loop] = asyncio.Semaphore(SLOTS)
        async with slots:
            if self.index is None:
                vectors: tuple[list[list[float]], ...] = ([], [])
            else:
                vectors = await self.index.aembed(batch.texts, batch.queries)
            return await self.db.adrive(self._plans.batch(batch, *vectors))

    # get, put and search (and their async twins) are BaseStore's, after the namespace checks
    # of batch, so that their errors are the same through either

    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """One item, or `None` (as `BaseStore.get`)."""
        public_namespace(namespace)
        return super().get(namespace, key, refresh_ttl=refresh_ttl)

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """Async [`get`][langmem_sqlite.store.store.SQLStore.get]."""
        public_namespace(namespace)
        return await super().aget(namespace, key, refresh_ttl=refresh_ttl)

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Store or replace one item (as `BaseStore.put`)."""
        public_namespace(namespace, allow_empty=False)
        super().put(namespace, key, value, index, ttl=ttl)

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Async [`put`][langmem_sqlite.store.store.SQLStore.put]."""
        public_namespace(namespace, allow_empty=False)
        await super().aput(namespace, key, value, index, ttl=ttl)

    def search(
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
        """Items under `namespace_prefix` (as `BaseStore.search`)."""
        public_namespace(namespace_prefix, "namespace_prefix")
        return super().search(
            namespace_prefix,
            query=query,
            filter=filter,
            limit=limit,
            offset=offset,
            refresh_ttl=refresh_ttl,
        )

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

    # -- lifecycle: the sync methods return their async twin's awaitable to a coroutine, as
    # LangGraph's async stores have them (see .sweeper)

    @awaitable_from_coroutines("asetup")
    def setup(self) -> None:
        """Create or migrate the tables now (otherwise done on first use). From a coroutine:
        an awaitable of [`asetup`][langmem_sqlite.store.store.SQLStore.asetup], as
        `await AsyncPostgresStore.setup()`."""
        self.db.drive(self._plans.setup())

    async def asetup(self) -> None:
        """Async [`setup`][langmem_sqlite.store.store.SQLStore.setup]."""
        await self.db.adrive(self._plans.setup())

    @awaitable_from_coroutines("asweep_ttl")
    def sweep_ttl(self) -> int:
        """Delete every item whose TTL has lapsed (and its vectors); return how many (from a
        coroutine: an awaitable of that number, as `AsyncPostgresStore.sweep_ttl`)."""
        return self.db.drive(self._plans.sweep())

    async def asweep_ttl(self) -> int:
        """Async [`sweep_ttl`][langmem_sqlite.store.store.SQLStore.sweep_ttl]."""
        return await self.db.adrive(self._plans.sweep())

    @awaitable_from_coroutines("astart_ttl_sweeper")
    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """Sweep in a daemon thread every `sweep_interval_minutes` (default: the TTL config's
        `sweep_interval_minutes`, else 5) until
        [`stop_ttl_sweeper`][langmem_sqlite.store.store.SQLStore.stop_ttl_sweeper]; idempotent;
        returns the thread. From a coroutine: an awaitable of
        [`astart_ttl_sweeper`][langmem_sqlite.store.store.SQLStore.astart_ttl_sweeper]'s task
        instead."""
        return self._sweeper.start(sweep_interval_minutes)

    async def astart_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep in a task of the running event loop every `sweep_interval_minutes` until
        [`astop_ttl_sweeper`][langmem_sqlite.store.store.SQLStore.astop_ttl_sweeper] (or the task is
        cancelled); idempotent. Returns the task, as `AsyncSqliteStore.start_ttl_sweeper` and
        `AsyncPostgresStore.start_ttl_sweeper`."""
        return self._sweeper.astart(sweep_interval_minutes)

    @awaitable_from_coroutines("astop_ttl_sweeper")
    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; True once it has stopped (or was not running). From a
        coroutine: an awaitable of
        [`astop_ttl_sweeper`][langmem_sqlite.store.store.SQLStore.astop_ttl_sweeper]."""
        return self._sweeper.stop(check_timeout(timeout))

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweepers (task and thread); True once they have stopped (or were not
        running), False if `timeout` seconds passed first."""
        return await self._sweeper.astop(check_timeout(timeout))

    def close(self) -> None:
        """Stop the sweepers (the shared engines stay open for other adapters)."""
        self._sweeper.stop(None)

    async def aclose(self) -> None:
        """Async [`close`][langmem_sqlite.store.store.SQLStore.close]."""
        await self._sweeper.astop(None)

    @classmethod
    def from_conn_string(cls, conn_string: str | os.PathLike[str] | URL, **kwargs: Any) -> SQLStore:
        """A store on `conn_string` (a URL or a path; `":memory:"`), for `with` and `async with`,
        like the `from_conn_string` of LangGraph's stores.

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
        store = cls(conn_string, **kwargs)
        store._disposes = True
        return store

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self._disposes:
            self.db.dispose()

    async def __aenter__(self) -> SQLStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
        if self._disposes:
            await self.db.adispose()
            self.db.dispose()

    @property
    def embeddings(self) -> Embeddings | None:
        """The embeddings of the semantic index (`None` without `index`), as LangGraph's
        stores expose them."""
        return self.index.embeddings if self.index is not None else None

    def __repr__(self) -> str:
        return f"SQLStore({self.db.url!r}, table_prefix={self.tables.prefix!r})"
