"""Semantic search: which texts of a value get embedded, how vectors are stored and ranked.

The index config is LangGraph's :class:`~langgraph.store.base.IndexConfig`: ``embed`` (any
LangChain ``Embeddings``, a sync or async function, or a provider string), ``dims`` and
``fields`` (JSON paths such as ``"text"``, ``"meta.title"``, ``"notes[*].body"``; ``"$"`` is
the whole value). Vectors are stored as float32 bytes in the store's vector table and ranked by
cosine similarity in the application (numpy). On PostgreSQL with the ``vector`` extension the
same cosine is computed by pgvector in the database (see :mod:`.sql`); the scores are the same.
There, and only there, ``"ann_index_config": {"kind": "hnsw"}`` in the index config (as in
LangGraph's PostgresStore; needs ``dims``) adds an HNSW index: faster on large stores,
approximate (a search may miss items that the exact ranking returns). The default is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, ensure_embeddings, get_text_at_path, tokenize_path

__all__ = ["HNSW", "VectorIndex", "best_first", "cosine_max_pool", "from_blob", "to_blobs", "unit"]


def to_blobs(vectors: Sequence[Sequence[float]]) -> list[bytes]:
    """Each vector scaled to unit length (zero stays zero), as little-endian float32 bytes (the
    cosine with a stored vector is then a dot product); normalized together, one numpy pass."""
    if not vectors:
        return []
    dims = {len(v) for v in vectors}
    if len(dims) > 1:  # vectors of several lengths (no ``dims`` in the config): one by one
        return [to_blobs([v])[0] for v in vectors]
    m = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    m = (m / np.where(norms == 0, 1.0, norms)).astype("<f4")
    return [row.tobytes() for row in m]


@lru_cache(maxsize=256)
def _tokens(path: str) -> list[str]:
    return tokenize_path(path)


def from_blob(blob: bytes) -> np.ndarray:
    """A vector stored by :func:`to_blobs`."""
    return np.frombuffer(bytes(blob), dtype="<f4")


def cosine_max_pool(
    query: Sequence[float], ids: Sequence[int], blobs: bytes
) -> tuple[list[int], list[float]]:
    """Cosine similarity of ``query`` to each stored (unit) vector, given as the concatenation
    of their blobs; the best per item id, best first."""
    if not ids:
        return [], []
    matrix = np.frombuffer(blobs, dtype="<f4").reshape(len(ids), -1)
    return best_first(ids, _cosine(np.asarray(query, dtype=np.float64), matrix))


def _unit32(q: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(q)
    return (q / norm if norm else np.zeros_like(q)).astype(np.float32)


def unit(query: Sequence[float]) -> list[float]:
    """``query`` scaled to unit length in float32, as the ranking uses it (zero stays zero):
    its inner product with a stored vector is their cosine."""
    return _unit32(np.asarray(query, dtype=np.float64)).tolist()  # type: ignore[no-any-return]


def _cosine(q: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Cosine of ``q`` with unit-length (or zero) rows."""
    return (matrix @ _unit32(q)).astype(np.float64)


def best_first(
    ids: Sequence[int], scores: Sequence[float] | np.ndarray
) -> tuple[list[int], list[float]]:
    """Keep the best score per id; ids and scores by score descending (ties: lower id first)."""
    if len(ids) == 0:
        return [], []
    id_arr = np.asarray(ids, dtype=np.int64)
    score_arr = np.asarray(scores, dtype=np.float64)
    order = np.lexsort((-score_arr, id_arr))  # by id, best score first within an id
    id_arr, score_arr = id_arr[order], score_arr[order]
    first = np.ones(len(id_arr), dtype=bool)
    first[1:] = id_arr[1:] != id_arr[:-1]
    id_arr, score_arr = id_arr[first], score_arr[first]
    rank = np.argsort(-score_arr, kind="stable")
    return id_arr[rank].tolist(), score_arr[rank].tolist()


@dataclass(frozen=True)
class HNSW:
    """An approximate (HNSW) pgvector index over ``dims``-dimensional vectors: ``m`` links per
    node, ``ef_construction`` and ``ef_search`` candidate lists when building and searching
    (pgvector's defaults). The index is built once per table and dimension: changing ``m`` or
    ``ef_construction`` later keeps the existing index (drop it to rebuild)."""

    dims: int
    per_item: int = 1  # vectors per item (fields), for the number of candidates
    m: int = 16
    ef_construction: int = 64
    ef_search: int = 40


_HNSW_DIMS = 2000  # pgvector's limit for an index on ``vector``


def _ann(config: Any, dims: int | None, fields: int) -> HNSW | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        raise TypeError(f"index: 'ann_index_config' must be a dict, got {type(config).__name__}")
    kind = config.get("kind", "flat")
    unknown = set(config) - {"kind", "m", "ef_construction", "ef_search"}
    if kind not in ("flat", "hnsw") or (kind == "flat" and set(config) - {"kind"}) or unknown:
        raise ValueError(
            "index: 'ann_index_config' takes kind 'flat' (exact, the default) or kind 'hnsw' "
            f"with optional m, ef_construction, ef_search; got {config!r}"
        )
    if kind == "flat":
        return None
    if dims is None or dims > _HNSW_DIMS:
        raise ValueError(f"index: an 'hnsw' index needs 'dims' between 1 and {_HNSW_DIMS}")
    params = {k: config[k] for k in ("m", "ef_construction", "ef_search") if k in config}
    for name, v in params.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1000:
            raise ValueError(f"index: 'ann_index_config' {name} must be an int in 1..1000")
    return HNSW(dims, fields, **params)


@dataclass(frozen=True)
class VectorIndex:
    """A validated index config: the embeddings, the fields to embed and, for PostgreSQL with
    pgvector, an optional approximate index (``ann``; None: exact ranking)."""

    embeddings: Embeddings
    dims: int | None
    fields: tuple[str, ...]
    ann: HNSW | None = None

    @classmethod
    def from_config(cls, index: IndexConfig | dict[str, Any]) -> VectorIndex:
        """Validate an ``index`` argument.

        Raises:
            TypeError: not a dict, or ``embed`` missing.
            ValueError: ``dims`` not a positive int, ``fields`` not a list of strings, or an
                ``ann_index_config`` other than kind ``flat`` or ``hnsw`` (which needs
                ``dims``) with ints ``m``, ``ef_construction``, ``ef_search``.
        """
        if not isinstance(index, dict):
            raise TypeError(f"index: expected a dict (IndexConfig), got {type(index).__name__}")
        if index.get("embed") is None:
            raise TypeError("index: 'embed' is required (an Embeddings, a function or a name)")
        dims = index.get("dims")
        if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
            raise ValueError(f"index: 'dims' must be a positive int, got {dims!r}")
        fields = index.get("fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
            raise ValueError(f"index: 'fields' must be a list of non-empty strings, got {fields!r}")
        ann = _ann(index.get("ann_index_config"), dims, len(fields))
        return cls(ensure_embeddings(index["embed"]), dims, tuple(fields), ann)

    def texts(self, value: dict[str, Any], fields: Sequence[str] | None) -> list[tuple[str, str]]:
        """``(field label, text)`` pairs to embed for a value (``fields`` overrides the
        config's); an array path yields one vector per element (``"path.0"``, ...)."""
        out: list[tuple[str, str]] = []
        for path in self.fields if fields is None else fields:
            tokens = path if path == "$" else _tokens(path)
            found = [t for t in get_text_at_path(value, tokens) if t]
            if len(found) == 1:
                out.append((path, found[0]))
            else:
                out.extend((f"{path}.{i}", text) for i, text in enumerate(found))
        return out

    def check(self, vectors: Sequence[Sequence[float]], expected: int) -> list[list[float]]:
        """Validate what the embeddings returned."""
        result = [list(v) for v in vectors]
        if len(result) != expected:
            raise ValueError(f"index: embeddings returned {len(result)} vectors for {expected}")
        for v in result:
            if self.dims is not None and len(v) != self.dims:
                raise ValueError(f"index: got a {len(v)}-dim vector, 'dims' is {self.dims}")
        return result

    def embed(self, texts: list[str], queries: list[str]) -> tuple[list[list[float]], ...]:
        """Embed document texts and query texts (sync)."""
        docs = self.embeddings.embed_documents(texts) if texts else []
        return self.check(docs, len(texts)), self.check(
            [self.embeddings.embed_query(q) for q in queries], len(queries)
        )

    async def aembed(self, texts: list[str], queries: list[str]) -> tuple[list[list[float]], ...]:
        """Embed document texts and query texts (async)."""
        docs = await self.embeddings.aembed_documents(texts) if texts else []
        return self.check(docs, len(texts)), self.check(
            [await self.embeddings.aembed_query(q) for q in queries], len(queries)
        )
