"""pgvector (PostgreSQL with the `vector` extension): its `vector` type, the store's copy
of the vectors as pgvector values, the extension's setup and upgrades, and the approximate
(HNSW, IVFFlat) indexes of an index config's `ann_index_config`."""

from __future__ import annotations

import logging
import re
import zlib
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.types import UserDefinedType

from ..engine.dialects import rules_class
from ..engine.schema import NamespacePath, Tables
from .vectors import ANN, from_blob

logger = logging.getLogger(__name__)

__all__ = [
    "Vector",
    "ann_index",
    "ann_index_name",
    "enable_pgvector",
    "pgvector_table",
    "upgrade_pgvector",
]


def _may_have_pgvector(conn: Connection) -> bool:
    return rules_class(conn.engine.url).store_pgvector


def raw_vector(blob: bytes, norm: float | None) -> list[float]:
    """A vector as given, from its stored unit vector and length (float32)."""
    unit_vector = from_blob(bytes(blob))
    scaled = unit_vector if norm is None else unit_vector * np.float32(norm)
    return scaled.astype(np.float32).tolist()  # type: ignore[no-any-return]


class Vector(UserDefinedType[list[float]]):
    """pgvector's `vector` type, or `halfvec` (`dims`: fixed dimension, else none), bound
    from a list of floats."""

    cache_ok = True

    def __init__(self, dims: int | None = None, kind: str = "vector") -> None:
        if kind not in ("vector", "halfvec"):
            raise ValueError(f"vector type: 'vector' or 'halfvec', got {kind!r}")
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
            # the item's namespace: a search under a prefix ranks its vectors without reading
            # the items (added to tables made before it, see enable_pgvector)
            sa.Column("ns", NamespacePath, nullable=False),
            sa.Index(f"{t.prefix}store_pgvectors_ns_ix", "ns"),
        )
    return table


def enable_pgvector(conn: Connection, t: Tables, ann: ANN | None = None) -> bool:
    """On PostgreSQL: if the `vector` extension is installed (in a schema on the search path),
    or available and this role may create it, make sure the pgvector table exists (filled from
    the stored vectors), with the index of `ann` if given, and return True; else False (the
    application ranks then).

    Raises:
        ValueError: `ann` has `vector_type` `"halfvec"` and the server's pgvector is
            older than 0.7, which introduced it.
    """
    if not _may_have_pgvector(conn):
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
        # installed in a schema that is not on this connection's search_path: its type and
        # operators cannot be named unqualified, so rank in the application
        return False
    if ann is not None and ann.vector_type == "halfvec":
        _check_halfvec(conn)
    table = pgvector_table(t)
    if not sa.inspect(conn).has_table(table.name, schema=t.schema):
        table.create(conn)
        rows = conn.execute(sa.select(t.store_vectors)).all()
        if rows:
            conn.execute(
                sa.insert(table),
                [
                    {
                        "item_id": r.item_id,
                        "field": r.field,
                        "ns": r.ns,
                        "embedding": raw_vector(r.embedding, r.norm),
                    }
                    for r in rows
                ],
            )
    else:
        upgrade_pgvector(conn, t)
    if ann is not None:
        ann_index(t, ann).create(conn, checkfirst=True)
    return True


HALFVEC_SINCE = (0, 7)


def _check_halfvec(conn: Connection) -> None:
    version = conn.execute(
        sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    ).scalar()
    parts = tuple(int(p) for p in re.findall(r"\d+", str(version))[:2])
    if parts < HALFVEC_SINCE:
        raise ValueError(
            f"index: 'ann_index_config' vector_type 'halfvec' needs pgvector 0.7 or later; this "
            f"server has pgvector {version} (ALTER EXTENSION vector UPDATE after upgrading it, "
            "or use vector_type 'vector', or pgvector=False to rank in the application)"
        )


def upgrade_pgvector(conn: Connection, t: Tables) -> bool:
    """Bring the pgvector table (if this PostgreSQL database has one) up to date, as its first
    use by a store would; True if it needed it. For `langmem-sqlite migrate`, so that the
    slow part (HNSW indexes built again) can run at a chosen time.

    Two upgrades: tables made before the `ns` column get it (`_add_pgvector_ns`), and
    the HNSW indexes made when the table held unit vectors ranked by inner product
    (`<table>_hnsw<dims>`) are replaced by the same index for cosine distance, which ranks
    the vectors as given."""
    if not _may_have_pgvector(conn):
        return False
    table = pgvector_table(t)
    if not sa.inspect(conn).has_table(table.name, schema=t.schema):
        return False
    if _has_ns(conn, table) and not _legacy_indexes(conn, t, table):
        return False
    preparer = conn.dialect.identifier_preparer
    conn.execute(sa.text(f"LOCK TABLE {preparer.format_table(table)} IN ACCESS EXCLUSIVE MODE"))
    legacy = _legacy_indexes(conn, t, table)  # again, under the lock
    changed = False
    if not _has_ns(conn, table):
        changed = _add_pgvector_ns(conn, t, table, skip={name for name, *_ in legacy})
    schema = f"{preparer.quote_schema(t.schema)}." if t.schema else ""
    for name, dims, m, ef_construction in legacy:
        logger.warning("upgrading %s: building its HNSW index for cosine distance again", name)
        conn.execute(sa.text(f"DROP INDEX IF EXISTS {schema}{preparer.quote(name)}"))
        ann = ANN("hnsw", dims, m=m, ef_construction=ef_construction)
        ann_index(t, ann).create(conn, checkfirst=True)
        changed = True
    return changed


def _legacy_indexes(
    conn: Connection, t: Tables, table: sa.Table
) -> list[tuple[str, int, int, int]]:
    """`(name, dims, m, ef_construction)` of the table's HNSW indexes made for unit vectors
    and inner products (named `<table>_hnsw<dims>`)."""
    name = conn.dialect.identifier_preparer.format_table(table)
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, c.reloptions FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
            "WHERE i.indrelid = to_regclass(:name) AND a.amname = 'hnsw'"
        ),
        {"name": name},
    ).all()
    out = []
    pattern = re.compile(re.escape(table.name) + r"_hnsw(\d+)$")
    for index, options in rows:
        found = pattern.match(index)
        if found is None:
            continue
        settings = dict(o.split("=", 1) for o in options or [])
        m, ef = int(settings.get("m", 16)), int(settings.get("ef_construction", 64))
        out.append((index, int(found.group(1)), m, ef))
    return out


def _has_ns(conn: Connection, table: sa.Table) -> bool:
    """Whether the pgvector table has its `ns` column (tables made before it have not)."""
    name = conn.dialect.identifier_preparer.format_table(table)
    found = conn.execute(
        sa.text(
            "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(:name) "
            "AND attname = 'ns' AND NOT attisdropped"
        ),
        {"name": name},
    ).scalar()
    return found is not None


def _add_pgvector_ns(
    conn: Connection, t: Tables, table: sa.Table, skip: set[str] | None = None
) -> bool:
    """Upgrade a pgvector table made before it had the `ns` column: add it and fill it from
    the items, in the caller's transaction. The table is locked first (a concurrent upgrade
    waits, then finds it done). Its HNSW indexes are dropped before the rows are rewritten
    and built again afterwards, as they were defined (updating 100,000 rows under the
    index took 93 s; the rewrite takes 0.75 s, a new index 16 to 33 s with 256 MB of
    `maintenance_work_mem`, about 80 s with the default 64 MB)."""
    preparer = conn.dialect.identifier_preparer
    name = preparer.format_table(table)
    conn.execute(sa.text(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE"))
    if _has_ns(conn, table):
        return False  # upgraded meanwhile
    # the HNSW indexes as the server defines them (its own CREATE INDEX text), to build again
    hnsw = conn.execute(
        sa.text(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
            "WHERE i.indrelid = to_regclass(:name) AND a.amname = 'hnsw'"
        ),
        {"name": name},
    ).all()
    # (those to replace are dropped, not built again: see upgrade_pgvector)
    rebuild = [(index, sql) for index, sql in hnsw if index not in (skip or ())]
    schema = f"{preparer.quote_schema(t.schema)}." if t.schema else ""
    logger.warning(
        "upgrading %s: adding its namespace column%s",
        name,
        f" and building its {len(rebuild)} HNSW index(es) again (minutes for large tables)"
        if rebuild
        else "",
    )
    for index, _ in hnsw:
        conn.execute(sa.text(f"DROP INDEX {schema}{preparer.quote(index)}"))
    ns_type = table.c.ns.type.compile(dialect=conn.dialect)
    conn.execute(sa.text(f"ALTER TABLE {name} ADD COLUMN ns {ns_type}"))
    items = t.store_items
    conn.execute(sa.update(table).where(table.c.item_id == items.c.id).values(ns=items.c.ns))
    conn.execute(sa.text(f"ALTER TABLE {name} ALTER COLUMN ns SET NOT NULL"))
    for index in table.indexes:
        if "ns" in index.columns:
            index.create(conn)
    for _, definition in rebuild:
        conn.exec_driver_sql(definition)
    return True


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
    """The approximate index of the pgvector table for `ann`: an HNSW or IVFFlat expression
    index on `embedding::vector(dims)` (or `halfvec(dims)`) with the operator class of its
    distance, as `_pg_ranking` orders by it."""
    key = (t.key, ann)  # every setting: another index of another name, or another m...
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
