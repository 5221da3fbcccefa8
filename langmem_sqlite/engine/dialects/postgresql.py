"""PostgreSQL through psycopg 3, directly or behind a transaction pooler (PgBouncer)."""

from __future__ import annotations

import contextlib
import json
import re
import zlib
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any, ClassVar

from sqlalchemy import (
    Table,
    text,
    type_coerce,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL, Connection
from sqlalchemy.schema import CreateSchema
from sqlalchemy.sql.elements import ColumnElement

from ..retry import Fault
from .base import DEFAULT_CONNECT_TIMEOUT_S, Rules, merge_connect_args

#: SQLSTATE -> kind of transient failure (class 08, connection exceptions, is matched whole)
_STATES = {
    "57P01": Fault.LOST,  # admin_shutdown: terminated by an administrator, or a fast shutdown
    "57P02": Fault.LOST,  # crash_shutdown
    "57P03": Fault.CONNECT,  # cannot_connect_now: starting up, in recovery, shutting down
    "53300": Fault.CONNECT,  # too_many_connections
    "40001": Fault.BUSY,  # serialization_failure
    "40P01": Fault.BUSY,  # deadlock_detected
    "55P03": Fault.BUSY,  # lock_not_available
}

# A JSON string, or a number with a positive exponent (outside strings).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?e\+\d+')


def _plain_number(match: re.Match[str]) -> str:
    token = match.group()
    if token[0] == '"':
        return token
    return format(Decimal(token), "f") + ".0"


def jsonb_dumps(value: Any) -> str:
    """`json.dumps` for PostgreSQL's `JSONB`, which keeps numbers as `numeric`: a float such
    as `3.9e16` would come back as the integer `39000000000000000`. Floats written with a
    positive exponent are spelled out with a decimal point instead (`39000000000000000.0`),
    which `numeric` keeps and JSON decoders read back as the same float."""
    return jsonb_text(json.dumps(value))


def jsonb_text(text: str) -> str:
    """JSON text made safe for `JSONB` as `jsonb_dumps` does (for text already made)."""
    if "e+" not in text:
        return text
    return _JSON_TOKEN.sub(_plain_number, text)


POOLER_PORTS = (6432, 6543)
"""The ports of PgBouncer (6432) and of hosted transaction poolers such as Supabase's (6543)."""


def _threshold(text: str) -> int | None:
    if text.strip().lower() in ("none", "off", "0", ""):
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(
            f"connection: prepare_threshold: expected none or a count >= 0, got {text!r}"
        )
    return value


class PostgreSQLRules(Rules):
    """PostgreSQL through psycopg 3, directly or behind a transaction pooler.

    Behind a transaction pooler a statement prepared on the server outlives the server
    connection it was made on, so none is prepared there (psycopg's `prepare_threshold` off):
    a URL is taken to point at a pooler when its port is one of `POOLER_PORTS` or its host
    names a pooler; `?prepare_threshold=none` (or a count) in the URL, or in `connect_args`,
    decides it explicitly. The package keeps no session state a pooler would lose: settings
    are made with `SET LOCAL`, locks are transaction locks.
    """

    id_order_collation = "C"

    @classmethod
    def column_types(cls) -> dict[str, Any]:
        return {"json": postgresql.JSONB()}

    names: ClassVar[tuple[str, ...]] = ("postgresql",)
    default_drivers: ClassVar[dict[str, str]] = {"postgresql": "postgresql+psycopg"}
    sync_twins: ClassVar[dict[str, str]] = {
        "postgresql+psycopg_async": "postgresql+psycopg",
        "postgresql+psycopg": "postgresql+psycopg",
        "postgresql+asyncpg": "postgresql+psycopg",
    }
    extra: ClassVar[str | None] = "postgres"
    text_holds_nul: ClassVar[bool] = False

    def _insert(self, table: Table) -> Any:
        return postgresql.insert(table)

    @classmethod
    def driver_url(cls, url: URL) -> URL:
        return url.difference_update_query(["prepare_threshold"])

    @classmethod
    def engine_kwargs(cls, url: URL) -> dict[str, Any]:
        # No pre-ping (a round trip on every checkout): a dropped connection fails the
        # transaction's first statement, and the retry loop re-runs the unit on a new one.
        connect = merge_connect_args(url, {"connect_timeout": DEFAULT_CONNECT_TIMEOUT_S})
        given = url.query.get("prepare_threshold")
        if given is not None:
            connect["prepare_threshold"] = _threshold(
                given if isinstance(given, str) else given[-1]
            )
        elif url.port in POOLER_PORTS or "pooler" in (url.host or "").lower():
            connect["prepare_threshold"] = None
        return {
            "pool_size": 10,
            "max_overflow": 22,
            "json_serializer": jsonb_dumps,
            "connect_args": connect,
        }

    def begin(
        self, connection: Connection, write: bool, single: bool, transaction: bool
    ) -> bool | None:
        # A read, or a write of one statement, needs no BEGIN and COMMIT round trips (at READ
        # COMMITTED each statement sees its own snapshot anyway): the driver's autocommit for
        # this unit, the engine's isolation level left as it is.
        autocommit = (single or not write) and not transaction
        dbapi: Any = connection.connection.dbapi_connection
        if dbapi.autocommit == autocommit:
            return None
        dbapi.autocommit = autocommit
        return not autocommit

    def end(self, connection: Connection, restore: bool | None) -> None:
        if restore is not None:
            dbapi: Any = connection.connection.dbapi_connection
            dbapi.autocommit = restore

    @contextlib.contextmanager
    def migration_lock(self, conn: Connection, name: str, schema: str | None) -> Iterator[None]:
        """A transaction-level advisory lock (released by the COMMIT: nothing for a pooler to
        lose), and the schema created if missing."""
        key = zlib.crc32(name.encode()) - 2**31
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        if schema:
            conn.execute(CreateSchema(schema, if_not_exists=True))
        yield

    def fault(self, error: BaseException) -> Fault | None:
        kind = super().fault(error)
        if kind is not None:
            return kind
        orig = getattr(error, "orig", error)
        state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
        if state:
            return Fault.LOST if state.startswith("08") else _STATES.get(state)
        # psycopg reports failures of the connection itself (refused, reset, closed, timed
        # out) as an OperationalError without a SQLSTATE: no server sent one
        if isinstance(orig, self.sa.loaded_dbapi.OperationalError):
            return Fault.CONNECT
        return None

    @classmethod
    def broken(cls, dbapi_connection: Any) -> bool:
        return getattr(dbapi_connection, "closed", False) is True

    # -- history (sessions and messages) ----------------------------------------------------

    # -- checkpoints ----------------------------------------------------------------------------

    @classmethod
    def metadata_contains(
        cls, column: Any, filter: Mapping[str, str | int]
    ) -> list[ColumnElement[bool]]:
        """`column @> :filter`: JSONB containment of the whole filter (the index's operator)."""
        return [type_coerce(column, postgresql.JSONB).contains(dict(filter))]
