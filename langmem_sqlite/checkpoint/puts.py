"""The SQL of writes: a checkpoint with its new values and its thread (one transaction), and
pending writes. A byte value larger than one statement may carry (`checkpoint_value_part`,
MariaDB/MySQL) is written in parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, bindparam, exists, func, literal, select, update

from ..engine.schema import Tables
from ..engine.unit import Unit
from .storage import DELTA, BlobRow

_BYTE_COLS = ("value", "checkpoint", "metadata")


def _upsert(unit: Unit, table: Table, update: Sequence[str] | None = None) -> Any:
    """The dialect's upsert of `table` setting `update` (default: every column but the key
    and `created_at`), built once."""
    if update is None:
        update = [c.name for c in table.columns if not c.primary_key and c.name != "created_at"]
    key = ("ckpt.upsert", table.fullname, tuple(update))
    return unit.statement(key, lambda: unit.rules.upsert(table, update))


def _insert(unit: Unit, table: Table, new: bool = False) -> Any:
    """The dialect's insert that keeps an existing row (`new`: one that `_insert_new` runs)."""
    build = unit.rules.checkpoint_insert_new if new else unit.rules.insert_ignore
    return unit.statement(("ckpt.insert", table.fullname, new), lambda: build(table))


def _insert_new(unit: Unit, stmt: Any, params: dict[str, Any]) -> bool:
    """Run an insert of one row that must not replace an existing one; True if it inserted it."""
    try:
        return unit.execute(stmt, params).rowcount == 1
    except Exception as e:
        if unit.rules.checkpoint_duplicate(e):
            return False
        raise


def _delta_insert(unit: Unit, t: Tables) -> Any:
    """`INSERT <row> SELECT ... WHERE EXISTS (<its base row>)`: a delta stored on its base."""
    tb = t.checkpoint_blobs
    names = [col.name for col in tb.columns]
    cols = {n: bindparam(n, type_=tb.c[n].type) for n in names}
    base = exists().where(
        tb.c.thread_id == cols["thread_id"],
        tb.c.ns_hash == cols["ns_hash"],
        tb.c.channel_hash == cols["channel_hash"],
        tb.c.version == cols["base_version"],
    )
    ins = unit.rules.checkpoint_insert_new(tb)
    return ins.from_select(names, select(*cols.values()).where(base))


def _big(unit: Unit, row: dict[str, Any]) -> dict[str, bytes]:
    part = unit.rules.checkpoint_value_part
    if part is None:
        return {}
    return {c: v for c in _BYTE_COLS if isinstance(v := row.get(c), bytes) and len(v) > part}


def _insert_in_parts(unit: Unit, table: Table, stmt: Any | None, row: dict[str, Any]) -> bool:
    """Insert `row` with the first part of its large values, then append the other parts with
    `CONCAT` (in this transaction). `stmt`: an upsert, or None for an insert that keeps an
    existing row (then False, and nothing appended, if there was one)."""
    big = _big(unit, row)
    part = unit.rules.checkpoint_value_part or 0
    first = {**row, **{c: v[:part] for c, v in big.items()}}
    if stmt is not None:
        unit.execute(stmt, first)
    elif not _insert_new(unit, _insert(unit, table, True), first):
        return False
    pk = [col == row[col.name] for col in table.primary_key.columns]
    for c, v in big.items():
        for i in range(part, len(v), part):
            chunk = literal(v[i : i + part], table.c[c].type)
            unit.execute(update(table).where(*pk).values({c: func.concat(table.c[c], chunk)}))
    return True


def _write(
    unit: Unit, table: Table, stmt: Any, rows: Sequence[dict[str, Any]], upsert: bool
) -> None:
    """Execute `stmt` (`upsert` or an insert keeping existing rows), large values in parts."""
    small = [r for r in rows if not _big(unit, r)]
    if small:
        unit.execute(stmt, small[0] if len(small) == 1 else small)
    for r in rows:
        if _big(unit, r):
            _insert_in_parts(unit, table, stmt if upsert else None, r)


def put_checkpoint(
    unit: Unit,
    t: Tables,
    row: dict[str, Any],
    blobs: Sequence[BlobRow],
    thread_metadata: dict[str, Any] | None,
) -> dict[str, BlobRow]:
    """Store a checkpoint `row`, the blobs of its new channel versions, and touch its thread.

    Returns, per list channel, the row actually inserted (a delta whose base vanished is
    stored whole instead); a list channel missing from the result was already stored.
    """
    _write(unit, t.checkpoints, _upsert(unit, t.checkpoints), [row], True)
    scope = (row["thread_id"], row["ns_hash"])
    plain = [b.as_params(*scope) for b in blobs if b.root_version is None]
    if plain:
        _write(unit, t.checkpoint_blobs, _insert(unit, t.checkpoint_blobs), plain, False)
    stored: dict[str, BlobRow] = {}
    for b in blobs:
        if b.root_version is None:
            continue
        if b.kind == DELTA:
            delta = unit.statement((t.key, "ckpt.delta"), lambda: _delta_insert(unit, t))
            if _insert_new(unit, delta, b.as_params(*scope)):
                stored[b.channel] = b
                continue
            assert b.full is not None
            b = b.full()  # its base is gone: stored whole
        if _insert_in_parts(unit, t.checkpoint_blobs, None, b.as_params(*scope)):
            stored[b.channel] = b
    # the thread's row: created, or its `updated_at` (and `metadata`) set
    touched = ("updated_at", "metadata") if thread_metadata is not None else ("updated_at",)
    params = {
        "thread_id": row["thread_id"],
        "created_at": row["created_at"],
        "updated_at": row["created_at"],
        "metadata": thread_metadata,
    }
    unit.execute(_upsert(unit, t.checkpoint_threads, touched), params)
    return stored


def put_writes(unit: Unit, t: Tables, rows: Sequence[dict[str, Any]], upsert: bool) -> None:
    """Store pending writes: insert-if-absent, or upsert (special channels: `__error__`,
    `__interrupt__`...)."""
    table = t.checkpoint_writes
    stmt = _upsert(unit, table) if upsert else _insert(unit, table)
    _write(unit, table, stmt, rows, upsert)
