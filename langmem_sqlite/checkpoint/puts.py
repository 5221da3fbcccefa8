"""The SQL of writes: a checkpoint with its new values and its thread, and pending writes.

A `put` is written once, as the four statements it makes (the checkpoint, its plain values,
each list's row, the thread) built by this module's builders; the database's dialect object
decides how they are sent (`checkpoint_put_in_one_statement`):

- in one transaction, one after the other (SQLite, MariaDB/MySQL);
- on PostgreSQL, as ONE statement whose data-modifying CTEs are those same inserts, run in
  autocommit mode: one round trip instead of a transaction's BEGIN, statements and COMMIT,
  which matters when the server is far away.

`put_writes` is one statement. Upserts and inserts that keep an existing row are the dialect
object's (`upsert`, `insert_ignore`, `checkpoint_insert_new`); a byte value larger than
what one statement may carry (`checkpoint_value_part`, MariaDB/MySQL) is written in parts.
Statements are built once per set of tables and shape
([`Unit.statement`][langmem_sqlite.engine.Unit.statement]).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Table,
    bindparam,
    cast,
    exists,
    func,
    literal,
    literal_column,
    select,
    union_all,
    update,
)

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


def _bind(table: Table, prefix: str, cols: Sequence[str]) -> dict[str, Any]:
    return {c: bindparam(f"{prefix}{c}", type_=table.c[c].type) for c in cols}


def _casts(table: Table, binds: dict[str, Any]) -> list[Any]:
    """Typed select-list parameters (a bare NULL parameter in a SELECT is text to PostgreSQL)."""
    return [cast(b, table.c[c].type) for c, b in binds.items()]


# The builders of a put's statements, shared by both ways of sending them (see put_checkpoint).


def _delta_insert(unit: Unit, t: Tables, cols: dict[str, Any], typed: bool) -> Any:
    """`INSERT <row> SELECT ... WHERE EXISTS (<its base row>)`: a delta stored only on its
    base (`cols`: the row's parameters; `typed`: cast them, for a CTE)."""
    tb = t.checkpoint_blobs
    values = _casts(tb, cols) if typed else list(cols.values())
    ins = unit.rules.checkpoint_insert_new(tb)
    return ins.from_select(list(BLOB_COLS), select(*values).where(_base_exists(t, cols)))


def _base_exists(t: Tables, cols: dict[str, Any]) -> Any:
    """`EXISTS` the row a delta (its parameters `cols`) is built on."""
    tb = t.checkpoint_blobs.c
    return exists().where(
        tb.thread_id == cols["thread_id"],
        tb.ns_hash == cols["ns_hash"],
        tb.channel_hash == cols["channel_hash"],
        tb.version == cols["base_version"],
    )


def _checkpoint_upsert(unit: Unit, t: Tables) -> Any:
    return unit.rules.upsert(t.checkpoints, CHECKPOINT_UPDATE)


def _thread_upsert(unit: Unit, t: Tables, metadata: bool) -> Any:
    """The thread's row: created, or its `updated_at` (and `metadata`) set."""
    cols = ("updated_at", "metadata") if metadata else ("updated_at",)
    return unit.rules.upsert(t.checkpoint_threads, cols)


def _one_statement(
    unit: Unit, t: Tables, n_plain: int, list_kinds: tuple[str, ...], meta: bool
) -> Any:
    """The whole of a put as ONE statement of data-modifying CTEs, by shape.

    The checkpoint row is written only if the base of every delta is there: otherwise the
    statement writes no checkpoint (its counts say which deltas were not stored), and the
    caller runs it again with those lists whole. Each run is atomic on its own, so the put can
    run in autocommit mode: one round trip.
    """

    def build() -> Any:
        tc, tb, tt = t.checkpoints, t.checkpoint_blobs, t.checkpoint_threads
        list_cols = [_bind(tb, f"l{j}_", BLOB_COLS) for j in range(len(list_kinds))]
        # the checkpoint, if the base of each delta is stored
        bases = [
            _base_exists(t, c) for k, c in zip(list_kinds, list_cols, strict=True) if k == DELTA
        ]
        c_cols = _bind(tc, "c_", [c.name for c in tc.columns])
        ins_c = _checkpoint_upsert(unit, t)
        if bases:
            ins_c = ins_c.from_select(list(c_cols), select(*_casts(tc, c_cols)).where(*bases))
        else:
            ins_c = ins_c.values(c_cols)
        ctes = [ins_c.cte("put_c")]
        if n_plain:
            # A UNION of one-row SELECTs: a multi-row VALUES would defeat the statement cache.
            rows = [select(*_casts(tb, _bind(tb, f"b{i}_", BLOB_COLS))) for i in range(n_plain)]
            source = rows[0] if n_plain == 1 else union_all(*rows)
            ins_b = unit.rules.insert_ignore(tb).from_select(list(BLOB_COLS), source)
            ctes.append(ins_b.cte("put_b"))
        thread = _bind(tt, "t_", ["thread_id", "created_at", "updated_at", "metadata"])
        ctes.append(_thread_upsert(unit, t, meta).values(thread).cte("put_t"))
        counts: list[Any] = []
        for j, (kind, cols) in enumerate(zip(list_kinds, list_cols, strict=True)):
            if kind == DELTA:
                ins = _delta_insert(unit, t, cols, typed=True)
            else:
                ins = unit.rules.checkpoint_insert_new(tb).values(cols)
            cte = ins.returning(tb.c.version).cte(f"put_l{j}")
            ctes.append(cte)
            counts.append(select(func.count()).select_from(cte).scalar_subquery())
        return select(*(counts or [literal_column("1")])).add_cte(*ctes)

    return unit.statement((t.key, "ckpt.put", n_plain, list_kinds, meta), build)


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
    if unit.rules.checkpoint_put_in_one_statement:
        return _put_at_once(unit, t, row, blobs, thread_metadata)
    return _put_in_turn(unit, t, row, blobs, thread_metadata)


def _thread_params(row: CheckpointRow, metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "thread_id": row.thread_id,
        "created_at": row.created_at,
        "updated_at": row.created_at,
        "metadata": metadata,
    }


def _put_in_turn(
    unit: Unit,
    t: Tables,
    row: CheckpointRow,
    blobs: Sequence[BlobRow],
    thread_metadata: dict[str, Any] | None,
) -> dict[str, BlobRow]:
    """The put's statements one after the other, in the caller's transaction."""
    upsert_c = unit.statement((t.key, "ckpt.checkpoint"), lambda: _checkpoint_upsert(unit, t))
    _write(unit, t.checkpoints, upsert_c, [row.params()], True)
    plain = [b.as_params(row.thread_id, row.ns_hash) for b in blobs if b.root_version is None]
    if plain:
        ignore = _insert_ignore(unit, t.checkpoint_blobs)
        _write(unit, t.checkpoint_blobs, ignore, plain, False)
    stored: dict[str, BlobRow] = {}
    for b in blobs:
        if b.root_version is None:
            continue
        if b.kind == DELTA:
            delta = unit.statement(
                (t.key, "ckpt.delta"),
                lambda: _delta_insert(unit, t, _bind(t.checkpoint_blobs, "", BLOB_COLS), False),
            )
            if _insert_new(unit, delta, b.as_params(row.thread_id, row.ns_hash)) == 1:
                stored[b.channel] = b
                continue
            assert b.full is not None
            b = b.full()  # its base is gone: stored whole
        if _insert_blob(unit, t, row, b):
            stored[b.channel] = b
    meta = thread_metadata is not None
    thread = unit.statement((t.key, "ckpt.thread", meta), lambda: _thread_upsert(unit, t, meta))
    unit.execute(thread, _thread_params(row, thread_metadata))
    return stored


def _put_at_once(
    unit: Unit,
    t: Tables,
    row: CheckpointRow,
    blobs: Sequence[BlobRow],
    thread_metadata: dict[str, Any] | None,
) -> dict[str, BlobRow]:
    """The put's statements as one (see `_one_statement`)."""
    plain = [b for b in blobs if b.root_version is None]
    lists = [b for b in blobs if b.root_version is not None]
    params = {f"c_{k}": v for k, v in row.params().items()}
    for i, b in enumerate(plain):
        params.update((f"b{i}_{k}", v) for k, v in b.as_params(row.thread_id, row.ns_hash).items())
    for j, b in enumerate(lists):
        params.update((f"l{j}_{k}", v) for k, v in b.as_params(row.thread_id, row.ns_hash).items())
    params.update((f"t_{k}", v) for k, v in _thread_params(row, thread_metadata).items())
    kinds = tuple(b.kind for b in lists)
    stmt = _one_statement(unit, t, len(plain), kinds, thread_metadata is not None)
    inserted = unit.execute(stmt, params).one()
    counts = list(inserted) if lists else []
    # a delta not stored: its base is gone (then no checkpoint was written), or it was there
    redo = {
        id(b) for b, n in zip(lists, counts, strict=True) if not n and b.kind == DELTA and b.full
    }
    if redo:  # the same put again, those lists whole (a second statement, atomic too)
        whole = [b.full() if id(b) in redo and b.full else b for b in blobs]
        return _put_at_once(unit, t, row, whole, thread_metadata)
    return {b.channel: b for b, n in zip(lists, counts, strict=True) if n}


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
