"""Semantic search: the index config (LangGraph's `IndexConfig` with `PostgresStore`'s
`distance_type` and `ann_index_config`), the texts of a value to embed, and the exact ranking.
Vectors are stored as their unit vector (float32 bytes) and their length, so that every
distance is exact."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, ensure_embeddings, get_text_at_path, tokenize_path

from ..validation import INT64_MAX, check_int

DISTANCES = ("cosine", "l2", "inner_product")
"""`distance_type` values, as `PostgresStore` takes them."""


def norms(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The Euclidean length of each vector (stored beside its unit vector)."""
    return [float(np.linalg.norm(np.asarray(v, dtype=np.float64))) for v in vectors]


def to_blobs(vectors: Sequence[Sequence[float]]) -> list[bytes]:
    """Each vector scaled to unit length (zero stays zero), as little-endian float32 bytes."""
    if not vectors:
        return []
    dims = {len(v) for v in vectors}
    if len(dims) > 1:  # vectors of several lengths (no ``dims`` in the config): one by one
        return [to_blobs([v])[0] for v in vectors]
    m = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    m = (m / np.where(norms == 0, 1.0, norms)).astype("<f4")
    return [row.tobytes() for row in m]


def from_blob(blob: bytes) -> np.ndarray:
    """A vector stored by `to_blobs`."""
    return np.frombuffer(bytes(blob), dtype="<f4")


def rank_max_pool(
    query: Sequence[float],
    ids: Sequence[int],
    blobs: bytes,
    lengths: Sequence[float] | None = None,
    distance: str = "cosine",
) -> tuple[list[int], list[float]]:
    """The score of `query` against each stored vector (unit vectors concatenated in `blobs`,
    their `lengths`) by `distance`; the best per item id, best first."""
    if not ids:
        return [], []
    matrix = np.frombuffer(blobs, dtype="<f4").reshape(len(ids), -1)
    q = np.asarray(query, dtype=np.float64)
    q_len = float(np.linalg.norm(q))
    unit = (q / q_len if q_len else np.zeros_like(q)).astype(np.float32)
    cosine = (matrix @ unit).astype(np.float64)
    if distance == "cosine":
        return best_first(ids, cosine)
    size = np.array(lengths, dtype=np.float64)
    if distance == "inner_product":
        return best_first(ids, size * q_len * cosine)
    squared = size * size + q_len * q_len - 2.0 * size * q_len * cosine
    return best_first(ids, -np.sqrt(np.maximum(squared, 0.0)))


def best_first(
    ids: Sequence[int], scores: Sequence[float] | np.ndarray
) -> tuple[list[int], list[float]]:
    """Keep the best score per id; ids and scores by score descending (ties: lower id first)."""
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
class ANN:
    """An approximate pgvector index (`ann_index_config`): `kind` `"hnsw"` (`m`,
    `ef_construction`, `ef_search`) or `"ivfflat"` (`lists`, `probes`). Other settings build
    another index (drop the old one to save its upkeep)."""

    kind: str
    dims: int
    vector_type: str = "vector"
    distance: str = "cosine"
    per_item: int = 1  # vectors per item (fields), for the number of candidates
    m: int = 16
    ef_construction: int = 64
    ef_search: int = 40
    lists: int | None = None
    probes: int = 1


_MAX_DIMS = {"vector": 2000, "halfvec": 4000}  # pgvector's limits for an indexed vector
_ANN_KEYS = {
    "hnsw": {"m": (2, 100), "ef_construction": (4, 1000), "ef_search": (1, 1000)},
    "ivfflat": {"lists": (1, 32768), "nlist": (1, 32768), "probes": (1, 32768)},
    "flat": {},
}
_INDEX_KEYS = {"embed", "dims", "fields", "text_fields", "distance_type", "ann_index_config"}


def _ann(config: Any, dims: int | None, fields: int, distance: str) -> ANN | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        raise TypeError(f"index: 'ann_index_config' must be a dict, got {type(config).__name__}")
    kind = config.get("kind", "hnsw")  # PostgresStore's default for a given config
    if kind not in _ANN_KEYS:
        raise ValueError(
            f"index: 'ann_index_config' kind must be 'hnsw', 'ivfflat' or 'flat', got {kind!r}"
        )
    vector_type = config.get("vector_type", "vector")
    if vector_type not in _MAX_DIMS:
        raise ValueError(
            "index: 'ann_index_config' vector_type must be 'vector' or 'halfvec', "
            f"got {vector_type!r}"
        )
    allowed = _ANN_KEYS[kind]
    unknown = sorted(set(config) - {"kind", "vector_type", *allowed})
    if unknown:
        raise ValueError(
            f"index: 'ann_index_config' of kind {kind!r} takes no {', '.join(map(repr, unknown))} "
            f"(it takes {', '.join(sorted({'kind', 'vector_type', *allowed}))})"
        )
    if "lists" in config and "nlist" in config:
        raise ValueError("index: 'ann_index_config' takes 'lists' or 'nlist', not both")
    params: dict[str, int] = {}
    for name, (low, high) in allowed.items():
        if name in config:
            v = check_int(config[name], f"index: 'ann_index_config' {name}", low=low, high=high)
            params["lists" if name == "nlist" else name] = v
    if kind == "flat":
        return None
    limit = _MAX_DIMS[vector_type]
    if dims is None or dims > limit:
        raise ValueError(
            f"index: an {kind!r} index of {vector_type!r} needs 'dims' between 1 and {limit}"
        )
    if params.get("ef_construction", 64) < 2 * params.get("m", 16):
        raise ValueError("index: 'ann_index_config' ef_construction must be at least 2 * m")
    return ANN(kind, dims, vector_type, distance, fields, **params)


@dataclass(frozen=True)
class VectorIndex:
    """A validated index config (`ann`: pgvector's approximate index; None: exact ranking)."""

    embeddings: Embeddings
    dims: int | None
    fields: tuple[str, ...]
    ann: ANN | None = None
    distance: str = "cosine"

    @classmethod
    def from_config(cls, index: IndexConfig | dict[str, Any]) -> VectorIndex:
        """Validate an `index` argument.

        Raises:
            TypeError: not a dict, or `embed` missing.
            ValueError: a key LangGraph's stores do not take, `dims` not a positive int,
                `fields`/`text_fields` not a list of strings (or both, different), a
                `distance_type` other than `cosine`, `l2` or `inner_product`, or a bad
                `ann_index_config` (`hnsw` and `ivfflat` need `dims`).
        """
        if not isinstance(index, dict):
            raise TypeError(f"index: expected a dict (IndexConfig), got {type(index).__name__}")
        unknown = sorted(set(index) - _INDEX_KEYS)
        if unknown:
            raise ValueError(
                f"index: unknown key(s) {', '.join(map(repr, unknown))} "
                f"(known: {', '.join(sorted(_INDEX_KEYS))})"
            )
        if index.get("embed") is None:
            raise TypeError("index: 'embed' is required (an Embeddings, a function or a name)")
        dims = index.get("dims")
        if dims is not None:
            check_int(dims, "index: 'dims'", low=1, high=INT64_MAX)
        fields = _fields(dict(index))
        distance = index.get("distance_type", "cosine")
        if distance not in DISTANCES:
            raise ValueError(
                "index: 'distance_type' must be 'cosine', 'l2' or 'inner_product', "
                f"got {distance!r}"
            )
        ann = _ann(index.get("ann_index_config"), dims, len(fields), distance)
        return cls(ensure_embeddings(index["embed"]), dims, tuple(fields), ann, distance)

    def texts(self, value: dict[str, Any], fields: Sequence[str] | None) -> list[tuple[str, str]]:
        """`(field label, text)` pairs to embed for a value (`fields` overrides the
        config's); an array path yields one vector per element (`"path.0"`, ...)."""
        out: list[tuple[str, str]] = []
        for path in self.fields if fields is None else fields:
            tokens = path if path == "$" else tokenize_path(path)
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


def _fields(index: dict[str, Any]) -> list[str]:
    """`fields`, or `text_fields` (`SqliteStore`'s name), default `["$"]`."""
    given = {k: index[k] for k in ("fields", "text_fields") if index.get(k) is not None}
    if len(given) == 2 and _as_list(given["fields"]) != _as_list(given["text_fields"]):
        raise ValueError("index: 'fields' and 'text_fields' name the same setting: give one")
    fields = _as_list(next(iter(given.values()))) if given else ["$"]
    if (
        not isinstance(fields, list)
        or not fields
        or not all(isinstance(f, str) and f for f in fields)
    ):
        name = next(iter(given), "fields")
        raise ValueError(f"index: {name!r} must be a list of non-empty strings, got {fields!r}")
    return fields


def _as_list(fields: Any) -> Any:
    if isinstance(fields, str):
        return [fields]
    return list(fields) if isinstance(fields, list | tuple) else fields
