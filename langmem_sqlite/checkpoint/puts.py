"""The SQL of writes: a checkpoint with its new values and its thread (one transaction), and
pending writes. A byte value larger than one statement may carry (`checkpoint_value_part`,
MariaDB/MySQL) is written in parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, bindparam, exists, func, literal, select, update

from ..engine.schema import Tables
from ..engine.unit import Unit
from .rows import BLOB_COLS, CheckpointRow
from .storage import DELTA, BlobRow

__all__ = ["put_checkpoint", "put_writes"]

_BYTE_COLS = ("value", "checkpoint", "metadata")

CHECKPOINT_UPDATE = (
    "checkpoint_ns",
    "parent_checkpoint_id",
    "type",
    "checkpoint",
    "versions",
    "metadata_type",
    "metadata",
    "metadata_json",
    "run_id",
)
"""The columns a put of an existing checkpoint id replaces."""

WRITE_UPDATE = ("task_id", "task_path", "channel", "type", "value")
"""The columns a write to a special channel (`__error__`, `__interrupt__`...) replaces."""


# -- statements -----------------------------------------------------------------------------


def _upsert(unit: Unit, table: Table, update: Sequence[str]) -> Any:
    """The dialect's upsert of `table` setting `update` (built once)."""
    key = ("ckpt.upsert", table.fullname, tuple(update))
    return unit.statement(key, lambda: unit.rules.upsert(table, update))


def _insert_ignore(unit: Unit, table: Table) -> Any:
    return unit.statement(("ckpt.ignore", table.fullname), lambda: unit.rules.insert_ignore(table))


def _insert_new_stmt(unit: Unit, table: Table) -> Any:
    return unit.statement(
        ("ckpt.new", table.fullname), lambda: unit.rules.checkpoint_insert_new(table)
    )


def _insert_new(unit: Unit, stmt: Any, params: dict[str, Any]) -> int:
    """Run an insert of one row that must not replace an existing one; 1 if it inserted it."""
    try:
        return int(unit.execute(stmt, params).rowcount)
    except Exception as e:
        if unit.rules.checkpoint_duplicate(e):
            return 0
        raise


def _delta_insert(unit: Unit, t: Tables) -> Any:
    """`INSERT <row> SELECT ... WHERE EXISTS (<its base row>)`: a delta stored only on its
    base."""
    tb = t.checkpoint_blobs
    cols = {c: bindparam(c, type_=tb.c[c].type) for c in BLOB_COLS}
    base = exists().where(
        tb.c.thread_id == cols["thread_id"],
        tb.c.ns_hash == cols["ns_hash"],
        tb.c.channel_hash == cols["channel_hash"],
        tb.c.version == cols["base_version"],
    )
    ins = unit.rules.checkpoint_insert_new(tb)
    return ins.from_select(list(BLOB_COLS), select(*cols.values()).where(base))


# -- values in parts --------------------------------------------------------------------------


def _write(
    unit: Unit, table: Table, stmt: Any, rows: Sequence[dict[str, Any]], upsert: bool
) -> None:
    """Execute an insert for `rows`.

    A byte value over the dialect's `checkpoint_value_part` is sent in parts: the row is
    inserted with the first part (unless it exists, for an insert that skips existing rows),
    then `CONCAT` appends the others (in this transaction).
    """
    part = unit.rules.checkpoint_value_part
    if part is None:
        unit.execute(stmt, rows[0] if len(rows) == 1 else list(rows))
        return

    def is_big(r: dict[str, Any]) -> bool:
        return any(isinstance(r.get(c), bytes) and len(r[c]) > part for c in _BYTE_COLS)

    small = [r for r in rows if not is_big(r)]
    if small:
        unit.execute(stmt, small[0] if len(small) == 1 else small)
    for r in rows:
        if not is_big(r):
            continue
        big = {c: r[c] for c in _BYTE_COLS if isinstance(r.get(c), bytes)}
        first = {**r, **{c: v[:part] for c, v in big.items()}}
        if upsert:
            unit.execute(stmt, first)
        elif not _insert_new(unit, _insert_new_stmt(unit, table), first):
            continue  # the row already existed and was kept
        _append_parts(unit, table, r, big, part)


def _append_parts(
    unit: Unit, table: Table, row: dict[str, Any], big: dict[str, bytes], part: int
) -> None:
    """Append the parts after the first of `big` values to the row `row` names."""
    pk = [col == row[col.name] for col in table.primary_key.columns]
    for c, v in big.items():
        for i in range(part, len(v), part):
            chunk = literal(v[i : i + part], table.c[c].type)
            unit.execute(update(table).where(*pk).values({c: func.concat(table.c[c], chunk)}))


def _insert_blob(unit: Unit, t: Tables, row: CheckpointRow, b: BlobRow) -> bool:
    """Insert one blob row whole unless it exists; `True` if this call stored it."""
    table = t.checkpoint_blobs
    params = b.as_params(row.thread_id, row.ns_hash)
    part = unit.rules.checkpoint_value_part
    big = part is not None and b.value is not None and len(b.value) > part
    first = {**params, "value": b.value[:part]} if big and b.value else params
    if not _insert_new(unit, _insert_new_stmt(unit, table), first):
        return False
    if big and b.value and part is not None:
        _append_parts(unit, table, params, {"value": b.value}, part)
    return True


# -- a put ---------------------------------------------------------------------------------


def put_checkpoint(
    unit: Unit,
    t: Tables,
    row: CheckpointRow,
    blobs: Sequence[BlobRow],
    thread_metadata: dict[str, Any] | None,
) -> dict[str, BlobRow]:
    """Store a checkpoint, the blobs of its new channel versions, and touch its thread.

    Returns, per list channel, the row actually inserted (a delta whose base vanished is
    stored whole instead); a list channel missing from the result was already stored.
    """
    _write(
        unit,
        t.checkpoints,
        _upsert(unit, t.checkpoints, CHECKPOINT_UPDATE),
        [row.params()],
        True,
    )
    plain = [b.as_params(row.thread_id, row.ns_hash) for b in blobs if b.root_version is None]
    if plain:
        ignore = _insert_ignore(unit, t.checkpoint_blobs)
        _write(unit, t.checkpoint_blobs, ignore, plain, False)
    stored: dict[str, BlobRow] = {}
    for b in blobs:
        if b.root_version is None:
            continue
        if b.kind == DELTA:
            delta = unit.statement((t.key, "ckpt.delta"), lambda: _delta_insert(unit, t))
            if _insert_new(unit, delta, b.as_params(row.thread_id, row.ns_hash)) == 1:
                stored[b.channel] = b
                continue
            assert b.full is not None
            b = b.full()  # its base is gone: stored whole
        if _insert_blob(unit, t, row, b):
            stored[b.channel] = b
    # the thread's row: created, or its `updated_at` (and `metadata`) set
    touched = ("updated_at", "metadata") if thread_metadata is not None else ("updated_at",)
    thread = _upsert(unit, t.checkpoint_threads, touched)
    params = {
        "thread_id": row.thread_id,
        "created_at": row.created_at,
        "updated_at": row.created_at,
        "metadata": thread_metadata,
    }
    unit.execute(thread, params)
    return stored


def put_writes(
    unit: Unit,
    t: Tables,
    rows: Sequence[dict[str, Any]],
    upsert: bool,
) -> None:
    """Store pending writes: insert-if-absent, or upsert (special channels)."""
    table = t.checkpoint_writes
    stmt = _upsert(unit, table, WRITE_UPDATE) if upsert else _insert_ignore(unit, table)
    _write(unit, table, stmt, rows, upsert)
