"""`SQLStore`: LangGraph's ``BaseStore`` (long-term memory across threads) in SQL.

Same database, engines and migrations as the conversation history and the checkpointer: SQLite
by default, PostgreSQL or MariaDB/MySQL by URL. ``batch`` and ``abatch`` validate the operations
the same way, embed what needs embedding (the only sync/async difference), then run one
:data:`~langmem_sqlite.engine.Plan` with :meth:`Database.drive` or :meth:`Database.adrive`.

As in LangGraph's ``InMemoryStore``, the reads of a batch see the data as it was before the
batch's writes, and of several writes to one item in a batch the last wins.

``get``/``aget``, ``put``/``aput`` (without an index) and ``search``/``asearch`` (without a
vector query) take shortcuts once the tables are known to be there: the same checks and the same
SQL functions, without the batch's plan (see "shortcuts" below).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, TypeVar

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from sqlalchemy.engine import URL

from ..crypto import MessageCipher, resolve_cipher
from ..engine import Database, DatabaseLike, Plan, Step, get_database
from ..engine.migrations import schema_plan
from ..engine.schema import DEFAULT_PREFIX, Tables, get_tables
from ..engine.session import Session
from . import namespaces
from . import sql as q
from .checks import (
    check_match,
    check_max_depth,
    check_page,
    check_sweep_minutes,
    check_timeout,
    check_ttl_config,
    check_ttl_minutes,
    check_value,
    public_labels,
)
from .filters import check_filter
from .lane import Lane
from .sealed import Sealer
from .vectors import ANN, VectorIndex, norms, to_blobs

__all__ = ["SQLStore"]

logger = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _now_us() -> int:
    return time.time_ns() // 1000


def _dt(us: int) -> datetime:
    return _EPOCH + timedelta(0, us // 1_000_000, us % 1_000_000)  # positional: 0.1 us less


@dataclass
class _Batch:
    """A validated batch: what to read, what to write, what to embed."""

    size: int
    gets: list[tuple[int, str, str, bool]] = field(default_factory=list)
    searches: list[tuple[int, q.SearchQuery, str | None, bool]] = field(default_factory=list)
    lists: list[tuple[int, ListNamespacesOp]] = field(default_factory=list)
    puts: dict[
        tuple[str, str],
        tuple[dict[str, Any] | None, int | None, str | None, list[tuple[str, str]]],
    ] = field(default_factory=dict)
    """(ns, key) -> (value, TTL in us, the value's JSON text, (field, text) pairs to embed)"""

    @property
    def texts(self) -> list[str]:
        return [text for *_, fields in self.puts.values() for _, text in fields]

    @property
    def queries(self) -> list[str]:
        return [text for _, _, text, _ in self.searches if text is not None]

    @staticmethod
    def build(items: Sequence[Prepared]) -> _Batch:
        """The batch of prepared operations, in order (of several writes to one item, the last
        wins)."""
        batch = _Batch(len(items))
        for i, p in enumerate(items):
            kind = p[0]
            if kind == "g":
                batch.gets.append((i, p[1], p[2], p[3]))
            elif kind == "s":
                batch.searches.append((i, p[1], p[2], p[3]))
            elif kind == "l":
                batch.lists.append((i, p[1]))
            else:
                item = (p[1], p[2])
                batch.puts.pop(item, None)
                batch.puts[item] = p[3:]  # type: ignore[assignment]
        return batch


Prepared = tuple[Any, ...]
"""One validated operation: ``("g", ns, key, refresh_ttl)``, ``("s", SearchQuery, query text,
refresh_ttl)``, ``("l", ListNamespacesOp)`` or ``("p", ns, key, value, TTL in us, JSON text,
(field, text) pairs to embed)`` (``ns`` encoded)."""


def _matches_path(condition: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if condition.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


def _literal_prefix(op: ListNamespacesOp) -> tuple[str, ...]:
    """The leading labels (before any ``*``) every listed namespace must start with."""
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix":
            labels = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def _shape_namespaces(op: ListNamespacesOp, found: list[tuple[str, ...]]) -> list[Any]:
    kept = [ns for ns in found if all(_matches_path(c, ns) for c in op.match_conditions or ())]
    if op.max_depth is not None:
        kept = sorted({ns[: op.max_depth] for ns in kept})
    return kept[op.offset : op.offset + op.limit]


def _fresh(value: Any) -> Any:
    """A copy of a JSON value (its objects and arrays new, its scalars shared: immutable)."""
    if type(value) is dict:
        out = value.copy()
        for k, v in out.items():
            if type(v) is dict or type(v) is list:
                out[k] = _fresh(v)
        return out
    if type(value) is list:
        return [_fresh(v) if type(v) is dict or type(v) is list else v for v in value]
    return value


def _get_item(row: q.ItemRow, again: bool = False) -> Item:
    """The item of a row (``again``: a row already handed out, whose value is copied)."""
    return Item(
        value=_fresh(row.value) if again else row.value,
        key=row.key,
        namespace=row.ns,
        created_at=_dt(row.created_at),
        updated_at=_dt(row.updated_at),
    )


T = TypeVar("T")
_Shortcut = tuple[
    Callable[..., Any], tuple[Any, ...], bool, bool, Callable[[Any], tuple[T, "Step | None"]]
]
"""A shortcut's statement on the light lane (``fn``, ``args``, ``write``, ``single``), and what
turns its result into (answer, refresh step or None)."""


def _nothing_more(_: Any) -> tuple[None, None]:
    return None, None


def _search_item(row: q.ItemRow) -> SearchItem:
    return SearchItem(
        row.ns, row.key, row.value, _dt(row.created_at), _dt(row.updated_at), score=row.score
    )


def _copy_item(item: SearchItem) -> SearchItem:
    """Another caller's copy of ``item`` (a new value; the immutable parts shared)."""
    return SearchItem(
        item.namespace, item.key, _fresh(item.value), item.created_at, item.updated_at, item.score
    )


class SQLStore(BaseStore):
    """LangGraph's ``BaseStore`` in SQL, with TTL and optional semantic search.

    Args:
        connection: URL, path, ``Engine``, ``AsyncEngine`` or :class:`Database` (default:
            ``$LANGMEM_SQLITE_URL`` or ``langmem.db``); engines are shared per URL with the
            conversation store and the checkpointer.
        index: LangGraph ``IndexConfig`` (``embed``, ``dims``, ``fields``) to enable semantic
            search; without it ``query`` is ignored, as in ``InMemoryStore``. Ranking is exact
            by default; on PostgreSQL with pgvector, ``"ann_index_config": {"kind": "hnsw"}``
            (optional ``m``, ``ef_construction``, ``ef_search``; needs ``dims``) ranks through
            an HNSW index instead, approximately, as LangGraph's PostgresStore does.
        ttl: LangGraph ``TTLConfig``: ``default_ttl`` and ``sweep_interval_minutes`` in
            minutes, ``refresh_on_read`` (default True), ``omit_expired`` (default **True**
            here: lapsed items are never returned, even before a sweep deletes them).
        table_prefix: prefix of the table names (shared with the other adapters).
        schema: PostgreSQL schema name.
        pgvector: on PostgreSQL, rank with the pgvector extension: ``None`` (default) when
            it is installed or can be created, ``True`` to require it, ``False`` never. Unless
            ``index`` asks for an HNSW index, the ranking is exact either way, so the results
            are the same.
        encryption_key: encrypt item values and their embeddings at rest (AES-GCM, a 16, 24
            or 32 byte key, as the chat history's; needs the ``encryption`` extra): see
            :mod:`langmem_sqlite.store.sealed` for what filters and vector search then do.
        cipher: a :class:`~langmem_sqlite.crypto.MessageCipher`, instead of ``encryption_key``.

    Namespaces are tuples of non-empty strings (any character but NUL, so labels with dots,
    reachable through ``batch``, are stored as themselves); keys are strings of at most 255
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
        from ..history.store import default_connection

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
        self._nul_ok = self.db.dialect != "postgresql" or self._sealer is not None
        self._pgvector: bool | None = None
        self._plans = q.PlanMode()
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()
        self._atask: asyncio.Task[None] | None = None
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Lane[Prepared]] = (
            weakref.WeakKeyDictionary()
        )
        self._last_lane: Lane[Prepared] | None = None
        self._astop: asyncio.Event | None = None

    # -- validation --------------------------------------------------------------------------

    def _prepare(self, ops: Iterable[Op]) -> _Batch:
        return _Batch.build([self._prepare_op(op) for op in ops])

    def _prepare_op(self, op: Op) -> Prepared:
        """One validated operation (see :data:`Prepared`)."""
        if isinstance(op, GetOp):
            ns = namespaces.encoded(op.namespace, allow_empty=True)
            return ("g", ns, namespaces.check_text(op.key, "key"), op.refresh_ttl)
        if isinstance(op, PutOp):
            return self._prepare_put(op)
        if isinstance(op, SearchOp):
            return self._prepare_search(op)
        if isinstance(op, ListNamespacesOp):
            conditions = tuple(check_match(c) for c in op.match_conditions or ())
            check_max_depth(op.max_depth)
            check_page(op.limit, "limit")
            check_page(op.offset, "offset")
            return ("l", op._replace(match_conditions=conditions))
        raise TypeError(f"ops: unknown operation type {type(op).__name__}")

    def _prepare_put(self, op: PutOp) -> Prepared:
        ns = namespaces.encoded(op.namespace)
        key = namespaces.check_text(op.key, "key")
        value, text = check_value(op.value, self._nul_ok)
        if self._sealer is not None and text is not None:
            text = self._sealer.seal(ns, key, text)
        ttl_us = check_ttl_minutes(op.ttl, "ttl")
        if op.index not in (None, False) and (
            isinstance(op.index, str) or not all(isinstance(f, str) for f in op.index)  # type: ignore[union-attr]
        ):
            raise TypeError("index: expected False, None or a list of field paths")
        texts: list[tuple[str, str]] = []
        if self.index is not None and value is not None and op.index is not False:
            texts = self.index.texts(value, None if op.index is None else list(op.index))
        return ("p", ns, key, value, ttl_us, text, texts)

    def _prepare_search(self, op: SearchOp) -> Prepared:
        prefix = namespaces.check_namespace(
            op.namespace_prefix, "namespace_prefix", allow_empty=True
        )
        if op.query is not None and not isinstance(op.query, str):
            raise TypeError(f"query: expected str, got {type(op.query).__name__}")
        query = q.SearchQuery(
            prefix,
            check_filter(op.filter),
            check_page(op.limit, "limit"),
            check_page(op.offset, "offset"),
            self.omit_expired,
            self._sealer,
        )
        text = op.query if (op.query and self.index is not None) else None
        return ("s", query, text, op.refresh_ttl)

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
                and self.db.dialect == "postgresql"
            ):
                enabled = yield Step(q.enable_pgvector, (self.tables, self.index.ann), write=True)
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
        now = _now_us()
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
            q.PutRow(ns, key, value, ttl_us, tuple((f, *next(vectors)) for f, _ in texts), text)
            for (ns, key), (value, ttl_us, text, texts) in batch.puts.items()
        ]
        # one item without vectors to replace is one statement: no BEGIN/COMMIT on a server
        one = len(rows) == 1 and (rows[0].value is None or self.index is None)
        return Step(
            q.apply_puts,
            (self.tables, rows, now, self.index is not None, pgvector, self._sealer),
            write=True,
            lite=True,
            single=one,
        )

    def _one_statement(self, batch: _Batch) -> bool:
        """Whether the reads of ``batch`` are one statement (one get, or one search done in
        SQL without a vector query): SQLite then runs it without BEGIN and COMMIT."""
        if batch.lists or len(batch.gets) + len(batch.searches) != 1:
            return False
        if batch.gets:
            return True
        _, query, text, _ = batch.searches[0]
        return text is None and q.prefilter(self.tables, self.db.dialect, query)[1]

    def _read(
        self,
        conn: Session,
        batch: _Batch,
        queries: dict[str, list[float]],
        now: int,
        pgvector: bool,
        results: list[Result],
    ) -> list[int]:
        """Fill ``results`` for the read operations; return the ids whose TTL to refresh."""
        t = self.tables
        refresh: list[int] = []
        pairs = [(ns, k) for _, ns, k, _ in batch.gets]
        found = q.get_items(conn, t, pairs, now, self.omit_expired, self._sealer)
        handed: set[int] = set()
        for i, ns, key, refresh_ttl in batch.gets:
            row = found.get((ns, key))
            if row is not None:
                results[i] = _get_item(row, row.id in handed)
                handed.add(row.id)
                if refresh_ttl and row.ttl_us is not None:
                    refresh.append(row.id)
        if batch.searches:
            q.use_custom_plans(conn, t, self._plans)
        done: dict[Any, list[q.ItemRow]] = {}  # equal searches of a batch run once
        firsts: dict[Any, int] = {}
        for i, query, text, refresh_ttl in batch.searches:
            same = (query.prefix, repr(query.filter), query.limit, query.offset, text)
            rows = done.get(same)
            again = rows is not None
            if rows is None:
                rows = done[same] = (
                    q.search_items(conn, t, query, now, self._plans)
                    if text is None
                    else q.vector_search(
                        conn,
                        t,
                        query,
                        queries[text],
                        now,
                        pgvector,
                        self._ann(pgvector),
                        self._plans,
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
            found_ns = q.list_namespaces(conn, t, _literal_prefix(op), now, self.omit_expired)
            results[i] = _shape_namespaces(op, found_ns)
        return sorted(set(refresh))

    # -- shortcuts: get, put and search without batch's plan --------------------------------
    #
    # Once the tables are known to be there, a single get, a put without an index to embed for,
    # and a search without a vector query skip batch's preparation and plan: the same checks,
    # then one statement on the light lane, and a second one to refresh TTLs when needed. Each
    # shortcut validates its arguments at once and returns that statement with what turns its
    # result into the answer (and the refresh step, if any): the sync method runs them, its
    # async twin awaits them. None means "take BaseStore's path". (A generator plan, as batch
    # uses, cost 1.7 us more per get: 15.1 instead of 13.4 us; a Step per call, 0.6 us.)

    def _ready(self) -> bool:
        return self._pgvector is not None and self.tables.key in self.db.ready

    def _get_shortcut(
        self, namespace: tuple[str, ...], key: str, refresh_ttl: bool | None
    ) -> _Shortcut[Item | None] | None:
        found = self._get_args(namespace, key)
        return None if found is None else self._get_shortcut_of(*found, refresh_ttl)

    def _get_args(self, namespace: tuple[str, ...], key: str) -> tuple[str, str] | None:
        """The validated (encoded namespace, key) of a get, once the schema is there."""
        if not self._ready():
            return None
        ns = namespaces.encoded(namespace, allow_empty=True)
        if "." in ns:
            public_labels(namespace)
        return ns, namespaces.check_text(str(key), "key")

    def _get_shortcut_of(self, ns: str, k: str, refresh_ttl: bool | None) -> _Shortcut[Item | None]:
        now = _now_us()

        def finish(row: q.ItemRow | None) -> tuple[Item | None, Step | None]:
            if row is None:
                return None, None
            refresh = row.ttl_us is not None and self._refreshes(refresh_ttl)
            return _get_item(row), self._refresh_step([row.id], now) if refresh else None

        args = (self.tables, ns, k, now, self.omit_expired, self._sealer)
        return q.get_item, args, False, True, finish

    def _put_shortcut(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None,
        ttl: float | NotProvided | None,
    ) -> _Shortcut[None] | None:
        put = self._put_prepared(namespace, key, value, index, ttl)
        if put is None:
            return None
        return self._put_shortcut_of(put)

    def _put_shortcut_of(self, put: Prepared) -> _Shortcut[None]:
        step = self._puts_step(_Batch.build([put]), [], _now_us(), False)
        return step.fn, step.args, True, step.single, _nothing_more

    def _put_prepared(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None,
        ttl: float | NotProvided | None,
    ) -> Prepared | None:
        """A validated put without vectors to embed, once the schema is there (else None)."""
        if self.index is not None or not self._ready():
            return None
        namespaces.encoded(namespace)
        public_labels(namespace)
        if namespace[0] == "langgraph":
            raise InvalidNamespaceError(
                f'Root label for namespace cannot be "langgraph". Got: {namespace}'
            )
        minutes = (
            (self.ttl_config or {}).get("default_ttl") if isinstance(ttl, NotProvided) else ttl
        )
        return self._prepare_put(PutOp(namespace, str(key), value, index=index, ttl=minutes))

    def _search_shortcut(
        self,
        namespace_prefix: tuple[str, ...],
        query: str | None,
        filter: dict[str, Any] | None,
        limit: int,
        offset: int,
        refresh_ttl: bool | None,
    ) -> _Shortcut[list[SearchItem]] | None:
        search = self._search_args(namespace_prefix, query, filter, limit, offset)
        return None if search is None else self._search_shortcut_of(search, refresh_ttl)

    def _search_args(
        self,
        namespace_prefix: tuple[str, ...],
        query: str | None,
        filter: dict[str, Any] | None,
        limit: int,
        offset: int,
    ) -> q.SearchQuery | None:
        """A validated search without a vector query, once the schema is there."""
        if not self._ready() or (
            query is not None and (self.index is not None or not isinstance(query, str))
        ):
            return None
        ns = namespaces.encoded(namespace_prefix, "namespace_prefix", allow_empty=True)
        if "." in ns:
            public_labels(namespace_prefix)
        return q.SearchQuery(
            tuple(namespace_prefix),
            check_filter(filter),
            check_page(limit, "limit"),
            check_page(offset, "offset"),
            self.omit_expired,
            self._sealer,
        )

    def _search_shortcut_of(
        self, search: q.SearchQuery, refresh_ttl: bool | None
    ) -> _Shortcut[list[SearchItem]]:
        now = _now_us()

        def finish(rows: list[q.ItemRow]) -> tuple[list[SearchItem], Step | None]:
            ids = sorted({r.id for r in rows if r.ttl_us is not None})
            more = self._refresh_step(ids, now) if ids and self._refreshes(refresh_ttl) else None
            return [_search_item(r) for r in rows], more

        one = q.prefilter(self.tables, self.db.dialect, search)[1]
        return q.search_now, (self.tables, search, now, self._plans), False, one, finish

    def _run(self, shortcut: _Shortcut[T]) -> T:
        fn, args, write, single, finish = shortcut
        answer, more = finish(self.db.run(fn, *args, write=write, lite=True, single=single))
        if more is not None:
            self.db.run_step(more)
        return answer

    async def _arun(self, shortcut: _Shortcut[T]) -> T:
        fn, args, write, single, finish = shortcut
        answer, more = finish(await self.db.arun(fn, *args, write=write, lite=True, single=single))
        if more is not None:
            await self.db.arun_step(more)
        return answer

    def get(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
    ) -> Item | None:
        """One item, or ``None`` (as ``BaseStore.get``; see the shortcuts above)."""
        shortcut = self._get_shortcut(namespace, key, refresh_ttl)
        if shortcut is None:
            return super().get(namespace, key, refresh_ttl=refresh_ttl)
        return self._run(shortcut)

    async def aget(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
    ) -> Item | None:
        """Async :meth:`get` (see :mod:`.lane` for many concurrent calls)."""
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

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Store or replace one item (as ``BaseStore.put``; see the shortcuts above)."""
        shortcut = self._put_shortcut(namespace, key, value, index, ttl)
        if shortcut is None:
            super().put(namespace, key, value, index, ttl=ttl)
            return
        self._run(shortcut)

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """Async :meth:`put` (see :mod:`.lane` for many concurrent calls)."""
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
        """Items under ``namespace_prefix`` (as ``BaseStore.search``; see the shortcuts above)."""
        shortcut = self._search_shortcut(
            namespace_prefix, query, filter, limit, offset, refresh_ttl
        )
        if shortcut is None:
            return super().search(
                namespace_prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh_ttl,
            )
        return self._run(shortcut)

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
        """Async :meth:`search` (see :mod:`.lane` for many concurrent calls)."""
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

    def _refreshes(self, refresh_ttl: bool | None) -> bool:
        """Whether a read refreshes the TTL of what it returns (``refresh_ttl``, else the TTL
        config's ``refresh_on_read``, else True: as LangGraph's stores)."""
        if refresh_ttl is not None:
            return refresh_ttl
        return bool((self.ttl_config or {}).get("refresh_on_read", True))

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run store operations (Get, Put, Search, ListNamespaces) and return their results."""
        ops = list(ops)
        prepared = self._prepare(ops)
        vectors = self.index.embed(prepared.texts, prepared.queries) if self.index else ([], [])
        if not prepared.puts and self._pgvector is not None and self.tables.key in self.db.ready:
            return self._reads_now(prepared, vectors[1])
        return self.db.drive(self._plan(prepared, *vectors))

    def _reads_now(self, batch: _Batch, query_vectors: list[list[float]]) -> list[Result]:
        """A batch of reads once the schema is known to be there: :meth:`_plan`'s steps, run
        directly (a get or search then skips the plan's machinery)."""
        results: list[Result] = [None] * batch.size
        now = _now_us()
        step = self._read_step(batch, query_vectors, now, bool(self._pgvector), results)
        refresh = self.db.run_step(step)
        if refresh:
            self.db.run_step(self._refresh_step(refresh, now))
        return results

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
            lite=True,
            single=self._one_statement(batch),
            # an index scan's settings (hnsw.ef_search, ivfflat.probes) are SET LOCAL
            transaction=bool(queries) and self._ann(pgvector) is not None,
        )

    def _refresh_step(self, ids: list[int], now: int) -> Step:
        # one UPDATE (up to CHUNK ids): no BEGIN/COMMIT on a server
        return Step(
            q.refresh_ttl,
            (self.tables, ids, now),
            write=True,
            lite=True,
            single=len(ids) <= q.CHUNK,
        )

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch` (same plan, on the async engine; concurrent calls queue and
        run together, see :mod:`.lane`)."""
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

    # -- lifecycle: setup, TTL sweeping, closing (sync, and from async code) --------------------
    #
    # LangGraph's async stores spell these ``await store.setup()``, ``await store.sweep_ttl()``,
    # ``await store.start_ttl_sweeper()`` and ``await store.stop_ttl_sweeper()``. Called from a
    # coroutine (an ``async def``), these methods return the awaitable of their ``a`` twin, so
    # that code written for AsyncSqliteStore or AsyncPostgresStore runs as it is, without
    # blocking its event loop; called from anywhere else they run at once.

    def _sweep_plan(self) -> Plan[int]:
        yield from schema_plan(self.db, self.tables)
        return (yield Step(q.sweep_expired, (self.tables, _now_us()), write=True))

    def sweep_ttl(self) -> int:
        """Delete every item whose TTL has lapsed (and its vectors); return how many (from a
        coroutine: an awaitable of that number, as ``AsyncPostgresStore.sweep_ttl``)."""
        if _called_from_coroutine():
            return self.asweep_ttl()  # type: ignore[return-value]
        return self.db.drive(self._sweep_plan())

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl`."""
        return await self.db.adrive(self._sweep_plan())

    def _sweep_seconds(self, sweep_interval_minutes: float | None) -> float:
        interval = sweep_interval_minutes
        if interval is None:
            interval = (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        return check_sweep_minutes(interval)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> threading.Thread:
        """Sweep in a daemon thread every ``sweep_interval_minutes`` (default: the TTL config's
        ``sweep_interval_minutes``, else 5) until :meth:`stop_ttl_sweeper`; idempotent. From a
        coroutine: an awaitable of :meth:`astart_ttl_sweeper`'s task instead."""
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
        """Sweep in a task of the running event loop every ``sweep_interval_minutes`` until
        :meth:`astop_ttl_sweeper` (or the task is cancelled); idempotent. Returns the task, as
        ``AsyncSqliteStore.start_ttl_sweeper`` and ``AsyncPostgresStore.start_ttl_sweeper``."""
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
        coroutine: an awaitable of :meth:`astop_ttl_sweeper`."""
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
        running), False if ``timeout`` seconds passed first."""
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
        """Async :meth:`close`."""
        await self.astop_ttl_sweeper()

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SQLStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @classmethod
    def from_conn_string(cls, conn_string: str | os.PathLike[str] | URL, **kwargs: Any) -> _Opened:
        """A store on ``conn_string`` (a URL or a path; ``":memory:"``), as a context manager
        for ``with`` and ``async with``, like the ``from_conn_string`` of LangGraph's stores.

        ``kwargs`` go to :class:`SQLStore` (``index``, ``ttl``, ``table_prefix``...). On exit
        the sweepers stop and the pooled connections of the store's database are closed (its
        engines are shared per URL: another adapter on the same URL opens new ones on its next
        call).

        Raises:
            TypeError: ``conn_string`` is an engine or a :class:`Database` (pass those to
                :class:`SQLStore` itself: they are the caller's to dispose).
        """
        if not isinstance(conn_string, str | os.PathLike | URL):
            raise TypeError(
                "conn_string: expected a URL or a path, got "
                f"{type(conn_string).__name__} (give engines to SQLStore(...) directly)"
            )
        return _Opened(cls(conn_string, **kwargs))

    def setup(self) -> None:
        """Create or migrate the tables now (otherwise done on first use). From a coroutine:
        an awaitable of :meth:`asetup`, as ``await AsyncPostgresStore.setup()``."""
        if _called_from_coroutine():
            return self.asetup()  # type: ignore[return-value]
        self.db.drive(self._setup_plan())

    async def asetup(self) -> None:
        """Async :meth:`setup`."""
        await self.db.adrive(self._setup_plan())

    def _setup_plan(self) -> Plan[None]:
        yield from schema_plan(self.db, self.tables)
        yield from self._pgvector_plan()

    @property
    def embeddings(self) -> Embeddings | None:
        """The embeddings of the semantic index (``None`` without ``index``), as LangGraph's
        stores expose them."""
        return self.index.embeddings if self.index is not None else None

    def __repr__(self) -> str:
        return f"SQLStore({self.db.url!r}, table_prefix={self.tables.prefix!r})"


_ASYNC_CODE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _called_from_coroutine() -> bool:
    """Whether the caller of the public method calling this is a coroutine (``async def``,
    async generator, or a notebook cell with a top-level ``await``): then it awaits the result,
    as with LangGraph's async stores."""
    frame = inspect.currentframe()
    caller = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    try:
        return caller is not None and bool(caller.f_code.co_flags & _ASYNC_CODE)
    finally:
        del frame, caller


class _Opened:
    """What :meth:`SQLStore.from_conn_string` returns: the store, for ``with`` and ``async
    with``; on exit its sweepers stop and its database's pooled connections close."""

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
