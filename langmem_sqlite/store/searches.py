"""The store's searches: newest first without a query; with one, ranked exactly by each item's
best vector (numpy, or pgvector in the database, optionally through an approximate index),
then only the best items are read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from ..engine.schema import Tables
from ..engine.unit import Unit
from .filter_sql import SearchQuery, search_params, search_shape, search_where
from .filters import matches
from .items import ItemRow, item_columns, item_row, newest_first, not_lapsed, within_prefix
from .pgvector_schema import Vector, pgvector_table
from .vectors import ANN, rank_max_pool


def _paged(stmt: Any) -> Any:
    """An ordered select with its LIMIT and OFFSET as the parameters `lim` and `off`."""
    return stmt.limit(sa.bindparam("lim")).offset(sa.bindparam("off"))


def matching_pages(
    unit: Unit,
    paged: Any,
    params: dict[str, Any],
    q: SearchQuery,
    skip: int,
    want: int,
    exact: bool,
) -> list[ItemRow]:
    """`want` rows after the first `skip` of a `_paged` select that match `q.filter`: one query
    when the SQL is exact, else pages re-checked in Python."""
    if want <= 0:
        return []
    if exact:
        rows = unit.execute(paged, {**params, "lim": want, "off": skip})
        return [item_row(r, None, q.sealer) for r in rows]
    kept: list[ItemRow] = []
    start, size = 0, max(skip + want, 100)
    while len(kept) < skip + want:
        rows = unit.execute(paged, {**params, "lim": size, "off": start}).all()
        found = (item_row(r, None, q.sealer) for r in rows)
        kept.extend(item for item in found if matches(item.value, q.filter))
        if len(rows) < size:
            break
        start, size = start + size, size * 2
    return kept[skip : skip + want]


def search_items(unit: Unit, t: Tables, q: SearchQuery, now: int) -> list[ItemRow]:
    """Items under `q.prefix` matching `q.filter`, most recently updated first."""

    def build() -> tuple[Any, bool]:
        where, exact = search_where(unit, t, q)
        stmt = sa.select(*item_columns(t)).where(*where).order_by(*newest_first(t))
        return _paged(stmt), exact

    paged, exact = unit.statement(("search", t.key, search_shape(q)), build)
    return matching_pages(unit, paged, search_params(unit, q, now), q, q.offset, q.limit, exact)


_PG_OPS = {"cosine": "<=>", "inner_product": "<#>", "l2": "<->"}
"""pgvector's distance operators (lower is nearer) for each `distance_type`."""


def _score(distance: str, d: float) -> float:
    """The score of a pgvector distance, as PostgresStore gives it."""
    return 1.0 - d if distance == "cosine" else -d


def _scored(
    unit: Unit,
    t: Tables,
    q: SearchQuery,
    query_vector: list[float],
    now: int,
    distance: str = "cosine",
) -> tuple[list[int], list[float]]:
    """Ids of items with a vector and their best scores, best first, ranked by numpy."""
    items, v = t.store_items, t.store_vectors
    # the driver's bytes as they are (no result processing: this can be every vector stored)
    raw = sa.type_coerce(v.c.embedding, sa.types.NullType())
    sealed = [v.c.ns, v.c.field] if q.sealer is not None else []
    stmt = sa.select(v.c.item_id, raw, v.c.norm, *sealed).where(within_prefix(v.c.ns, q.prefix))
    if q.filter:  # narrow in SQL with the item's value
        stmt = stmt.join(items, items.c.id == v.c.item_id).where(*search_where(unit, t, q)[0])
    rows: Sequence[Any] = unit.execute(stmt, search_params(unit, q, now)).all()
    blobs = [r[1] for r in rows]
    if q.sealer is not None:
        opened = q.sealer.open_vector
        blobs = [opened(_text(r[3]), r[0], _text(r[4]), r[1]) for r in rows]
    ids, lengths = [r[0] for r in rows], [r[2] for r in rows]
    return rank_max_pool(query_vector, ids, b"".join(blobs), lengths, distance)


def _text(ns: Any) -> str:
    """An id column read raw (bytes on MySQL/MariaDB)."""
    return ns.decode("utf-8") if isinstance(ns, bytes | bytearray) else str(ns)


def _pg_distance(embedding: Any, distance: str, vector_type: Vector) -> Any:
    """pgvector's distance of `embedding` to the query (parameter `q`, of `vector_type`)."""
    op = embedding.op(_PG_OPS[distance], return_type=sa.Float)
    return op(sa.bindparam("q", type_=vector_type))


def _exact_distance(pgv: sa.Table, distance: str) -> Any:
    """The exact distance, as numpy ranks it: a zero vector's cosine is 0 (`<=>` gives NaN)."""
    d = _pg_distance(pgv.c.embedding, distance, Vector())
    if distance != "cosine":
        return d
    return sa.func.coalesce(sa.func.nullif(d, sa.literal_column("'NaN'::float8")), 1.0)


def _pg_ranking(t: Tables, where: Sequence[Any], ann: ANN | None, distance: str) -> Any:
    """`(item_id, neg)` per item matching `where`, best first (`neg`: its smallest distance to
    the query `q`). With `ann`, the `candidates` nearest vectors of the whole table are taken
    first, so that PostgreSQL's generic plan still ranks them through the index."""
    pgv, items = pgvector_table(t), t.store_items
    if ann is None:
        best = sa.func.min(_exact_distance(pgv, distance)).label("neg")
        joined = sa.select(pgv.c.item_id, best).join(items, items.c.id == pgv.c.item_id)
        return joined.where(*where).group_by(pgv.c.item_id).order_by(best, pgv.c.item_id)
    typed = Vector(ann.dims, ann.vector_type)
    neg = _pg_distance(sa.cast(pgv.c.embedding, typed), ann.distance, typed)
    nearest = sa.select(pgv.c.item_id, neg.label("neg")).order_by(neg)
    near = nearest.limit(sa.bindparam("candidates")).subquery()
    best = sa.func.min(near.c.neg).label("neg")
    top = (
        sa.select(near.c.item_id, best)
        .join(items, items.c.id == near.c.item_id)
        .where(*where)
        .group_by(near.c.item_id)
    )
    return top.order_by(best, near.c.item_id)


def _pg_top(
    unit: Unit,
    t: Tables,
    q: SearchQuery,
    query_vector: list[float],
    now: int,
    want: int,
    ann: ANN | None,
    distance: str = "cosine",
) -> list[ItemRow] | None:
    """pgvector: the best `want` items in one statement; None when the filter is not exact in
    SQL. With `ann`, its index yields the nearest vectors, filtered afterwards; when fewer than
    `want` items remain, the exact ranking answers instead."""
    where, exact = search_where(unit, t, q)
    if not exact:
        return None
    ranked = _pg_ranking(t, where, ann, distance).limit(sa.bindparam("lim")).subquery()
    stmt = (
        sa.select(*item_columns(t), ranked.c.neg)
        .join_from(ranked, t.store_items, t.store_items.c.id == ranked.c.item_id)
        .order_by(ranked.c.neg, ranked.c.item_id)
    )
    params = search_params(unit, q, now)
    query32 = np.asarray(query_vector, dtype=np.float32).tolist()  # as pgvector computes
    params.update(q=query32, lim=want)
    if ann is not None:
        params["candidates"] = _candidates(ann, want)
        # the scan's breadth, for this transaction only (the store runs such searches as one)
        if ann.kind == "hnsw":
            setting = ("hnsw.ef_search", _ef_search(ann, want))
        else:
            setting = ("ivfflat.probes", ann.probes)
        unit.execute(_SET_LOCAL, {"name": setting[0], "value": str(setting[1])})
    found = [item_row(r, _score(distance, r[7])) for r in unit.execute(stmt, params)]
    if ann is not None and len(found) < want:
        # the index scan ran dry (ef_search, then the filter) or its vectors were of fewer
        # items: rank exactly, so that a search never returns fewer items than match
        return _pg_top(unit, t, q, query_vector, now, want, None, distance)
    return found


_SET_LOCAL = sa.select(sa.func.set_config(sa.bindparam("name"), sa.bindparam("value"), True))


def _candidates(ann: ANN, want: int) -> int:
    """The nearest vectors an index search of `want` items groups (as PostgresStore)."""
    return 2 * want * ann.per_item + 1


def _ef_search(ann: ANN, want: int) -> int:
    """`hnsw.ef_search` for `want` items: at least its candidates (pgvector's limit: 1,000)."""
    return max(ann.ef_search, min(_candidates(ann, want), 1000))


def vector_search(
    unit: Unit,
    t: Tables,
    q: SearchQuery,
    query_vector: list[float],
    now: int,
    pgvector: bool = False,
    ann: ANN | None = None,
    distance: str = "cosine",
) -> list[ItemRow]:
    """Items matching the prefix and filter, by their best vector's score against
    `query_vector`; items without a vector follow, unscored."""
    want = q.offset + q.limit
    c = t.store_items.c
    top = _pg_top(unit, t, q, query_vector, now, want, ann, distance) if pgvector else None
    ids: list[int] = []
    scores: list[float] = []
    if top is None:  # rank with numpy, then read the items best first
        ids, scores = _scored(unit, t, q, query_vector, now, distance)
    kept = top or []
    step = max(2 * want, 50) if q.filter else want  # rows to read per round
    stmt = sa.select(*item_columns(t)).where(
        c.id.in_(sa.bindparam("ids", expanding=True)), not_lapsed(t, q.omit_expired)
    )
    for i in range(0, len(ids), max(step, 1)):
        if len(kept) >= want:
            break
        chunk = dict(zip(ids[i : i + step], scores[i : i + step], strict=True))
        rows = unit.execute(stmt, {"ids": list(chunk), "now": now})
        by_id = {r[0]: item_row(r, chunk[r[0]], q.sealer) for r in rows}
        kept.extend(
            by_id[item_id]
            for item_id in chunk
            if item_id in by_id and matches(by_id[item_id].value, q.filter)
        )
    if len(kept) < want:  # then the items without a vector, newest first
        has_vector = sa.exists().where(t.store_vectors.c.item_id == c.id)
        where, exact = search_where(unit, t, q)
        unscored = sa.select(*item_columns(t)).where(*where, ~has_vector).order_by(*newest_first(t))
        params = search_params(unit, q, now)
        kept.extend(matching_pages(unit, _paged(unscored), params, q, 0, want - len(kept), exact))
    return kept[q.offset : want]
