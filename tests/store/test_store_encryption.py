"""Encryption at rest of the long-term store: values and embeddings are ciphertext in the rows
and the files; gets, filters and vector search give what an unencrypted store gives; on SQLite,
PostgreSQL (with pgvector too) and MariaDB, sync and async; and ``Memory(encryption_key=...)``
keeps messages, checkpoints and facts encrypted together."""

from __future__ import annotations

import glob
import operator
import os
from pathlib import Path
from typing import Any, TypedDict

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import Embeddings
from langgraph.graph import END, START, StateGraph

from langmem_sqlite import Memory, SQLStore
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "Lyonnaise"


class WordEmbedding(Embeddings):
    """Deterministic: one dimension per known word."""

    WORDS = ("lyonnaise", "tea", "coffee", "jazz", "chess", "paris")

    def _vec(self, text: str) -> list[float]:
        words = text.lower().split()
        return [float(words.count(w)) + 0.01 * i for i, w in enumerate(self.WORDS)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


INDEX: Any = {"dims": len(WordEmbedding.WORDS), "embed": WordEmbedding(), "fields": ["fact"]}

FACTS = {
    "f1": {"fact": f"lives in the {SECRET} quarter", "n": 1, "tag": "home"},
    "f2": {"fact": "drinks tea and coffee", "n": 2, "tag": "taste"},
    "f3": {"fact": "plays jazz and chess", "n": 3, "tag": "taste", "meta": {"since": 2001}},
    "f4": {"fact": f"visited paris, not {SECRET}", "n": 4, "tag": "travel"},
}


def _raw_rows(url: str, prefix: str) -> tuple[list[Any], list[bytes]]:
    t = get_tables(prefix)
    engine = get_database(url).sync_engine
    with engine.connect() as c:
        values = list(c.execute(sa.select(sa.cast(t.store_items.c.value, sa.Text))).scalars())
        blobs = [bytes(b) for b in c.execute(sa.select(t.store_vectors.c.embedding)).scalars()]
    return values, blobs


def _fill(store: SQLStore) -> None:
    for key, value in FACTS.items():
        store.put(("users", "u1", "facts"), key, value)


def _answers(store: SQLStore) -> list[Any]:
    ns = ("users", "u1", "facts")

    def keys(items: list[Any]) -> list[str]:
        return [i.key for i in items]

    return [
        store.get(ns, "f3").value,  # type: ignore[union-attr]
        sorted(keys(store.search(ns))),
        sorted(keys(store.search(ns, filter={"tag": "taste"}))),
        sorted(keys(store.search(ns, filter={"n": {"$gte": 2}, "meta.since": 2001}))),
        keys(store.search(ns, filter={"tag": "taste"}, limit=1, offset=1)),
        [(i.key, round(i.score, 5)) for i in store.search(ns, query="tea coffee", limit=2)],
        [(i.key, round(i.score, 5)) for i in store.search(("users",), query=SECRET, limit=4)],
        keys(store.search(ns, query="jazz", filter={"tag": "taste"}, limit=3)),
    ]


def test_values_and_vectors_are_ciphertext_and_results_the_same(
    db_url: str, prefix: str, backend: str, tmp_path: Path
) -> None:
    sealed = SQLStore(db_url, table_prefix=prefix, index=INDEX, encryption_key=KEY)
    _fill(sealed)
    plain = SQLStore(f"sqlite:///{tmp_path}/plain.db", index=INDEX)
    _fill(plain)
    assert _answers(sealed) == _answers(plain)
    values, blobs = _raw_rows(db_url, prefix)
    assert len(values) == 4 and len(blobs) == 4
    for value in values:
        # probes with a space or a quote: base64 ciphertext cannot spell them by chance (it
        # once spelled "tea"); every plaintext value holds '"fact"'
        assert value.startswith('"lmenc1:') and SECRET not in value
        assert '"fact"' not in value and "drinks tea" not in value
    plain_blobs = _raw_rows(f"sqlite:///{tmp_path}/plain.db", "langmem_")[1]
    for blob in blobs:
        assert blob not in plain_blobs and len(blob) == len(plain_blobs[0]) + 28
    if backend == "sqlite":  # the file itself (and its write-ahead log)
        path = db_url.removeprefix("sqlite:///")
        data = b"".join(Path(p).read_bytes() for p in glob.glob(path + "*"))
        assert SECRET.encode() not in data and b"coffee" not in data
        assert SECRET.encode() in Path(f"{tmp_path}/plain.db").read_bytes() + b"".join(
            Path(p).read_bytes() for p in glob.glob(f"{tmp_path}/plain.db-*")
        )


async def test_async_encrypted_store(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix, index=INDEX, encryption_key=KEY)
    for key, value in FACTS.items():
        await store.aput(("users", "u2"), key, value)
    item = await store.aget(("users", "u2"), "f1")
    assert item is not None and item.value == FACTS["f1"]
    found = await store.asearch(("users",), filter={"tag": "taste"})
    assert sorted(i.key for i in found) == ["f2", "f3"]
    ranked = await store.asearch(("users",), query="chess jazz", limit=1)
    assert [i.key for i in ranked] == ["f3"]
    values, _ = _raw_rows(db_url, prefix)
    assert all(SECRET not in v for v in values)


def test_wrong_or_missing_keys_fail_clearly(db_url: str, prefix: str) -> None:
    SQLStore(db_url, table_prefix=prefix, encryption_key=KEY).put(("a",), "k", {"x": SECRET})
    with pytest.raises(ValueError, match="cannot be decrypted"):
        SQLStore(db_url, table_prefix=prefix, encryption_key=b"x" * 32).get(("a",), "k")
    with pytest.raises(ValueError, match="encrypted: give the store its key"):
        SQLStore(db_url, table_prefix=prefix).get(("a",), "k")
    SQLStore(db_url, table_prefix=prefix).put(("a",), "plain", {"x": 1})
    with pytest.raises(ValueError, match="not encrypted"):
        SQLStore(db_url, table_prefix=prefix, encryption_key=KEY).get(("a",), "plain")
    with pytest.raises(ValueError, match="encryption_key"):
        SQLStore(db_url, table_prefix=prefix, encryption_key=b"short")


def test_a_row_moved_to_another_key_fails_authentication(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix, encryption_key=KEY)
    store.put(("users", "alice"), "secret", {"x": SECRET})
    store.put(("users", "bob"), "secret", {"x": "bob's"})
    items = get_tables(prefix).store_items
    with get_database(db_url).sync_engine.begin() as c:
        alice = c.execute(
            sa.select(items.c.value).where(items.c.ns == "users\x01alice\x01")
        ).scalar()
        c.execute(sa.update(items).where(items.c.ns == "users\x01bob\x01").values(value=alice))
    with pytest.raises(ValueError, match="cannot be decrypted"):
        store.get(("users", "bob"), "secret")


def test_nul_is_stored_when_encrypted(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix, encryption_key=KEY)
    store.put(("a",), "k", {"code": "a\x00b"})
    assert store.get(("a",), "k").value == {"code": "a\x00b"}  # type: ignore[union-attr]


def test_encrypted_store_skips_pgvector(pgvector_url: str, tmp_path: Path) -> None:
    prefix = f"e{os.urandom(4).hex()}_"
    store = SQLStore(pgvector_url, table_prefix=prefix, index=INDEX, encryption_key=KEY)
    try:
        _fill(store)
        plain = SQLStore(f"sqlite:///{tmp_path}/plain.db", index=INDEX)
        _fill(plain)
        assert _answers(store) == _answers(plain)
        with get_database(pgvector_url).sync_engine.connect() as c:
            copy = c.execute(
                sa.text("SELECT to_regclass(:n)"), {"n": f"{prefix}store_pgvectors"}
            ).scalar()
        assert copy is None  # no plaintext copy of the vectors
        with pytest.raises(ValueError, match="pgvector"):
            SQLStore(pgvector_url, table_prefix=prefix, encryption_key=KEY, pgvector=True)
    finally:
        get_tables(prefix).metadata.drop_all(get_database(pgvector_url).sync_engine)


class State(TypedDict):
    steps: list[str]


def test_memory_encrypts_history_checkpoints_and_facts(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    memory = Memory(f"sqlite:///{path}", encryption_key=KEY, index=INDEX)
    memory.history("s1", user_id="u1").add_user_message(f"I moved to the {SECRET} quarter")
    facts = memory.facts("u1")
    facts.remember(f"lives in the {SECRET} quarter")
    builder = StateGraph(State)

    def step(state: State) -> dict[str, Any]:
        return {"steps": [*state["steps"], f"{SECRET} step"]}

    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    graph = builder.compile(checkpointer=memory.checkpointer, store=memory.store)
    config: Any = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"steps": []}, config)

    assert [f.value["fact"] for f in facts.list_facts()] == [f"lives in the {SECRET} quarter"]
    assert graph.get_state(config).values["steps"] == [f"{SECRET} step"]
    assert SECRET in memory.history("s1", user_id="u1").messages[0].text
    assert [i.value["fact"] for i in facts.select(SECRET)] == [f"lives in the {SECRET} quarter"]
    data = b"".join(Path(p).read_bytes() for p in glob.glob(f"{path}*"))
    assert SECRET.encode() not in data
    assert operator.contains(data, b"lmenc1:")
