"""pgvector (PostgreSQL with the `vector` extension): its `vector` type, the store's copy
of the vectors as pgvector values, the extension's setup, and the approximate
(HNSW, IVFFlat) indexes of an index config's `ann_index_config`."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.types import UserDefinedType

from ..engine.schema import NamespacePath, Tables
from .vectors import ANN, from_blob


def raw_vector(blob: bytes, norm: float | None) -> list[float]:
    """A vector as given, from its stored unit vector and length (float32)."""
    unit_vector = from_blob(bytes(blob))
    scaled = unit_vector if norm is None else unit_vector * np.float32(norm)
    return scaled.astype(np.float32).tolist()  # type: ignore[no-any-return]


def pgvector_rows(vectors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The pgvector table's rows of stored vectors (their vectors as given)."""
    return [
        {
            "item_id": v["item_id"],
            "field": v["field"],
            "ns": v["ns"],
            "embedding": raw_vector(v["embedding"], v["norm"]),
        }
        for v in vectors
    ]


class Vector(UserDefinedType[list[float]]):
    """pgvector's `vector` or `halfvec` type (`dims`: fixed, else none), bound from floats."""

    cache_ok = True

    def __init__(self, dims: int | None = None, kind: str = "vector") -> None:
        self.dims = dims
        self.kind = kind

    def get_col_spec(self, **_: Any) -> str:
        return self.kind if self.dims is None else f"{self.kind}({int(self.dims)})"

    def bind_processor(self, dialect: Any) -> Any:
        return lambda value: None if value is None else "[" + ",".join(map(repr, value)) + "]"

    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.cast(bindvalue, self)


_pg_tables: dict[tuple[str, str | None], sa.Table] = {}


def pgvector_table(t: Tables) -> sa.Table:
    """The PostgreSQL-only copy of the vectors as pgvector values (own MetaData)."""
    table = _pg_tables.get(t.key)
    if table is None:
        table = _pg_tables[t.key] = sa.Table(
            f"{t.prefix}store_pgvectors",
            sa.MetaData(schema=t.schema),
            sa.Column(
                "item_id",
                sa.BigInteger,
                sa.ForeignKey(t.store_items.c.id, ondelete="CASCADE"),
                primary_key=True,
            ),
            sa.Column("field", sa.String(255), primary_key=True),
            sa.Column("embedding", Vector(), nullable=False),
            # the item's namespace: a search ranks the vectors under a prefix alone
            sa.Column("ns", NamespacePath, nullable=False),
            sa.Index(f"{t.prefix}store_pgvectors_ns_ix", "ns"),
        )
    return table


def enable_pgvector(conn: Connection, t: Tables, ann: ANN | None = None) -> bool:
    """If the `vector` extension is usable (installed on the search path, or created now), make
    sure the pgvector table (filled from the stored vectors) and the index of `ann` exist and
    return True; else False (the application ranks).

    Raises:
        ValueError: `ann` wants `halfvec` and the server's pgvector is older than 0.7.
    """
    if conn.dialect.name != "postgresql":
        return False
    installed = conn.execute(
        sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    ).scalar()
    if not installed:
        available = conn.execute(
            sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        ).scalar()
        if not available:
            return False
        try:
            with conn.begin_nested():
                conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        except sa.exc.DBAPIError:
            return False
    if conn.execute(sa.text("SELECT to_regtype('vector')")).scalar() is None:
        # installed in a schema not on the search_path: its type cannot be named unqualified
        return False
    if ann is not None and ann.vector_type == "halfvec":
        _check_halfvec(conn)
    table = pgvector_table(t)
    if not sa.inspect(conn).has_table(table.name, schema=t.schema):
        table.create(conn)
        rows = conn.execute(sa.select(t.store_vectors)).mappings().all()
        if rows:
            conn.execute(sa.insert(table), pgvector_rows(rows))
    if ann is not None:
        ann_index(t, ann).create(conn, checkfirst=True)
    return True


def _check_halfvec(conn: Connection) -> None:
    version = conn.execute(
        sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    ).scalar()
    parts = tuple(int(p) for p in re.findall(r"\d+", str(version))[:2])
    if parts < (0, 7):
        raise ValueError(
            f"index: 'ann_index_config' vector_type 'halfvec' needs pgvector 0.7 or later; this "
            f"server has pgvector {version} (ALTER EXTENSION vector UPDATE after upgrading it, "
            "or use vector_type 'vector', or pgvector=False to rank in the application)"
        )


_indexes: dict[tuple[Any, ...], sa.Index] = {}
_OPS = {"cosine": "cosine_ops", "inner_product": "ip_ops", "l2": "l2_ops"}
_SHORT = {"cosine": "cos", "inner_product": "ip", "l2": "l2"}


def ann_index_name(t: Tables, ann: ANN) -> str:
    """The name of the index of `ann` on the pgvector table (at most 63 characters)."""
    kind = "hnsw" if ann.kind == "hnsw" else "ivf"
    half = "h" if ann.vector_type == "halfvec" else ""
    name = f"{pgvector_table(t).name}_{kind}{half}{ann.dims}_{_SHORT[ann.distance]}"
    if len(name) > 63:
        name = f"{name[:54]}_{zlib.crc32(name.encode()):08x}"
    return name


def ann_index(t: Tables, ann: ANN) -> sa.Index:
    """The HNSW or IVFFlat expression index on `embedding::vector(dims)` (or `halfvec`) of
    `ann`, with the operator class of its distance."""
    key = (t.key, ann)
    index = _indexes.get(key)
    if index is None:
        table = pgvector_table(t)
        fixed = sa.cast(table.c.embedding, Vector(ann.dims, ann.vector_type))
        if ann.kind == "hnsw":
            settings: dict[str, int] = {"m": ann.m, "ef_construction": ann.ef_construction}
        else:
            settings = {"lists": ann.lists} if ann.lists is not None else {}
        index = _indexes[key] = sa.Index(
            ann_index_name(t, ann),
            fixed.label("embedding_fixed"),
            postgresql_using=ann.kind,
            postgresql_with=settings,
            postgresql_ops={"embedding_fixed": f"{ann.vector_type}_{_OPS[ann.distance]}"},
        )
    return index
