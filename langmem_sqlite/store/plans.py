"""The store's operations: a batch validated into a `Batch`, then run as one
[`Plan`][langmem_sqlite.engine.Plan] for the sync and async API (reads, then writes). As in
`InMemoryStore`, the reads of a batch see the data before its writes; of several writes to one
item, the last wins."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from .. import clock
from ..clock import dt
from ..engine import Database, Plan, Step
from ..engine.migrations import schema_plan
from ..engine.schema import ID_MAX_CHARS, Tables
from ..engine.unit import Unit
from ..validation import check_text
from . import namespaces
from .checks import check_match, check_max_depth, check_page, check_ttl_minutes, check_value
from .filter_sql import SearchQuery
from .filters import check_filter
from .items import (
    CHUNK,
    ItemRow,
    ItemStatements,
    Put,
    apply_puts,
    get_items,
    list_namespaces,
    refresh_ttl,
    sweep_expired,
)
from .pgvector_schema import enable_pgvector
from .sealed import Sealer
from .searches import search_items, vector_search
from .vectors import ANN, VectorIndex, norms, to_blobs


class Get(NamedTuple):
    """A validated `GetOp`, the `at`-th operation of its batch (`ns` encoded)."""

    at: int
    ns: str
    key: str
    refresh_ttl: bool


class Search(NamedTuple):
    """A validated `SearchOp` (`text`: the query to embed, None without a vector query)."""

    at: int
    query: SearchQuery
    text: str | None
    refresh_ttl: bool


class Listing(NamedTuple):
    """A validated `ListNamespacesOp`."""

    at: int
    op: ListNamespacesOp


@dataclass
class Batch:
    """A validated batch: what to read, write (the last write per item) and embed."""

    size: int
    gets: list[Get] = field(default_factory=list)
    searches: list[Search] = field(default_factory=list)
    lists: list[Listing] = field(default_factory=list)
    puts: dict[tuple[str, str], Put] = field(default_factory=dict)

    @property
    def texts(self) -> list[str]:
        return [text for put in self.puts.values() for _, text in put.texts]

    @property
    def queries(self) -> list[str]:
        return [s.text for s in self.searches if s.text is not None]


def _matches_path(condition: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if condition.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


def literal_prefix(op: ListNamespacesOp) -> tuple[str, ...]:
    """The leading labels (before any `*`) every listed namespace must start with."""
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix":
            path = tuple(condition.path)
            return path[: path.index("*")] if "*" in path else path
    return ()


def shape_namespaces(op: ListNamespacesOp, found: list[tuple[str, ...]]) -> list[Any]:
    kept = [ns for ns in found if all(_matches_path(c, ns) for c in op.match_conditions or ())]
    if op.max_depth is not None:
        kept = sorted({ns[: op.max_depth] for ns in kept})
    return kept[op.offset : op.offset + op.limit]


def item_of(row: ItemRow, again: bool = False) -> Item:
    """The item of a row (`again`: a row already handed out, whose value is copied)."""
    return Item(
        value=copy.deepcopy(row.value) if again else row.value,
        key=row.key,
        namespace=row.ns,
        created_at=dt(row.created_at),
        updated_at=dt(row.updated_at),
    )


def search_item_of(row: ItemRow) -> SearchItem:
    return SearchItem(
        row.ns, row.key, row.value, dt(row.created_at), dt(row.updated_at), score=row.score
    )


class StorePlans:
    """The validation and plans of one store's operations (`nul_ok`: values may hold NUL
    characters; `sealer`: encrypts values; `pgvector_wanted`: `SQLStore`'s `pgvector`)."""

    def __init__(
        self,
        db: Database,
        tables: Tables,
        index: VectorIndex | None,
        omit_expired: bool,
        nul_ok: bool,
        sealer: Sealer | None,
        pgvector_wanted: bool | None,
    ) -> None:
        self.db = db
        self.tables = tables
        self.index = index
        self.omit_expired = omit_expired
        self.nul_ok = nul_ok
        self.sealer = sealer
        self.pgvector_wanted = pgvector_wanted
        self.statements = ItemStatements(tables, db.rules, omit_expired)
        self.pgvector: bool | None = None
        """Whether pgvector ranks (None: not known before the first plan)."""

    def prepare(self, ops: Iterable[Op]) -> Batch:
        """The validated batch of `ops`, in order, before anything is read, written or embedded."""
        prepared = [self._prepare_op(i, op) for i, op in enumerate(ops)]
        batch = Batch(len(prepared))
        for p in prepared:
            if isinstance(p, Get):
                batch.gets.append(p)
            elif isinstance(p, Search):
                batch.searches.append(p)
            elif isinstance(p, Listing):
                batch.lists.append(p)
            else:
                batch.puts.pop((p.ns, p.key), None)  # the last write goes last
                batch.puts[(p.ns, p.key)] = p
        return batch

    def _prepare_op(self, at: int, op: Op) -> Get | Search | Listing | Put:
        if isinstance(op, GetOp):
            ns = namespaces.encoded(op.namespace, allow_empty=True)
            key = check_text(op.key, "key", max_chars=ID_MAX_CHARS)
            return Get(at, ns, key, op.refresh_ttl)
        if isinstance(op, PutOp):
            return self._prepare_put(op)
        if isinstance(op, SearchOp):
            return self._prepare_search(at, op)
        if isinstance(op, ListNamespacesOp):
            conditions = tuple(check_match(c) for c in op.match_conditions or ())
            check_max_depth(op.max_depth)
            check_page(op.limit, "limit")
            check_page(op.offset, "offset")
            return Listing(at, op._replace(match_conditions=conditions))
        raise TypeError(f"ops: unknown operation type {type(op).__name__}")

    def _prepare_put(self, op: PutOp) -> Put:
        ns = namespaces.encoded(op.namespace)
        key = check_text(op.key, "key", max_chars=ID_MAX_CHARS)
        value, text = check_value(op.value, self.nul_ok)
        if self.sealer is not None and text is not None:
            text = self.sealer.seal(ns, key, text)
        ttl_us = check_ttl_minutes(op.ttl, "ttl")
        if op.index not in (None, False) and (
            isinstance(op.index, str) or not all(isinstance(f, str) for f in op.index)  # type: ignore[union-attr]
        ):
            raise TypeError("index: expected False, None or a list of field paths")
        texts: list[tuple[str, str]] = []
        if self.index is not None and value is not None and op.index is not False:
            texts = self.index.texts(value, None if op.index is None else list(op.index))
        return Put(ns, key, value, ttl_us, text, tuple(texts))

    def _prepare_search(self, at: int, op: SearchOp) -> Search:
        prefix = namespaces.check_namespace(
            op.namespace_prefix, "namespace_prefix", allow_empty=True
        )
        if op.query is not None and not isinstance(op.query, str):
            raise TypeError(f"query: expected str, got {type(op.query).__name__}")
        query = SearchQuery(
            prefix,
            check_filter(op.filter),
            check_page(op.limit, "limit"),
            check_page(op.offset, "offset"),
            self.omit_expired,
            self.sealer,
        )
        text = op.query if (op.query and self.index is not None) else None
        return Search(at, query, text, op.refresh_ttl)

    def setup(self) -> Plan[None]:
        """Create or migrate the tables, and the pgvector table where it is used."""
        yield from schema_plan(self.db, self.tables)
        yield from self._pgvector_plan()

    def sweep(self) -> Plan[int]:
        """Delete the items whose TTL has lapsed; return how many."""
        yield from schema_plan(self.db, self.tables)
        return (yield Step(sweep_expired, (self.tables, clock.now_us()), write=True))

    def batch(
        self, batch: Batch, doc_vectors: list[list[float]], query_vectors: list[list[float]]
    ) -> Plan[list[Result]]:
        """The results of a validated batch (its texts embedded as the vectors given)."""
        yield from schema_plan(self.db, self.tables)
        pgvector = yield from self._pgvector_plan()
        results: list[Result] = [None] * batch.size
        now = clock.now_us()
        if batch.gets or batch.searches or batch.lists:
            queries = dict(zip(batch.queries, query_vectors, strict=True))
            # an index scan's settings (hnsw.ef_search, ivfflat.probes) are SET LOCAL
            scan = bool(queries) and self._ann(pgvector) is not None
            args = (batch, queries, now, pgvector, results)
            refresh = yield Step(self._read, args, single=_one_statement(batch), transaction=scan)
            if refresh:
                # one UPDATE (up to CHUNK ids): no BEGIN/COMMIT on a server
                args = (self.statements, refresh, now)
                yield Step(refresh_ttl, args, write=True, single=len(refresh) <= CHUNK)
        if batch.puts:
            vectors = iter(zip(to_blobs(doc_vectors), norms(doc_vectors), strict=True))
            rows = [
                p._replace(vectors=tuple((f, *next(vectors)) for f, _ in p.texts))
                for p in batch.puts.values()
            ]
            # one item without vectors to replace is one statement: no BEGIN/COMMIT on a server
            one = len(rows) == 1 and (rows[0].value is None or self.index is None)
            args = (self.statements, rows, now, self.index is not None, pgvector, self.sealer)
            yield Step(apply_puts, args, write=True, single=one)
        return results

    def _ann(self, pgvector: bool) -> ANN | None:
        return self.index.ann if pgvector and self.index is not None else None

    def _pgvector_plan(self) -> Plan[bool]:
        if self.pgvector is None:
            enabled = False
            if (
                self.index is not None
                and self.pgvector_wanted is not False
                and self.sealer is None
                and self.db.backend == "postgresql"
            ):
                enabled = yield Step(
                    enable_pgvector, (self.tables, self.index.ann), write=True, schema=True
                )
            if self.pgvector_wanted and not enabled:
                raise RuntimeError(
                    "pgvector: True needs PostgreSQL with the 'vector' extension available"
                )
            self.pgvector = enabled
        return self.pgvector

    def _read(
        self,
        unit: Unit,
        batch: Batch,
        queries: dict[str, list[float]],
        now: int,
        pgvector: bool,
        results: list[Result],
    ) -> list[int]:
        """Fill `results` for the read operations; return the ids whose TTL to refresh."""
        t = self.tables
        refresh: list[int] = []
        pairs = [(get.ns, get.key) for get in batch.gets]
        found = get_items(unit, self.statements, pairs, now, self.sealer)
        handed: set[int] = set()
        for i, ns, key, refreshes in batch.gets:
            row = found.get((ns, key))
            if row is not None:
                results[i] = item_of(row, row.id in handed)
                handed.add(row.id)
                if refreshes and row.ttl_us is not None:
                    refresh.append(row.id)
        for i, query, text, refreshes in batch.searches:
            if text is None:
                rows = search_items(unit, t, query, now)
            else:
                distance = self.index.distance  # type: ignore[union-attr]
                ann = self._ann(pgvector)
                rows = vector_search(unit, t, query, queries[text], now, pgvector, ann, distance)
            results[i] = [search_item_of(r) for r in rows]
            if refreshes:
                refresh.extend(r.id for r in rows if r.ttl_us is not None)
        for i, op in batch.lists:
            found_ns = list_namespaces(unit, t, literal_prefix(op), now, self.omit_expired)
            results[i] = shape_namespaces(op, found_ns)
        return sorted(set(refresh))


def _one_statement(batch: Batch) -> bool:
    """Whether the reads of `batch` are one statement (run without BEGIN and COMMIT)."""
    if batch.lists or len(batch.gets) + len(batch.searches) != 1:
        return False
    if batch.gets:
        return True
    search = batch.searches[0]
    # a filter may be re-checked page by page: those pages read one snapshot
    return search.text is None and not search.query.filter
