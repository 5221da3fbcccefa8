"""The schema: every table of the package in one :class:`~sqlalchemy.MetaData`, and its migrations.

Tables are SQLAlchemy Core objects built once per ``(table_prefix, schema)`` by
:func:`get_tables`. Their column types are portable: long text and blobs hold 100 MB on every
dialect (``LONGTEXT``/``LONGBLOB`` on MySQL/MariaDB, whose ``TEXT``/``BLOB`` stop at 64 KiB), and
ids are compared byte for byte everywhere (MySQL/MariaDB store them as ``VARBINARY`` so that
``"UserA"``, ``"usera"`` and ``"usera "`` are three different ids) and stay indexable.

:data:`MIGRATIONS` is the ordered list of schema changes. A database records the versions it has
in the ``<prefix>migrations`` table; :mod:`langmem_sqlite.migrate` applies the missing ones. Later
features add their tables here and append a migration; never edit a released migration.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeDecorator

__all__ = [
    "DEFAULT_PREFIX",
    "ID_MAX_CHARS",
    "MIGRATIONS",
    "IdString",
    "LongBlob",
    "LongText",
    "Migration",
    "Tables",
    "get_tables",
]

DEFAULT_PREFIX = "langmem_"
"""Table-name prefix used unless a ``table_prefix`` is given."""

ID_MAX_CHARS = 255
"""Longest user, session or thread id, in characters."""

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")

_MYSQL = ("mysql", "mariadb")

LongText = Text().with_variant(mysql.LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin"), *_MYSQL)
"""Text up to 4 GiB on every dialect (``LONGTEXT`` on MySQL/MariaDB), UTF-8."""

LongBlob = LargeBinary().with_variant(mysql.LONGBLOB(), *_MYSQL)
"""Bytes up to 4 GiB on every dialect (``LONGBLOB`` on MySQL/MariaDB, ``BYTEA`` on PostgreSQL)."""

JsonValue = JSON().with_variant(postgresql.JSONB(), "postgresql")
"""A JSON document (``JSONB`` on PostgreSQL)."""

BigInt = BigInteger().with_variant(Integer(), "sqlite")
"""64-bit integer; plain ``INTEGER`` on SQLite so that primary keys become rowid aliases."""


class IdString(TypeDecorator[str]):
    """An id of at most :data:`ID_MAX_CHARS` characters, compared byte for byte.

    ``VARCHAR(255)`` on SQLite and PostgreSQL (both compare exactly). On MySQL/MariaDB the
    ``VARBINARY(1020)`` storage of the UTF-8 bytes makes comparisons case- and
    trailing-space-sensitive, which no ``utf8mb4`` collation of MariaDB guarantees.
    """

    impl = String(ID_MAX_CHARS)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        if dialect.name in _MYSQL:
            return dialect.type_descriptor(mysql.VARBINARY(ID_MAX_CHARS * 4))
        return dialect.type_descriptor(String(ID_MAX_CHARS))

    def process_bind_param(self, value: str | None, dialect: Dialect) -> Any:
        if value is not None and dialect.name in _MYSQL:
            return value.encode("utf-8")
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value).decode("utf-8")
        return value


@dataclass(frozen=True)
class Tables:
    """Every table of one ``(table_prefix, schema)``, sharing one :class:`MetaData`."""

    prefix: str
    schema: str | None
    metadata: MetaData
    migrations: Table
    sessions: Table
    messages: Table

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


def _build(prefix: str, schema: str | None) -> Tables:
    md = MetaData(schema=schema)
    opts = {"mysql_charset": "utf8mb4", "mysql_engine": "InnoDB"}

    migrations = Table(
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

    messages = Table(
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
        # LangChain's message id, when it has one (deduplication, lookup).
        Column("message_id", IdString, nullable=True),
        # Plain text of the message for search and inspection (never the source of truth).
        Column("content_text", LongText, nullable=False),
        # The full message: JSON text in LangChain's {"type", "data"} shape.
        Column("body", LongText, nullable=False),
        Column("token_count", BigInteger, nullable=False),
        # Sum of token_count over the earlier messages of the session: budget windows by index.
        Column("tokens_before", BigInteger, nullable=False),
        Column("created_at", BigInteger, nullable=False),
        UniqueConstraint("session_pk", "seq", name=f"{prefix}messages_session_seq_uq"),
        Index(f"{prefix}messages_session_tokens_ix", "session_pk", "tokens_before"),
        Index(f"{prefix}messages_session_msgid_ix", "session_pk", "message_id"),
        **opts,
    )

    return Tables(prefix, schema, md, migrations, sessions, messages)


_cache: dict[tuple[str, str | None], Tables] = {}
_cache_lock = threading.Lock()


def get_tables(table_prefix: str = DEFAULT_PREFIX, schema: str | None = None) -> Tables:
    """Return the (cached) tables for a table prefix and an optional schema name.

    Raises:
        ValueError: ``table_prefix`` or ``schema`` is not a plain SQL identifier.
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


@dataclass(frozen=True)
class Migration:
    """One schema change: ``apply(connection, tables)`` runs inside the migration lock."""

    version: int
    description: str
    apply: Callable[[Connection, Tables], None]


def _create(*names: str) -> Callable[[Connection, Tables], None]:
    """A migration step creating the named tables (and their indexes) if they are missing."""

    def apply(conn: Connection, t: Tables) -> None:
        wanted = [getattr(t, n) for n in names]
        t.metadata.create_all(conn, tables=wanted, checkfirst=True)

    return apply


MIGRATIONS: list[Migration] = [
    Migration(1, "conversation store: sessions and messages", _create("sessions", "messages")),
]
"""Ordered schema changes; ``MIGRATIONS[i].version == i + 1``."""
