"""What differs between databases for the store: JSON values, "not lapsed", pgvector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ..engine.dialects.postgresql import jsonb_text

__all__ = ["StoreSQL", "store_sql"]


@dataclass(frozen=True)
class StoreSQL:
    """The store's rules for one kind of database.

    Attributes:
        json: how filters read JSON: `"jsonb"` (PostgreSQL), `"json1"` (SQLite) or
            `"json_value"` (MySQL's `JSON_VALUE`: a superset, re-checked in Python).
        expiry_as_or: "not lapsed" as `IS NULL OR >` rather than `COALESCE` (see
            `items.not_lapsed`).
        pgvector: the database may have the pgvector extension.
    """

    json: str
    expiry_as_or: bool = False
    pgvector: bool = False

    def value(self, bind: Any) -> Any:
        """A bound JSON text as the value column's value (PostgreSQL casts it to `jsonb`)."""
        return sa.cast(bind, postgresql.JSONB) if self.json == "jsonb" else bind

    def text(self, text: str) -> str:
        """JSON text as the value column stores it without changing a number."""
        return jsonb_text(text) if self.json == "jsonb" else text

    def number(self, value: int | float) -> int | float:
        """A filter's number, bound for comparison with a JSON number read in SQL."""
        if self.json == "jsonb":
            return value  # bound as jsonb
        if self.json == "json1" and type(value) is int and -(2**63) <= value < 2**63:
            return value  # SQLite reads integers beyond 64 bits as floats
        return float(value)


_POSTGRESQL = StoreSQL("jsonb", expiry_as_or=True, pgvector=True)
_SQLITE = StoreSQL("json1")
_MYSQL = StoreSQL("json_value")


def store_sql(name: str) -> StoreSQL:
    """The rules for SQLAlchemy's dialect `name` (`"postgresql"`, `"sqlite"`, else MySQL's)."""
    return {"postgresql": _POSTGRESQL, "sqlite": _SQLITE}.get(name, _MYSQL)
