"""The store's writes: puts and deletes (with the vectors of indexed items), TTL refreshes
and the sweep of lapsed items."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..engine.schema import Tables
from ..engine.unit import Unit
from .pgvector_schema import pgvector_table, raw_vector
from .rows import CHUNK
from .sealed import Sealer

__all__ = ["PutRow", "apply_puts", "refresh_ttl", "sweep_expired"]

_PAIR = ("ns", "key")
_CHANGING = ("value", "updated_at", "ttl_us", "expires_at")
_ROW = ("ns", "key", "value", "created_at", "updated_at", "ttl_us", "expires_at")


@dataclass(frozen=True)
class PutRow:
    """One write: `value=None` deletes. `vectors` are `(field, unit vector as float32
    bytes, its length before scaling)`."""

    ns: str
    key: str
    value: dict[str, Any] | None
    ttl_us: int | None
    vectors: tuple[tuple[str, bytes, float | None], ...] = ()
    text: str | None = None
    """The value's JSON text, when the caller has it (stored as is outside PostgreSQL)."""


def refresh_ttl(unit: Unit, t: Tables, ids: Sequence[int], now: int) -> None:
    """Restart the TTL of the items `ids` (those that have one) from `now`."""
    c = t.store_items.c
    stmt = unit.statement(
        ("refresh", t.key),
        lambda: (
            sa.update(t.store_items)
            .where(c.id.in_(sa.bindparam("ids", expanding=True)), c.ttl_us.is_not(None))
            .values(expires_at=c.ttl_us + sa.bindparam("now", type_=sa.BigInteger))
        ),
    )
    for i in range(0, len(ids), CHUNK):
        unit.execute(stmt, {"ids": list(ids[i : i + CHUNK]), "now": now})


def _upsert(unit: Unit, t: Tables, rows: list[dict[str, Any]]) -> None:
    """Insert or replace items by `(ns, key)`: the dialect's upsert, the value bound as the
    validation's JSON text (not serialized again; PostgreSQL casts it to `jsonb`)."""
    rules = unit.rules
    if len(rows) > 1:
        many = unit.statement(
            ("upsert many", t.key),
            lambda: rules.upsert_arrays(t.store_items, _ROW, _CHANGING, _PAIR),
        )
        if many is not None:
            unit.execute(many, {c: [r[c] for r in rows] for c in _ROW})
            return

    def build() -> Any:
        value = rules.json_from_text(sa.bindparam("value", type_=sa.Text))
        # inline: no implicit RETURNING of the new id, which nothing reads
        return rules.upsert(t.store_items, _CHANGING, _PAIR).inline().values(value=value)

    unit.execute(unit.statement(("upsert", t.key), build), rows)


def _ids(unit: Unit, t: Tables, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    c = t.store_items.c
    out: dict[tuple[str, str], int] = {}
    rules = unit.rules
    stmt = unit.statement(
        ("ids", t.key),
        lambda: sa.select(c.id, c.ns, c.key).where(rules.at_pairs(t.store_items, _PAIR)),
    )
    for i in range(0, len(pairs), CHUNK):
        found: Sequence[Any] = unit.execute(stmt, rules.pairs_params(pairs[i : i + CHUNK])).all()
        for item_id, ns, key in found:
            out[(ns, key)] = item_id
    return out


def apply_puts(
    unit: Unit,
    t: Tables,
    rows: Sequence[PutRow],
    now: int,
    index: bool,
    pgvector: bool,
    sealer: Sealer | None = None,
) -> None:
    """Apply writes (the last per `(ns, key)` should be given once); with `index`, replace
    the vectors of every written item."""
    rules = unit.rules
    deletes = [(r.ns, r.key) for r in rows if r.value is None]
    if deletes:
        stmt = unit.statement(
            ("delete", t.key),
            lambda: sa.delete(t.store_items).where(rules.at_pairs(t.store_items, _PAIR)),
        )
        for i in range(0, len(deletes), CHUNK):
            unit.execute(stmt, rules.pairs_params(deletes[i : i + CHUNK]))
    puts = [r for r in rows if r.value is not None]
    if not puts:
        return
    _upsert(
        unit,
        t,
        [
            {
                "ns": r.ns,
                "key": r.key,
                "value": rules.json_text(_json_text(r)),
                "created_at": now,
                "updated_at": now,
                "ttl_us": r.ttl_us,
                "expires_at": None if r.ttl_us is None else now + r.ttl_us,
            }
            for r in puts
        ],
    )
    if index:
        _replace_vectors(unit, t, puts, pgvector, sealer)


def _json_text(row: PutRow) -> str:
    return row.text if row.text is not None else json.dumps(row.value, ensure_ascii=False)


def _replace_vectors(
    unit: Unit,
    t: Tables,
    puts: list[PutRow],
    pgvector: bool,
    sealer: Sealer | None = None,
) -> None:
    ids = _ids(unit, t, [(r.ns, r.key) for r in puts])
    targets = [t.store_vectors, *([pgvector_table(t)] if pgvector else [])]
    id_list = list(ids.values())
    for table in targets:
        stmt = unit.statement(
            ("unvector", t.key, table.name),
            lambda table=table: sa.delete(table).where(  # type: ignore[misc]
                table.c.item_id.in_(sa.bindparam("ids", expanding=True))
            ),
        )
        for i in range(0, len(id_list), CHUNK):
            unit.execute(stmt, {"ids": id_list[i : i + CHUNK]})
    vectors: list[dict[str, Any]] = [
        {"item_id": ids[(r.ns, r.key)], "field": f, "ns": r.ns, "embedding": blob, "norm": norm}
        for r in puts
        for f, blob, norm in r.vectors
    ]
    if not vectors:
        return
    if pgvector:  # pgvector's copy holds the vectors as given (unit vector times length)
        copies = [
            {
                "item_id": v["item_id"],
                "field": v["field"],
                "ns": v["ns"],
                "embedding": raw_vector(v["embedding"], v["norm"]),
            }
            for v in vectors
        ]
    if sealer is not None:
        for v in vectors:
            v["embedding"] = sealer.seal_vector(v["ns"], v["item_id"], v["field"], v["embedding"])
    unit.execute(unit.statement(("vectors", t.key), lambda: sa.insert(t.store_vectors)), vectors)
    if pgvector:
        insert = unit.statement(("pgvectors", t.key), lambda: sa.insert(pgvector_table(t)))
        unit.execute(insert, copies)


def sweep_expired(conn: Connection, t: Tables, now: int) -> int:
    """Delete items whose TTL lapsed (their vectors go with them); return how many."""
    result = conn.execute(
        sa.delete(t.store_items).where(
            t.store_items.c.expires_at.is_not(None), t.store_items.c.expires_at <= now
        )
    )
    return int(result.rowcount or 0)
