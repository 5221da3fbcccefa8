"""The schema: every table of the package in one `MetaData`.

Tables are SQLAlchemy Core objects built once per `(table_prefix, schema)` by
[`get_tables`][langmem_sqlite.engine.schema.get_tables]. Long text and blobs hold 4 GiB on every
dialect (MySQL's `TEXT`/`BLOB` stop at 64 KiB), and ids compare byte for byte everywhere
(MySQL/MariaDB store them as `VARBINARY`: `"UserA"`, `"usera"` and `"usera "` are three ids).
A new table or column is declared here, with a migration appended to
[`langmem_sqlite.engine.migrations`][langmem_sqlite.engine.migrations].
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.mysql import VARBINARY
from sqlalchemy.engine import Dialect as SADialect
from sqlalchemy.types import TypeDecorator

from ..defaults import DEFAULT_PREFIX
from .dialects import BUILTIN, rules_named

__all__ = [
    "DEFAULT_PREFIX",
    "ID_MAX_CHARS",
    "IdString",
    "LongBlob",
    "LongText",
    "Tables",
    "get_tables",
]

ID_MAX_CHARS = 255
"""Longest user, session or thread id, in characters."""

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")


def _typed(generic: Any, kind: str) -> Any:
    """`generic`, with each rules class's own type for `kind` as its variant."""
    for cls in BUILTIN:
        own = cls.column_types().get(kind)
        if own is not None:
            generic = generic.with_variant(own, *cls.names)
    return generic


LongText = _typed(Text(), "long_text")
"""Text up to 4 GiB on every dialect (`LONGTEXT` on MySQL/MariaDB), UTF-8."""

LongBlob = _typed(LargeBinary(), "long_blob")
"""Bytes up to 4 GiB on every dialect (`LONGBLOB` on MySQL/MariaDB, `BYTEA` on PostgreSQL)."""

JsonValue = _typed(JSON(), "json")
"""A JSON document (`JSONB` on PostgreSQL)."""

BigInt = _typed(BigInteger(), "big_int")
"""64-bit integer; plain `INTEGER` on SQLite so that primary keys become rowid aliases."""


class _Utf8Bytes(TypeDecorator[str]):
    """Text stored as its UTF-8 bytes (`VARBINARY`), where the dialect says so (`text_as_bytes`):
    compared byte for byte."""

    impl: Any = VARBINARY
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: SADialect) -> Any:
        return None if value is None else value.encode("utf-8")

    def process_result_value(self, value: Any, dialect: SADialect) -> str | None:
        return None if value is None else bytes(value).decode("utf-8")


class _OrderedText(TypeDecorator[str]):
    """Text compared and sorted in code point order on every database: stored as UTF-8 bytes
    where the dialect says so (`text_as_bytes`), else as text (under `id_order_collation`
    where the dialect names one)."""

    impl: Any = Text
    cache_ok = True
    max_bytes = 0
    """`VARBINARY` length where stored as bytes."""
    code_point_order = False
    """Whether `ORDER BY` and ranges on the column must follow code point order (else only
    equality must be exact)."""

    def load_dialect_impl(self, dialect: SADialect) -> Any:
        rules = rules_named(dialect.name)
        if rules.text_as_bytes:
            return dialect.type_descriptor(_Utf8Bytes(self.max_bytes))
        plain = self.impl_instance.copy()
        if self.code_point_order and rules.id_order_collation is not None:
            plain.collation = rules.id_order_collation
        return dialect.type_descriptor(plain)


class IdString(_OrderedText):
    """An id of at most [`ID_MAX_CHARS`][langmem_sqlite.engine.schema.ID_MAX_CHARS] characters,
    compared byte for byte.

    `VARCHAR(255)` on SQLite and PostgreSQL (both compare exactly). On MySQL/MariaDB
    the `VARBINARY(1020)` storage of the UTF-8 bytes makes comparisons case- and
    trailing-space-sensitive, which no `utf8mb4` collation of MariaDB guarantees.
    """

    impl = String(ID_MAX_CHARS)
    cache_ok = True
    max_bytes = ID_MAX_CHARS * 4


NAMESPACE_MAX_BYTES = 1024
"""Longest encoded namespace of the long-term store, in UTF-8 bytes."""


class NamespacePath(_OrderedText):
    """An encoded store namespace, compared and ordered byte for byte (code point order).

    `TEXT` on SQLite, `TEXT COLLATE "C"` on PostgreSQL, `VARBINARY` on MySQL/MariaDB, so
    that `ORDER BY` and range scans follow the order of the encoded text on every database.
    """

    impl = Text
    cache_ok = True
    max_bytes = NAMESPACE_MAX_BYTES
    code_point_order = True


@dataclass(frozen=True)
class Tables:
    """Every table of one `(table_prefix, schema)`, sharing one `MetaData`."""

    prefix: str
    schema: str | None
    metadata: MetaData
    migrations: Table
    sessions: Table
    messages: Table
    checkpoints: Table
    checkpoint_blobs: Table
    checkpoint_writes: Table
    checkpoint_threads: Table
    store_items: Table
    store_vectors: Table

    @property
    def key(self) -> tuple[str, str | None]:
        """Identifies this set of tables within a database."""
        return (self.prefix, self.schema)


def _validate_identifier(value: str, name: str) -> str:
    if not isinstance(value, str) or not _IDENT.match(value):
        raise ValueError(
            f"{name}: must be letters, digits and underscores, start with a letter or "
            f"underscore, at most 40 characters; got {value!r}"
        )
    return value


def _namespace_listing_index(ddl: Any, target: Any, bind: Any, **kw: Any) -> bool:
    """Whether the dialect keeps the store's `(ns, updated_at, id)` index."""
    return rules_named(kw["dialect"].name).namespace_listing_index


def _build(prefix: str, schema: str | None) -> Tables:
    md = MetaData(schema=schema)
    opts: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_engine": "InnoDB"}

    Table(
        f"{prefix}migrations",
        md,
        Column("version", Integer, primary_key=True, autoincrement=False),
        Column("description", String(200), nullable=False),
        Column("applied_at", BigInteger, nullable=False),
        **opts,
    )

    sessions = Table(
        f"{prefix}sessions",
        md,
        Column("id", BigInt, primary_key=True, autoincrement=True),
        # "" stands for "no user": a NULL would defeat the unique constraint below.
        Column("user_id", IdString, nullable=False),
        Column("session_id", IdString, nullable=False),
        Column("title", LongText, nullable=True),
        Column("created_at", BigInteger, nullable=False),
        Column("updated_at", BigInteger, nullable=False),
        Column("metadata", JsonValue, nullable=True),
        Column("message_count", BigInteger, nullable=False, default=0),
        Column("token_total", BigInteger, nullable=False, default=0),
        # The running summary record (plain JSON text) kept by the context-window policy.
        Column("summary", LongText, nullable=True),
        UniqueConstraint("user_id", "session_id", name=f"{prefix}sessions_user_session_uq"),
        Index(f"{prefix}sessions_user_updated_ix", "user_id", "updated_at"),
        Index(f"{prefix}sessions_updated_ix", "updated_at"),
        **opts,
    )

    Table(
        f"{prefix}messages",
        md,
        Column("id", BigInt, primary_key=True, autoincrement=True),
        Column(
            "session_pk",
            BigInt,
            ForeignKey(sessions.c.id, ondelete="CASCADE"),
            nullable=False,
        ),
        # Position within the session, 0-based, assigned in the add transaction.
        Column("seq", BigInteger, nullable=False),
        Column("type", String(32), nullable=False),
        # LangChain's message id, when it has one and no earlier message of the session has it
        # (deduplication, lookup); the body keeps the id in every case.
        Column("message_id", IdString, nullable=True),
        # Plain text of the message for search and inspection (never the source of truth).
        Column("content_text", LongText, nullable=False),
        # The full message: JSON text in LangChain's {"type", "data"} shape.
        Column("body", LongText, nullable=False),
        Column("token_count", BigInteger, nullable=False),
        # Sum of token_count over the earlier messages of the session: budget windows by index.
        Column("tokens_before", BigInteger, nullable=False),
        Column("created_at", BigInteger, nullable=False),
        # Random token of the append that wrote this row (its first row only): an append retried
        # after a lost COMMIT finds it and does not write twice.
        Column("write_token", String(32), nullable=True),
        UniqueConstraint("session_pk", "seq", name=f"{prefix}messages_session_seq_uq"),
        Index(f"{prefix}messages_session_tokens_ix", "session_pk", "tokens_before"),
        # A message id names at most one row of a session: the check of skip_existing and the
        # insert cannot race. NULLs (no id, or a repeated one) are not compared.
        Index(f"{prefix}messages_session_msgid_uq", "session_pk", "message_id", unique=True),
        **opts,
    )

    # LangGraph checkpointer (see langmem_sqlite.checkpoint). ``ns_hash`` is the MD5 hex of
    # ``checkpoint_ns``: namespaces are unbounded text, and MySQL keys stop at 3072 bytes.
    Table(
        f"{prefix}checkpoints",
        md,
        Column("thread_id", IdString, primary_key=True),
        Column("ns_hash", String(32), primary_key=True),
        Column("checkpoint_id", IdString, primary_key=True),
        Column("checkpoint_ns", LongText, nullable=False),
        Column("parent_checkpoint_id", IdString, nullable=True),
        # The checkpoint without its id, versions and channel values (every channel value has
        # its row in checkpoint_blobs), through the saver's serde.
        Column("type", String(64), nullable=False),
        Column("checkpoint", LongBlob, nullable=False),
        # channel -> version, JSON text (versions are opaque counters, never user data).
        Column("versions", LongText, nullable=False),
        Column("metadata_type", String(64), nullable=False),
        Column("metadata", LongBlob, nullable=False),
        # JSON copy of the metadata's scalar keys, for filtering only.
        Column("metadata_json", JsonValue, nullable=True),
        Column("run_id", IdString, nullable=True),
        Column("created_at", BigInteger, nullable=False),
        Index(f"{prefix}checkpoints_run_ix", "run_id"),
        **opts,
    )

    # One row per (channel, version): a value, or a list stored as a delta from an earlier
    # version of the same channel (``base_version`` prefix + appended items). Reads follow
    # ``base_version`` by primary key; ``root_version`` names the chain's full copy.
    Table(
        f"{prefix}checkpoint_blobs",
        md,
        Column("thread_id", IdString, primary_key=True),
        Column("ns_hash", String(32), primary_key=True),
        Column("channel_hash", String(32), primary_key=True),
        Column("version", IdString, primary_key=True),
        Column("kind", String(1), nullable=False),
        Column("type", String(64), nullable=True),
        Column("value", LongBlob, nullable=True),
        Column("base_version", IdString, nullable=True),
        Column("base_len", BigInteger, nullable=True),
        Column("root_version", IdString, nullable=True),
        Column("depth", Integer, nullable=False, default=0),
        **opts,
    )

    # Pending writes; no foreign key: a write may land before its checkpoint.
    Table(
        f"{prefix}checkpoint_writes",
        md,
        Column("thread_id", IdString, primary_key=True),
        Column("ns_hash", String(32), primary_key=True),
        Column("checkpoint_id", IdString, primary_key=True),
        Column("task_hash", String(32), primary_key=True),
        Column("idx", BigInteger, primary_key=True, autoincrement=False),
        Column("task_id", IdString, nullable=False),
        Column("task_path", LongText, nullable=False),
        Column("channel", LongText, nullable=False),
        Column("type", String(64), nullable=False),
        Column("value", LongBlob, nullable=False),
        **opts,
    )

    Table(
        f"{prefix}checkpoint_threads",
        md,
        Column("thread_id", IdString, primary_key=True),
        Column("created_at", BigInteger, nullable=False),
        Column("updated_at", BigInteger, nullable=False),
        # JSON copy of the scalar metadata of the thread's latest checkpoint.
        Column("metadata", JsonValue, nullable=True),
        Index(f"{prefix}checkpoint_threads_updated_ix", "updated_at"),
        **opts,
    )

    # Long-term store (LangGraph BaseStore): one row per (namespace, key); times in microseconds.
    store_items = Table(
        f"{prefix}store_items",
        md,
        Column("id", BigInt, primary_key=True, autoincrement=True),
        Column("ns", NamespacePath, nullable=False),
        Column("key", IdString, nullable=False),
        Column("value", JsonValue, nullable=False),
        Column("created_at", BigInteger, nullable=False),
        Column("updated_at", BigInteger, nullable=False),
        # TTL: the item's time to live (refreshed on read) and when it lapses; NULL = never.
        Column("ttl_us", BigInteger, nullable=True),
        Column("expires_at", BigInteger, nullable=True),
        UniqueConstraint("ns", "key", name=f"{prefix}store_items_ns_key_uq"),
        Index(f"{prefix}store_items_updated_ix", "updated_at", "id"),
        # for the sweeper; only items with a TTL (on PostgreSQL: a search's "no TTL" test
        # cannot read the whole index, see store.items)
        Index(
            f"{prefix}store_items_expires_ix",
            "expires_at",
            postgresql_where=text("expires_at IS NOT NULL"),
        ),
        # SQLite: one namespace's items, most recent first, so that a search stops after the
        # first matches. PostgreSQL's planner does not pick it for a filtered search (it
        # cannot estimate JSON conditions), so servers do without it.
        Index(f"{prefix}store_items_ns_upd_ix", "ns", "updated_at", "id").ddl_if(
            callable_=_namespace_listing_index
        ),
        **opts,
    )

    # Embeddings of indexed fields (unit length, float32 little-endian); deleted with their item.
    # Clustered by namespace (SQLite WITHOUT ROWID, InnoDB primary key): vector search under a
    # prefix reads one contiguous range of this table only.
    Table(
        f"{prefix}store_vectors",
        md,
        Column("ns", NamespacePath, primary_key=True),
        Column(
            "item_id",
            BigInt,
            ForeignKey(store_items.c.id, ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        Column("field", IdString, primary_key=True),
        Column("embedding", LongBlob, nullable=False),
        # the vector's length before it was scaled to unit length (NULL is taken as 1):
        # inner-product and L2 scores need it
        Column("norm", Double, nullable=True),
        Index(f"{prefix}store_vectors_item_ix", "item_id"),
        sqlite_with_rowid=False,
        **opts,
    )

    by_name = {table.name.removeprefix(prefix): table for table in md.tables.values()}
    return Tables(prefix, schema, md, **by_name)


_cache: dict[tuple[str, str | None], Tables] = {}
_cache_lock = threading.Lock()


def get_tables(table_prefix: str = DEFAULT_PREFIX, schema: str | None = None) -> Tables:
    """Return the (cached) tables for a table prefix and an optional schema name.

    Raises:
        ValueError: `table_prefix` or `schema` is not a plain SQL identifier.
    """
    _validate_identifier(table_prefix, "table_prefix")
    if schema is not None:
        _validate_identifier(schema, "schema")
    key = (table_prefix, schema)
    with _cache_lock:
        tables = _cache.get(key)
        if tables is None:
            tables = _cache[key] = _build(table_prefix, schema)
        return tables
