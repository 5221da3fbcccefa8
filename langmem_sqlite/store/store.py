"""`SQLStore`: LangGraph's `BaseStore` (long-term memory across threads) in SQL.

Same database, engines and migrations as the conversation history and the checkpointer: SQLite
by default, PostgreSQL or MariaDB/MySQL by URL. `batch` and `abatch` validate the operations
the same way (`prepared`), embed what needs embedding (the only sync/async difference),
then run one [`Plan`][langmem_sqlite.engine.Plan] with
[`Database.drive`][langmem_sqlite.engine.Database.drive] or
[`Database.adrive`][langmem_sqlite.engine.Database.adrive]. This module holds the class and its sync
API; `async_api` its async twins, `lifecycle` setup, TTL sweeping and closing.

As in LangGraph's `InMemoryStore`, the reads of a batch see the data as it was before the
batch's writes, and of several writes to one item in a batch the last wins.
`get`, `put`, `search` and their async twins are `BaseStore`'s: one operation through
`batch`/`abatch`, as in LangGraph's stores.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Iterable
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    NOT_PROVIDED,
    IndexConfig,
    Item,
    NotProvided,
    Op,
    Result,
    SearchItem,
    TTLConfig,
)

from .. import clock
from ..crypto import MessageCipher, resolve_cipher
from ..engine import Database, DatabaseLike, Plan, Step, get_database
from ..engine.migrations import schema_plan
from ..engine.schema import DEFAULT_PREFIX, Tables, get_tables
from ..engine.session import Session
from .async_api import _AsyncAPI
from .checks import check_ttl_config, public_namespace
from .lifecycle import _Lifecycle
from .pgvector_schema import enable_pgvector
from .prepared import (
    _Batch,
    _copy_item,
    _get_item,
    _literal_prefix,
    _Preparing,
    _search_item,
    _shape_namespaces,
)
from .reads import get_items, list_namespaces
from .rows import CHUNK, ItemRow
from .sealed import Sealer
from .searches import search_items
from .vector_ranking import vector_search
from .vectors import ANN, VectorIndex, norms, to_blobs
from .writes import PutRow, apply_puts
from .writes import refresh_ttl as refresh_ttls

__all__ = ["SQLStore"]


class SQLStore(_AsyncAPI, _Lifecycle, _Preparing):
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
            or 32 byte key, as the chat history's; needs the `encryption` extra): see
            `langmem_sqlite.store.sealed` for what filters and vector search then do.
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
        self._pgvector_wanted = pgvector
        self.cipher = resolve_cipher(encryption_key, cipher)
        self._sealer = Sealer(self.cipher) if self.cipher is not None else None
        if self._sealer is not None and pgvector:
            raise ValueError(
                "pgvector: True cannot rank encrypted vectors (its copy would be plaintext)"
            )
        # a jsonb column cannot hold NUL; ciphertext has none
        self._nul_ok = self.db.rules.text_holds_nul or self._sealer is not None
        self._pgvector: bool | None = None
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()
        self._atask: asyncio.Task[None] | None = None
        self._semaphores: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Semaphore
        ] = weakref.WeakKeyDictionary()
        self._astop: asyncio.Event | None = None

    # -- the plan (sync and async) -------------------------------------------------------------

    def _ann(self, pgvector: bool) -> ANN | None:
        return self.index.ann if pgvector and self.index is not None else None

    def _pgvector_plan(self) -> Plan[bool]:
        if self._pgvector is None:
            enabled = False
            if (
                self.index is not None
                and self._pgvector_wanted is not False
                and self._sealer is None
                and self.db.rules.store_pgvector
            ):
                enabled = yield Step(
                    enable_pgvector, (self.tables, self.index.ann), write=True, schema=True
                )
            if self._pgvector_wanted and not enabled:
                raise RuntimeError(
                    "pgvector: True needs PostgreSQL with the 'vector' extension available"
                )
            self._pgvector = enabled
        return self._pgvector

    def _plan(
        self, batch: _Batch, doc_vectors: list[list[float]], query_vectors: list[list[float]]
    ) -> Plan[list[Result]]:
        yield from schema_plan(self.db, self.tables)
        pgvector = yield from self._pgvector_plan()
        results: list[Result] = [None] * batch.size
        now = clock.now_us()
        if batch.gets or batch.searches or batch.lists:
            refresh = yield self._read_step(batch, query_vectors, now, pgvector, results)
            if refresh:
                yield self._refresh_step(refresh, now)
        if batch.puts:
            yield self._puts_step(batch, doc_vectors, now, pgvector)
        return results

    def _puts_step(
        self, batch: _Batch, doc_vectors: list[list[float]], now: int, pgvector: bool
    ) -> Step:
        vectors = iter(zip(to_blobs(doc_vectors), norms(doc_vectors), strict=True))
        rows = [
            PutRow(ns, key, value, ttl_us, tuple((f, *next(vectors)) for f, _ in texts), text)
            for (ns, key), (value, ttl_us, text, texts) in batch.puts.items()
        ]
        # one item without vectors to replace is one statement: no BEGIN/COMMIT on a server
        one = len(rows) == 1 and (rows[0].value is None or self.index is None)
        return Step(
            apply_puts,
            (self.tables, rows, now, self.index is not None, pgvector, self._sealer),
            write=True,
            single=one,
        )

    def _one_statement(self, batch: _Batch) -> bool:
        """Whether the reads of `batch` are one statement (one get, or one search done in
        SQL without a vector query): SQLite then runs it without BEGIN and COMMIT."""
        if batch.lists or len(batch.gets) + len(batch.searches) != 1:
            return False
        if batch.gets:
            return True
        _, query, text, _ = batch.searches[0]
        # a filter may be re-checked page by page: those pages read one snapshot
        return text is None and not query.filter

    def _read(
        self,
        conn: Session,
        batch: _Batch,
        queries: dict[str, list[float]],
        now: int,
        pgvector: bool,
        results: list[Result],
    ) -> list[int]:
        """Fill `results` for the read operations; return the ids whose TTL to refresh."""
        t = self.tables
        refresh: list[int] = []
        pairs = [(ns, k) for _, ns, k, _ in batch.gets]
        found = get_items(conn, t, pairs, now, self.omit_expired, self._sealer)
        handed: set[int] = set()
        for i, ns, key, refresh_ttl in batch.gets:
            row = found.get((ns, key))
            if row is not None:
                results[i] = _get_item(row, row.id in handed)
                handed.add(row.id)
                if refresh_ttl and row.ttl_us is not None:
                    refresh.append(row.id)
        done: dict[Any, list[ItemRow]] = {}  # equal searches of a batch run once
        firsts: dict[Any, int] = {}
        for i, query, text, refresh_ttl in batch.searches:
            same = (query.prefix, repr(query.filter), query.limit, query.offset, text)
            rows = done.get(same)
            again = rows is not None
            if rows is None:
                rows = done[same] = (
                    search_items(conn, t, query, now)
                    if text is None
                    else vector_search(
                        conn,
                        t,
                        query,
                        queries[text],
                        now,
                        pgvector,
                        self._ann(pgvector),
                        self.index.distance,  # type: ignore[union-attr]
                    )
                )
            if again:  # another caller's copy of the same items (their times shared: immutable)
                first = results[firsts[same]]
                results[i] = [_copy_item(item) for item in first]  # type: ignore[arg-type,union-attr]
            else:
                firsts[same] = i
                results[i] = [_search_item(r) for r in rows]
            if refresh_ttl:
                refresh.extend(r.id for r in rows if r.ttl_us is not None)
        for i, op in batch.lists:
            found_ns = list_namespaces(conn, t, _literal_prefix(op), now, self.omit_expired)
            results[i] = _shape_namespaces(op, found_ns)
        return sorted(set(refresh))

    def _read_step(
        self,
        batch: _Batch,
        query_vectors: list[list[float]],
        now: int,
        pgvector: bool,
        results: list[Result],
    ) -> Step:
        queries = dict(zip(batch.queries, query_vectors, strict=True))
        return Step(
            self._read,
            (batch, queries, now, pgvector, results),
            single=self._one_statement(batch),
            # an index scan's settings (hnsw.ef_search, ivfflat.probes) are SET LOCAL
            transaction=bool(queries) and self._ann(pgvector) is not None,
        )

    def _refresh_step(self, ids: list[int], now: int) -> Step:
        # one UPDATE (up to CHUNK ids): no BEGIN/COMMIT on a server
        return Step(
            refresh_ttls,
            (self.tables, ids, now),
            write=True,
            single=len(ids) <= CHUNK,
        )

    # get, put and search are BaseStore's (one operation through batch), after the namespace
    # checks of batch, so that their errors are the same through either

    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """One item, or `None` (as `BaseStore.get`)."""
        public_namespace(namespace)
        return super().get(namespace, key, refresh_ttl=refresh_ttl)

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Store or replace one item (as `BaseStore.put`)."""
        public_namespace(namespace, allow_empty=False)
        super().put(namespace, key, value, index, ttl=ttl)

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

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run store operations (Get, Put, Search, ListNamespaces) and return their results."""
        ops = list(ops)
        prepared = self._prepare(ops)
        vectors = self.index.embed(prepared.texts, prepared.queries) if self.index else ([], [])
        return self.db.drive(self._plan(prepared, *vectors))

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SQLStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def embeddings(self) -> Embeddings | None:
        """The embeddings of the semantic index (`None` without `index`), as LangGraph's
        stores expose them."""
        return self.index.embeddings if self.index is not None else None

    def __repr__(self) -> str:
        return f"SQLStore({self.db.url!r}, table_prefix={self.tables.prefix!r})"
