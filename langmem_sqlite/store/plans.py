"""The store's operations as [`Plan`][langmem_sqlite.engine.Plan]s, written once for the sync
and async API: a validated batch (reads, then writes), setup, and the TTL sweep.

As in LangGraph's `InMemoryStore`, the reads of a batch see the data as it was before the
batch's writes, and of several writes to one item in a batch the last wins.
"""

from __future__ import annotations

from langgraph.store.base import Result

from .. import clock
from ..engine import Database, Plan, Step
from ..engine.migrations import schema_plan
from ..engine.schema import Tables
from ..engine.unit import Unit
from .dialect_sql import store_sql
from .items import (
    CHUNK,
    apply_puts,
    get_items,
    list_namespaces,
    refresh_ttl,
    sweep_expired,
)
from .pgvector_schema import enable_pgvector
from .prepared import Batch, item_of, literal_prefix, search_item_of, shape_namespaces
from .sealed import Sealer
from .searches import search_items, vector_search
from .vectors import ANN, VectorIndex, norms, to_blobs

__all__ = ["StorePlans"]


class StorePlans:
    """The plans of one store's operations on `db` and `tables`.

    Args:
        db: the database.
        tables: the store's tables.
        index: the semantic index (None: no vectors).
        omit_expired: lapsed items are never returned.
        sealer: encrypts values and vectors at rest (None: plaintext).
        pgvector_wanted: `SQLStore`'s `pgvector` argument.
    """

    def __init__(
        self,
        db: Database,
        tables: Tables,
        index: VectorIndex | None,
        omit_expired: bool,
        sealer: Sealer | None,
        pgvector_wanted: bool | None,
    ) -> None:
        self.db = db
        self.tables = tables
        self.index = index
        self.omit_expired = omit_expired
        self.sealer = sealer
        self.pgvector_wanted = pgvector_wanted
        self.pgvector: bool | None = None
        """Whether pgvector ranks (None: not known before the first plan)."""

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
        """The results of a validated batch, whose texts are embedded as `doc_vectors` and
        `query_vectors`."""
        yield from schema_plan(self.db, self.tables)
        pgvector = yield from self._pgvector_plan()
        results: list[Result] = [None] * batch.size
        now = clock.now_us()
        if batch.gets or batch.searches or batch.lists:
            refresh = yield self._read_step(batch, query_vectors, now, pgvector, results)
            if refresh:
                # one UPDATE (up to CHUNK ids): no BEGIN/COMMIT on a server
                single = len(refresh) <= CHUNK
                yield Step(refresh_ttl, (self.tables, refresh, now), write=True, single=single)
        if batch.puts:
            yield self._puts_step(batch, doc_vectors, now, pgvector)
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
                and store_sql(self.db.url.get_backend_name()).pgvector
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

    def _puts_step(
        self, batch: Batch, doc_vectors: list[list[float]], now: int, pgvector: bool
    ) -> Step:
        vectors = iter(zip(to_blobs(doc_vectors), norms(doc_vectors), strict=True))
        rows = [
            p._replace(vectors=tuple((f, *next(vectors)) for f, _ in p.texts))
            for p in batch.puts.values()
        ]
        # one item without vectors to replace is one statement: no BEGIN/COMMIT on a server
        one = len(rows) == 1 and (rows[0].value is None or self.index is None)
        return Step(
            apply_puts,
            (self.tables, rows, now, self.index is not None, pgvector, self.sealer),
            write=True,
            single=one,
        )

    def _read_step(
        self,
        batch: Batch,
        query_vectors: list[list[float]],
        now: int,
        pgvector: bool,
        results: list[Result],
    ) -> Step:
        queries = dict(zip(batch.queries, query_vectors, strict=True))
        return Step(
            self._read,
            (batch, queries, now, pgvector, results),
            single=_one_statement(batch),
            # an index scan's settings (hnsw.ef_search, ivfflat.probes) are SET LOCAL
            transaction=bool(queries) and self._ann(pgvector) is not None,
        )

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
        found = get_items(unit, t, pairs, now, self.omit_expired, self.sealer)
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
    """Whether the reads of `batch` are one statement (one get, or one search done in SQL
    without a vector query): SQLite then runs it without BEGIN and COMMIT."""
    if batch.lists or len(batch.gets) + len(batch.searches) != 1:
        return False
    if batch.gets:
        return True
    search = batch.searches[0]
    # a filter may be re-checked page by page: those pages read one snapshot
    return search.text is None and not search.query.filter
