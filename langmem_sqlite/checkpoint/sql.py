"""The SQL of the checkpointer: functions on a sync :class:`~sqlalchemy.engine.Connection`.

Each function runs inside one transaction opened by :meth:`Database.run` (sync) or
:meth:`Database.arun` (async, through ``run_sync``); none of them (de)serializes anything,
which the saver does outside the transaction. Statements per operation are kept few: a
``put`` is one statement on PostgreSQL (data-modifying CTEs) and two to four elsewhere
(checkpoint, blobs, list delta, thread); ``put_writes`` is one; ``get_tuple`` two (the
checkpoint with its writes, then its values with the rows their deltas are built on).
Reads use prebuilt statements with bound parameters, so SQLAlchemy compiles each once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import (
    Table,
    and_,
    bindparam,
    cast,
    delete,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection, Row
from sqlalchemy.sql.elements import ColumnElement

from ..engine.schema import Tables
from .storage import DELTA, EMPTY, BlobRow, key_hash

__all__ = [
    "CARRIED_NULL",
    "CheckpointRow",
    "ListQuery",
    "ThreadRow",
    "WalkResult",
    "copy_thread",
    "delete_for_runs",
    "delete_idle_threads",
    "delete_threads",
    "delta_walk",
    "list_page",
    "list_threads",
    "pending_writes",
    "prune_keep_latest",
    "put_checkpoint",
    "put_writes",
    "read_checkpoint",
]

_CHUNK = 200
"""Keys per ``IN (...)`` list (SQLite allows 32766 bound variables)."""

WALK_PAGE = 900
"""Ancestors per recursive query (MySQL 8 stops recursive CTEs at 1000 by default)."""

BlobKey = tuple[str, str, str, str]
"""``(thread_id, ns_hash, channel_hash, version)``."""


@dataclass
class CheckpointRow:
    """A ``checkpoints`` row to upsert."""

    thread_id: str
    ns_hash: str
    checkpoint_id: str
    checkpoint_ns: str
    parent_checkpoint_id: str | None
    type: str
    checkpoint: bytes
    versions: str
    metadata_type: str
    metadata: bytes
    metadata_json: dict[str, Any] | None
    run_id: str | None
    created_at: int

    def params(self) -> dict[str, Any]:
        """Column values."""
        return dict(self.__dict__)


@dataclass
class ListQuery:
    """What :func:`list_page` selects (``None`` = no condition)."""

    thread_id: str | None = None
    ns_hash: str | None = None
    checkpoint_id: str | None = None
    before: str | None = None
    conditions: list[ColumnElement[bool]] = field(default_factory=list)


@dataclass
class ThreadRow:
    """A thread as listed by :func:`list_threads`."""

    thread_id: str
    created_at: int
    updated_at: int
    checkpoint_count: int
    metadata: dict[str, Any] | None


def _chunks(items: Sequence[Any], n: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _exact_in(cols: Sequence[Any], keys: Sequence[tuple[Any, ...]]) -> ColumnElement[bool]:
    """``(cols) IN keys`` as an OR of ``c1 = ? AND ... AND cN IN (...)`` per key prefix.

    Row-value ``IN`` lists make SQLite scan the table; this form uses the index on every
    dialect.
    """
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for k in keys:
        groups.setdefault(tuple(k[:-1]), []).append(k[-1])
    terms = [
        and_(*[c == v for c, v in zip(cols[:-1], prefix, strict=True)], cols[-1].in_(last))
        for prefix, last in groups.items()
    ]
    return terms[0] if len(terms) == 1 else or_(*terms)


# -- insert statements, built once per (table, dialect, mode) ------------------------------------

_stmts: dict[tuple[Any, ...], Any] = {}


def _insert(conn: Connection, table: Table, update: Sequence[str] | None) -> Any:
    """An insert that skips (``update=None``) or updates ``update`` columns on a key conflict.

    On MySQL/MariaDB "skip" is ``ON DUPLICATE KEY UPDATE <key> = <key>``, not ``INSERT
    IGNORE``: the server reports each row ``IGNORE`` skipped as a warning, which asyncmy logs
    ("Duplicate entry ... for key 'PRIMARY'") after an extra ``SHOW WARNINGS`` round trip. Its
    row count then does not tell a skipped row from an inserted one (SQLAlchemy's MySQL
    drivers count found rows): :func:`_insert_new` does, where it matters.
    """
    dialect = conn.dialect.name
    key = (table, dialect, tuple(update) if update is not None else None)
    stmt = _stmts.get(key)
    if stmt is not None:
        return stmt
    pk = [c.name for c in table.primary_key]
    if dialect in ("postgresql", "sqlite"):
        ins = (postgresql if dialect == "postgresql" else sqlite).insert(table)
        if update:
            stmt = ins.on_conflict_do_update(
                index_elements=pk, set_={c: ins.excluded[c] for c in update}
            )
        else:
            stmt = ins.on_conflict_do_nothing(index_elements=pk)
    elif dialect in ("mysql", "mariadb"):
        ins = mysql.insert(table)
        if update:
            stmt = ins.on_duplicate_key_update({c: ins.inserted[c] for c in update})
        else:
            stmt = ins.on_duplicate_key_update({pk[0]: table.c[pk[0]]})
    else:  # pragma: no cover - other dialects are not supported
        raise NotImplementedError(f"checkpointer: unsupported dialect {dialect!r}")
    _stmts[key] = stmt
    return stmt


def _mysql(conn: Connection) -> bool:
    return conn.dialect.name in ("mysql", "mariadb")


def _duplicate(error: BaseException) -> bool:
    """True for MySQL's "duplicate entry" error (1062), from the driver or SQLAlchemy."""
    args: tuple[Any, ...] = getattr(getattr(error, "orig", error), "args", ())
    return bool(args) and args[0] == 1062


def _insert_new(conn: Connection, stmt: Any, params: dict[str, Any]) -> int:
    """Run an insert of one row that must not replace an existing one; 1 if it inserted it.

    On PostgreSQL and SQLite ``stmt`` skips conflicts itself. On MySQL/MariaDB it is a plain
    insert, and an existing row fails it with "duplicate entry" (1062): that statement alone is
    undone, the transaction goes on, and nothing is logged.
    """
    try:
        return int(conn.execute(stmt, params).rowcount)
    except Exception as e:
        if _mysql(conn) and _duplicate(e):
            return 0
        raise


def _insert_new_stmt(conn: Connection, table: Table) -> Any:
    """The insert :func:`_insert_new` runs for ``table``."""
    if _mysql(conn):
        return table.insert()
    return _insert(conn, table, None)


MYSQL_PART = 4 * 1024 * 1024
"""Largest byte value sent in one MySQL/MariaDB statement: pymysql sends bytes escaped inside
the SQL text (up to ~2.5x larger), and the server's default ``max_allowed_packet`` is 16 MiB."""

_BYTE_COLS = ("value", "checkpoint", "metadata")


def _write(
    conn: Connection, table: Table, stmt: Any, rows: Sequence[dict[str, Any]], upsert: bool
) -> None:
    """Execute an insert for ``rows``.

    On MySQL/MariaDB a byte value over :data:`MYSQL_PART` is sent in parts: the row is
    inserted with the first part (unless it exists, for an insert that skips existing rows),
    then ``CONCAT`` appends the others (in this transaction).
    """
    if not _mysql(conn):
        conn.execute(stmt, rows[0] if len(rows) == 1 else list(rows))
        return

    def is_big(r: dict[str, Any]) -> bool:
        return any(isinstance(r.get(c), bytes) and len(r[c]) > MYSQL_PART for c in _BYTE_COLS)

    small = [r for r in rows if not is_big(r)]
    if small:
        conn.execute(stmt, small[0] if len(small) == 1 else small)
    for r in rows:
        if not is_big(r):
            continue
        big = {c: r[c] for c in _BYTE_COLS if isinstance(r.get(c), bytes)}
        first = {**r, **{c: v[:MYSQL_PART] for c, v in big.items()}}
        if upsert:
            conn.execute(stmt, first)
        elif not _insert_new(conn, table.insert(), first):
            continue  # the row already existed and was kept
        _append_parts(conn, table, r, big)


def _append_parts(
    conn: Connection, table: Table, row: dict[str, Any], big: dict[str, bytes]
) -> None:
    """Append the parts after the first of ``big`` values to the row ``row`` names."""
    pk = [col == row[col.name] for col in table.primary_key.columns]
    for c, v in big.items():
        for i in range(MYSQL_PART, len(v), MYSQL_PART):
            part = literal(v[i : i + MYSQL_PART], table.c[c].type)
            conn.execute(update(table).where(*pk).values({c: func.concat(table.c[c], part)}))


_CKPT_UPDATE = (
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


# -- writing ---------------------------------------------------------------------------------


_BLOB_COLS = (
    "thread_id",
    "ns_hash",
    "channel_hash",
    "version",
    "kind",
    "type",
    "value",
    "base_version",
    "base_len",
    "root_version",
    "depth",
)


def _delta_stmt(conn: Connection, t: Tables) -> Any:
    """``INSERT ... SELECT <row> WHERE EXISTS (<its base>)``, built once per dialect."""
    key = (t.key, "delta", conn.dialect.name)
    stmt = _stmts.get(key)
    if stmt is None:
        b = t.checkpoint_blobs.c
        base: Any = (
            select(literal_column("1"))
            .select_from(t.checkpoint_blobs)
            .where(
                b.thread_id == bindparam("base_t"),
                b.ns_hash == bindparam("base_n"),
                b.channel_hash == bindparam("base_c"),
                b.version == bindparam("base_v"),
            )
        )
        source = select(*[bindparam(n, type_=b[n].type) for n in _BLOB_COLS]).where(exists(base))
        stmt = _stmts[key] = _insert_new_stmt(conn, t.checkpoint_blobs).from_select(
            list(_BLOB_COLS), source
        )
    return stmt


def _insert_delta(conn: Connection, t: Tables, thread_id: str, ns_hash: str, b: BlobRow) -> bool:
    """Insert a delta row only if its base row exists and it does not; True if inserted."""
    params = b.as_params(thread_id, ns_hash)
    params.update(base_t=thread_id, base_n=ns_hash, base_c=b.channel_hash, base_v=b.base_version)
    return _insert_new(conn, _delta_stmt(conn, t), params) == 1


def _bind(table: Table, prefix: str, cols: Sequence[str]) -> dict[str, Any]:
    return {c: bindparam(f"{prefix}{c}", type_=table.c[c].type) for c in cols}


def _casts(table: Table, binds: dict[str, Any]) -> list[Any]:
    """Typed select-list parameters (a bare NULL parameter in a SELECT is text to PostgreSQL)."""
    return [cast(b, table.c[c].type) for c, b in binds.items()]


def _pg_put_stmt(t: Tables, n_plain: int, list_kinds: tuple[str, ...], meta: bool) -> Any:
    """The whole of a put as ONE PostgreSQL statement (data-modifying CTEs), by shape.

    The checkpoint row is written only if the base of every delta is there: otherwise the
    statement writes no checkpoint (its counts say which deltas were not stored), and the caller
    runs it again with those lists whole. Each run is atomic on its own, so the put can run in
    autocommit mode: one round trip.
    """
    key = (t.key, "pg_put", n_plain, list_kinds, meta)
    stmt = _stmts.get(key)
    if stmt is not None:
        return stmt
    tc, tb, tt = t.checkpoints, t.checkpoint_blobs, t.checkpoint_threads
    list_cols = [_bind(tb, f"l{j}_", _BLOB_COLS) for j in range(len(list_kinds))]
    # per delta list: "its base version is stored"
    bases = {
        j: exists().where(
            tb.c.thread_id == cols["thread_id"],
            tb.c.ns_hash == cols["ns_hash"],
            tb.c.channel_hash == cols["channel_hash"],
            tb.c.version == cols["base_version"],
        )
        for j, (kind, cols) in enumerate(zip(list_kinds, list_cols, strict=True))
        if kind == DELTA
    }
    c_cols = _bind(tc, "c_", [c.name for c in tc.columns])
    if bases:
        source_c = select(*_casts(tc, c_cols)).where(*bases.values())
        ins_c = postgresql.insert(tc).from_select(list(c_cols), source_c)
    else:
        ins_c = postgresql.insert(tc).values(c_cols)
    ins_c = ins_c.on_conflict_do_update(
        index_elements=[c.name for c in tc.primary_key],
        set_={c: ins_c.excluded[c] for c in _CKPT_UPDATE},
    )
    ctes = [ins_c.cte("put_c")]
    if n_plain:
        # A UNION of one-row SELECTs: a multi-row VALUES would defeat the statement cache.
        rows = [select(*_casts(tb, _bind(tb, f"b{i}_", _BLOB_COLS))) for i in range(n_plain)]
        source = rows[0] if n_plain == 1 else union_all(*rows)
        ins_b = postgresql.insert(tb).from_select(list(_BLOB_COLS), source)
        ctes.append(ins_b.on_conflict_do_nothing().cte("put_b"))
    ins_t = postgresql.insert(tt).values(
        _bind(tt, "t_", ["thread_id", "created_at", "updated_at", "metadata"])
    )
    ins_t = ins_t.on_conflict_do_update(
        index_elements=["thread_id"],
        set_={
            c: ins_t.excluded[c] for c in (("updated_at", "metadata") if meta else ("updated_at",))
        },
    )
    ctes.append(ins_t.cte("put_t"))
    counts: list[Any] = []
    for j, kind in enumerate(list_kinds):
        cols = list_cols[j]
        if kind == DELTA:
            source = select(*_casts(tb, cols)).where(bases[j])
            ins: Any = postgresql.insert(tb).from_select(list(_BLOB_COLS), source)
        else:
            ins = postgresql.insert(tb).values(cols)
        cte = ins.on_conflict_do_nothing().returning(tb.c.version).cte(f"put_l{j}")
        ctes.append(cte)
        counts.append(select(func.count()).select_from(cte).scalar_subquery())
    stmt = _stmts[key] = select(*(counts or [literal_column("1")])).add_cte(*ctes)
    return stmt


def _put_pg(
    conn: Connection,
    t: Tables,
    row: CheckpointRow,
    blobs: Sequence[BlobRow],
    thread_metadata: dict[str, Any] | None,
) -> dict[str, BlobRow]:
    plain = [b for b in blobs if b.root_version is None]
    lists = [b for b in blobs if b.root_version is not None]
    params = {f"c_{k}": v for k, v in row.params().items()}
    for i, b in enumerate(plain):
        params.update((f"b{i}_{k}", v) for k, v in b.as_params(row.thread_id, row.ns_hash).items())
    for j, b in enumerate(lists):
        params.update((f"l{j}_{k}", v) for k, v in b.as_params(row.thread_id, row.ns_hash).items())
    thread = (row.thread_id, row.created_at, row.created_at, thread_metadata)
    params.update(
        zip(("t_thread_id", "t_created_at", "t_updated_at", "t_metadata"), thread, strict=True)
    )
    stmt = _pg_put_stmt(t, len(plain), tuple(b.kind for b in lists), thread_metadata is not None)
    inserted = conn.execute(stmt, params).one()
    counts = list(inserted) if lists else []
    # a delta not stored: its base is gone (then no checkpoint was written), or it was there
    redo = {
        id(b) for b, n in zip(lists, counts, strict=True) if not n and b.kind == DELTA and b.full
    }
    if redo:  # the same put again, those lists whole (a second statement, atomic too)
        whole = [b.full() if id(b) in redo and b.full else b for b in blobs]
        return _put_pg(conn, t, row, whole, thread_metadata)
    return {b.channel: b for b, n in zip(lists, counts, strict=True) if n}


def _insert_blob(conn: Connection, t: Tables, row: CheckpointRow, b: BlobRow) -> bool:
    """Insert one blob row whole unless it exists; ``True`` if this call stored it."""
    table = t.checkpoint_blobs
    params = b.as_params(row.thread_id, row.ns_hash)
    big = _mysql(conn) and b.value is not None and len(b.value) > MYSQL_PART
    first = {**params, "value": b.value[:MYSQL_PART]} if big and b.value else params
    if not _insert_new(conn, _insert_new_stmt(conn, table), first):
        return False
    if big and b.value:
        _append_parts(conn, table, params, {"value": b.value})
    return True


def put_checkpoint(
    conn: Connection,
    t: Tables,
    row: CheckpointRow,
    blobs: Sequence[BlobRow],
    thread_metadata: dict[str, Any] | None,
) -> dict[str, BlobRow]:
    """Store a checkpoint, the blobs of its new channel versions, and touch its thread.

    Returns, per list channel, the row actually inserted (a delta whose base vanished is
    stored whole instead); a list channel missing from the result was already stored.
    """
    if conn.dialect.name == "postgresql":
        return _put_pg(conn, t, row, blobs, thread_metadata)
    _write(conn, t.checkpoints, _insert(conn, t.checkpoints, _CKPT_UPDATE), [row.params()], True)
    plain = [b.as_params(row.thread_id, row.ns_hash) for b in blobs if b.root_version is None]
    if plain:
        _write(conn, t.checkpoint_blobs, _insert(conn, t.checkpoint_blobs, None), plain, False)
    stored: dict[str, BlobRow] = {}
    for b in blobs:
        if b.root_version is None:
            continue
        if b.kind == DELTA:
            if _insert_delta(conn, t, row.thread_id, row.ns_hash, b):
                stored[b.channel] = b
                continue
            assert b.full is not None
            b = b.full()
        if _insert_blob(conn, t, row, b):
            stored[b.channel] = b
    thread = {
        "thread_id": row.thread_id,
        "created_at": row.created_at,
        "updated_at": row.created_at,
        "metadata": thread_metadata,
    }
    if thread_metadata is None:
        conn.execute(_insert(conn, t.checkpoint_threads, ("updated_at",)), thread)
    else:
        conn.execute(_insert(conn, t.checkpoint_threads, ("updated_at", "metadata")), thread)
    return stored


def put_writes(
    conn: Connection,
    t: Tables,
    rows: Sequence[dict[str, Any]],
    upsert: bool,
) -> None:
    """Store pending writes: insert-if-absent, or upsert (special channels)."""
    update = ("task_id", "task_path", "channel", "type", "value") if upsert else None
    _write(conn, t.checkpoint_writes, _insert(conn, t.checkpoint_writes, update), rows, upsert)


# -- reading ---------------------------------------------------------------------------------


def _ckpt_columns(t: Tables) -> list[Any]:
    c = t.checkpoints.c
    return [
        c.thread_id,
        c.ns_hash,
        c.checkpoint_id,
        c.checkpoint_ns,
        c.parent_checkpoint_id,
        c.type,
        c.checkpoint,
        c.versions,
        c.metadata_type,
        c.metadata,
    ]


_prepared: dict[tuple[Any, ...], Any] = {}


def _prepared_stmt(t: Tables, name: str, build: Callable[[Tables], Any]) -> Any:
    """A statement built once per set of tables (SQLAlchemy then reuses its compiled form)."""
    key = (t.key, name)
    stmt = _prepared.get(key)
    if stmt is None:
        stmt = _prepared[key] = build(t)
    return stmt


def _scope_groups(keys: Iterable[tuple[Any, ...]]) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    groups: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for k in dict.fromkeys(keys):
        groups.setdefault((k[0], k[1]), []).append(k)
    return groups


def _writes_stmt(t: Tables) -> Any:
    w = t.checkpoint_writes.c
    cols = (w.checkpoint_id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.value, w.nulls)
    return select(*cols).where(
        w.thread_id == bindparam("t"),
        w.ns_hash == bindparam("n"),
        w.checkpoint_id.in_(bindparam("ids", expanding=True)),
    )


def _writes_for(
    conn: Connection, t: Tables, keys: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], list[PendingWrite]]:
    """Pending writes of the given ``(thread_id, ns_hash, checkpoint_id)``, unsorted."""
    stmt = _prepared_stmt(t, "writes", _writes_stmt)
    out: dict[tuple[str, str, str], list[PendingWrite]] = {}
    for (tid, nsh), group in _scope_groups(keys).items():
        for part in _chunks(group):
            params = {"t": tid, "n": nsh, "ids": [k[2] for k in part]}
            for w in pending_writes(conn.execute(stmt, params).all()):
                out.setdefault((tid, nsh, w.checkpoint_id), []).append(w)
    return out


def _kinds_stmt(t: Tables) -> Any:
    b = t.checkpoint_blobs.c
    return select(b.channel_hash, b.version, b.kind).where(
        b.thread_id == bindparam("t"),
        b.ns_hash == bindparam("n"),
        b.channel_hash.in_(bindparam("chs", expanding=True)),
        b.version.in_(bindparam("vs", expanding=True)),
    )


CHAIN_PAGE = 900
"""Rows of one list's chain per recursive query (MySQL stops recursive CTEs at 1000 by
default; chains are at most ~14 rows long but for rows of earlier versions)."""


def _chain_stmt(t: Tables) -> Any:
    """The blob rows of some ``(channel, version)`` keys and the rows their deltas are built on,
    in one recursive query (channels and versions are matched as two ``IN`` lists, which may
    add a few rows). The rows' values ride along the recursion (joining its keys back to the
    table afterwards made SQLite take 3 times as long); a row two chains share comes once per
    chain."""
    b = t.checkpoint_blobs
    c = b.c
    names = _BLOB_COLS[2:]  # the key within (thread, namespace), then the row
    start = select(*[c[n] for n in names], literal_column("0").label("hops")).where(
        c.thread_id == bindparam("t"),
        c.ns_hash == bindparam("n"),
        c.channel_hash.in_(bindparam("chs", expanding=True)),
        c.version.in_(bindparam("vs", expanding=True)),
    )
    chain = start.cte("chain", recursive=True)
    p = b.alias("p")
    chain = chain.union_all(
        select(*[p.c[n] for n in names], chain.c.hops + 1).where(
            p.c.thread_id == bindparam("t"),
            p.c.ns_hash == bindparam("n"),
            p.c.channel_hash == chain.c.channel_hash,
            p.c.version == chain.c.base_version,
            chain.c.kind == DELTA,
            chain.c.hops < CHAIN_PAGE - 1,
        )
    )
    return select(*[chain.c[n] for n in names])


def _fetch_blobs(
    conn: Connection,
    t: Tables,
    keys: Iterable[BlobKey],
    into: dict[BlobKey, Any],
    kinds_only: bool = False,
) -> None:
    """Add to ``into`` the blob rows whose keys are in ``keys`` and, unless ``kinds_only``
    (which reads the kinds, not the values), the rows their deltas are built on (see
    :func:`_chain_stmt`)."""
    if kinds_only:
        stmt = _prepared_stmt(t, "blob_kinds", _kinds_stmt)
    else:
        stmt = _prepared_stmt(t, "blob_chains", _chain_stmt)
    for (tid, nsh), group in _scope_groups(keys).items():
        for part in _chunks(group):
            params = {
                "t": tid,
                "n": nsh,
                "chs": list({k[2] for k in part}),
                "vs": list({k[3] for k in part}),
            }
            for r in conn.execute(stmt, params).all():
                into[(tid, nsh, r.channel_hash, r.version)] = r


def _blobs_for(conn: Connection, t: Tables, keys: Iterable[BlobKey]) -> dict[BlobKey, Any]:
    """Blob rows by key, plus every row the deltas among them are built on.

    One query follows each chain (:func:`_chain_stmt`); a chain longer than
    :data:`CHAIN_PAGE` rows is followed from where it stopped. A base that no longer exists is
    left out (the resolver then raises).
    """
    wanted = list(dict.fromkeys(keys))
    rows: dict[BlobKey, Any] = {}
    _fetch_blobs(conn, t, wanted, rows)
    tried = set(wanted)
    while True:
        bases = [
            base
            for base in dict.fromkeys(
                (*k[:3], r.base_version) for k, r in rows.items() if r.kind == DELTA
            )
            if base not in rows and base not in tried
        ]
        if not bases:
            return rows
        tried.update(bases)
        _fetch_blobs(conn, t, bases, rows)


def _ckpt_scope(t: Tables) -> Any:
    c = t.checkpoints.c
    return select(*_ckpt_columns(t)).where(
        c.thread_id == bindparam("t"), c.ns_hash == bindparam("n")
    )


def _ckpt_by_id(t: Tables) -> Any:
    return _ckpt_scope(t).where(t.checkpoints.c.checkpoint_id == bindparam("id"))


def _ckpt_latest(t: Tables) -> Any:
    return _ckpt_scope(t).order_by(t.checkpoints.c.checkpoint_id.desc()).limit(1)


CARRIED_NULL = "(carried null)"
"""The ``type`` of a write of None carried by its call's first row (no value of its own)."""


class PendingWrite(NamedTuple):
    """A row of pending writes, as :func:`read_checkpoint` returns it."""

    checkpoint_id: str
    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    value: Any


def pending_writes(rows: Iterable[Sequence[Any]]) -> list[PendingWrite]:
    """Write rows ``(checkpoint_id, task_id, task_path, idx, channel, type, value, nulls)`` as
    pending writes, with the writes of None each row carries (``nulls``).

    A carried write is its call's: if a row of the same task and index exists too, it came from
    a later call (a call's first row carries, and a later call's first row would have met it),
    so the carried one is kept: the first write wins.
    """
    out: dict[tuple[str, str, int], PendingWrite] = {}
    carried: set[tuple[str, str, int]] = set()
    rows = list(rows)
    for cid, task_id, path, _idx, _ch, _type, _value, nulls in rows:
        if nulls:
            for idx, ch in json.loads(nulls):
                key = (cid, task_id, int(idx))
                out[key] = PendingWrite(cid, task_id, path, int(idx), ch, CARRIED_NULL, b"")
                carried.add(key)
    for cid, task_id, path, idx, ch, type_, value, _ in rows:
        key = (cid, task_id, idx)
        if key not in carried:
            out[key] = PendingWrite(cid, task_id, path, idx, ch, type_, value)
    return list(out.values())


def _with_writes(build: Callable[[Tables], Any]) -> Callable[[Tables], Any]:
    """The checkpoint row selected by ``build``, once per pending write (its columns
    prefixed ``w_``), or once with NULLs: a checkpoint and its writes in one round trip."""

    def joined(t: Tables) -> Any:
        c = build(t).subquery()
        w = t.checkpoint_writes.c
        on = and_(
            w.thread_id == c.c.thread_id,
            w.ns_hash == c.c.ns_hash,
            w.checkpoint_id == c.c.checkpoint_id,
        )
        wcols = [
            col.label(f"w_{col.name}")
            for col in (w.task_id, w.task_path, w.idx, w.channel, w.type, w.value, w.nulls)
        ]
        return select(*c.c, *wcols).select_from(c.outerjoin(t.checkpoint_writes, on))

    return joined


def read_checkpoint(
    conn: Connection,
    t: Tables,
    thread_id: str,
    ns_hash: str,
    checkpoint_id: str | None,
) -> tuple[Row[Any], list[PendingWrite], dict[BlobKey, Any]] | None:
    """A checkpoint row (the latest when ``checkpoint_id`` is None), its writes, and its blobs.

    Two statements: the checkpoint joined with its writes, then the blobs (with the rows
    their deltas are built on).
    """
    params = {"t": thread_id, "n": ns_hash}
    if checkpoint_id is not None:
        stmt = _prepared_stmt(t, "ckpt_by_id_w", _with_writes(_ckpt_by_id))
        rows = conn.execute(stmt, {**params, "id": checkpoint_id}).all()
    else:
        rows = conn.execute(
            _prepared_stmt(t, "ckpt_latest_w", _with_writes(_ckpt_latest)), params
        ).all()
    if not rows:
        return None
    row = rows[0]
    writes = pending_writes(
        (
            r.checkpoint_id,
            r.w_task_id,
            r.w_task_path,
            r.w_idx,
            r.w_channel,
            r.w_type,
            r.w_value,
            r.w_nulls,
        )
        for r in rows
        if r.w_task_id is not None
    )
    blobs = _blobs_for(conn, t, blob_keys(row))
    return row, writes, blobs


def blob_keys(row: Any) -> list[BlobKey]:
    """The blob keys a checkpoint row references.

    The ``versions`` column maps each channel the SQL must know of to its version: channels
    with a blob row, and delta channels (a version without a row is a channel without a
    value). A channel whose value is kept in the checkpoint's record maps to ``null`` there
    (its version is in the record too), so that the walks of :func:`delta_walk` find it.
    """
    return [
        (row.thread_id, row.ns_hash, key_hash(ch), str(v))
        for ch, v in json.loads(row.versions).items()
        if v is not None
    ]


def list_page(
    conn: Connection,
    t: Tables,
    q: ListQuery,
    cursor: tuple[str, str, str] | None,
    limit: int,
) -> tuple[list[Row[Any]], dict[tuple[str, str, str], list[PendingWrite]], dict[BlobKey, Any]]:
    """Up to ``limit`` checkpoint rows after ``cursor`` (newest first), with writes and blobs."""
    c = t.checkpoints.c
    stmt = select(*_ckpt_columns(t))
    if q.thread_id is not None:
        stmt = stmt.where(c.thread_id == q.thread_id)
    if q.ns_hash is not None:
        stmt = stmt.where(c.ns_hash == q.ns_hash)
    if q.checkpoint_id is not None:
        stmt = stmt.where(c.checkpoint_id == q.checkpoint_id)
    if q.before is not None:
        stmt = stmt.where(c.checkpoint_id < q.before)
    for cond in q.conditions:
        stmt = stmt.where(cond)
    if cursor is not None:
        stmt = stmt.where(tuple_(c.checkpoint_id, c.thread_id, c.ns_hash) < tuple_(*cursor))
    stmt = stmt.order_by(c.checkpoint_id.desc(), c.thread_id.desc(), c.ns_hash.desc())
    rows = list(conn.execute(stmt.limit(limit)).all())
    keys = [(r.thread_id, r.ns_hash, r.checkpoint_id) for r in rows]
    writes = _writes_for(conn, t, keys) if rows else {}
    blobs = _blobs_for(conn, t, [k for r in rows for k in blob_keys(r)]) if rows else {}
    return rows, writes, blobs


# -- the DeltaChannel ancestor walk -------------------------------------------------------------


@dataclass
class WalkResult:
    """What :func:`delta_walk` found above a checkpoint."""

    path: list[str]
    """Ancestor checkpoint ids, parent first, up to the farthest seed needed."""
    seeds: dict[str, tuple[int, BlobKey | None]]
    """channel -> (index in ``path``, blob key) of its nearest stored value; the key is None
    for a value kept in that checkpoint's record."""
    writes: dict[tuple[str, str, str], list[Any]] = field(default_factory=dict)
    blobs: dict[BlobKey, Any] = field(default_factory=dict)
    records: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """checkpoint id -> ``(type, record)`` of the checkpoints holding a seed in their record."""


def _ancestors(
    conn: Connection, t: Tables, thread_id: str, ns_hash: str, start: str
) -> list[Row[Any]]:
    """``start`` and up to :data:`WALK_PAGE` - 1 of its ancestors, nearest first: one
    recursive query."""
    c = t.checkpoints.c
    p = t.checkpoints.alias("p")
    anc = (
        select(
            c.checkpoint_id, c.parent_checkpoint_id, c.versions, literal_column("0").label("depth")
        )
        .where(c.thread_id == thread_id, c.ns_hash == ns_hash, c.checkpoint_id == start)
        .cte("anc", recursive=True)
    )
    anc = anc.union_all(
        select(p.c.checkpoint_id, p.c.parent_checkpoint_id, p.c.versions, anc.c.depth + 1).where(
            p.c.thread_id == thread_id,
            p.c.ns_hash == ns_hash,
            p.c.checkpoint_id == anc.c.parent_checkpoint_id,
            anc.c.depth < WALK_PAGE - 1,
        )
    )
    return list(conn.execute(select(anc).order_by(anc.c.depth)).all())


def _walk(
    conn: Connection,
    t: Tables,
    thread_id: str,
    ns_hash: str,
    start: str | None,
    channels: Sequence[str],
) -> WalkResult:
    """Walk up from ``start`` until each channel meets a stored value (or the root)."""
    path: list[str] = []
    seeds: dict[str, tuple[int, BlobKey | None]] = {}
    remaining = list(dict.fromkeys(channels))
    hashes = {ch: key_hash(ch) for ch in remaining}
    kinds: dict[BlobKey, str] = {}
    while start is not None and remaining:
        page = _ancestors(conn, t, thread_id, ns_hash, start)
        if not page:
            break
        versions = [json.loads(r.versions) for r in page]
        wanted = list(
            dict.fromkeys(
                (thread_id, ns_hash, hashes[ch], str(v[ch]))
                for v in versions
                for ch in remaining
                if v.get(ch) is not None
            )
        )
        found: dict[BlobKey, Any] = {}
        _fetch_blobs(conn, t, [k for k in wanted if k not in kinds], found, True)
        kinds.update((k, r.kind) for k, r in found.items())
        for row, v in zip(page, versions, strict=True):
            path.append(row.checkpoint_id)
            for ch in list(remaining):
                if ch not in v:
                    continue
                if v[ch] is None:  # a value in the record (see blob_keys)
                    seeds[ch] = (len(path) - 1, None)
                    remaining.remove(ch)
                    continue
                key = (thread_id, ns_hash, hashes[ch], str(v[ch]))
                if kinds.get(key, EMPTY) != EMPTY:
                    seeds[ch] = (len(path) - 1, key)
                    remaining.remove(ch)
            if not remaining:
                break
        start = page[-1].parent_checkpoint_id if len(page) >= WALK_PAGE and remaining else None
    if not remaining and seeds:
        path = path[: max(i for i, _ in seeds.values()) + 1]
    return WalkResult(path, seeds)


def _target(
    conn: Connection, t: Tables, thread_id: str, ns_hash: str, checkpoint_id: str | None
) -> Any:
    c = t.checkpoints.c
    q = select(c.checkpoint_id, c.parent_checkpoint_id, c.versions, c.metadata_type, c.metadata)
    q = q.where(c.thread_id == thread_id, c.ns_hash == ns_hash)
    if checkpoint_id is not None:
        return conn.execute(q.where(c.checkpoint_id == checkpoint_id)).first()
    return conn.execute(q.order_by(c.checkpoint_id.desc()).limit(1)).first()


def delta_walk(
    conn: Connection,
    t: Tables,
    thread_id: str,
    ns_hash: str,
    checkpoint_id: str | None,
    channels: Sequence[str],
) -> WalkResult | None:
    """Everything ``get_delta_channel_history`` needs, in one transaction: the parent chain
    (recursive queries of up to :data:`WALK_PAGE` ancestors), the writes of the requested
    channels on it, and the seed values. None if the checkpoint does not exist."""
    target = _target(conn, t, thread_id, ns_hash, checkpoint_id)
    if target is None:
        return None
    result = _walk(conn, t, thread_id, ns_hash, target.parent_checkpoint_id, channels)
    w = t.checkpoint_writes.c
    for part in _chunks(result.path):
        q = select(
            w.checkpoint_id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.value, w.nulls
        )
        q = q.where(
            w.thread_id == thread_id,
            w.ns_hash == ns_hash,
            w.checkpoint_id.in_(part),
            or_(w.channel.in_(list(channels)), w.nulls.is_not(None)),
        )
        for r in pending_writes(conn.execute(q).all()):
            if r.channel in channels:
                result.writes.setdefault((thread_id, ns_hash, r.checkpoint_id), []).append(r)
    result.blobs = _blobs_for(conn, t, [k for _, k in result.seeds.values() if k is not None])
    inline = sorted({result.path[i] for i, k in result.seeds.values() if k is None})
    c = t.checkpoints.c
    for part in _chunks(inline):
        q = select(c.checkpoint_id, c.type, c.checkpoint).where(
            c.thread_id == thread_id, c.ns_hash == ns_hash, c.checkpoint_id.in_(part)
        )
        result.records.update((r.checkpoint_id, (r.type, r.checkpoint)) for r in conn.execute(q))
    return result


# -- deleting, copying, pruning ------------------------------------------------------------


def delete_threads(conn: Connection, t: Tables, thread_ids: Sequence[str]) -> None:
    """Delete every checkpoint, blob, write and thread row of the threads."""
    for part in _chunks(list(thread_ids)):
        for table in (
            t.checkpoint_writes,
            t.checkpoint_blobs,
            t.checkpoints,
            t.checkpoint_threads,
        ):
            conn.execute(delete(table).where(table.c.thread_id.in_(part)))


def _gc_blobs(conn: Connection, t: Tables, thread_id: str, ns_hash: str) -> None:
    """Delete the blobs of ``(thread, ns)`` that no remaining checkpoint needs."""
    c, b = t.checkpoints.c, t.checkpoint_blobs.c
    keep: set[tuple[str, str]] = set()
    for (versions,) in conn.execute(
        select(c.versions).where(c.thread_id == thread_id, c.ns_hash == ns_hash)
    ):
        keep.update(
            (key_hash(ch), str(v)) for ch, v in json.loads(versions).items() if v is not None
        )
    base: dict[tuple[str, str], tuple[str, str] | None] = {}
    for r in conn.execute(
        select(b.channel_hash, b.version, b.kind, b.base_version).where(
            b.thread_id == thread_id, b.ns_hash == ns_hash
        )
    ):
        base[(r.channel_hash, r.version)] = (
            (r.channel_hash, r.base_version) if r.kind == DELTA else None
        )
    todo = [k for k in keep if k in base]
    while todo:
        parent = base.get(todo.pop())
        if parent is not None and parent not in keep:
            keep.add(parent)
            todo.append(parent)
    drop = [k for k in base if k not in keep]
    for part in _chunks(drop):
        conn.execute(
            delete(t.checkpoint_blobs).where(
                b.thread_id == thread_id,
                b.ns_hash == ns_hash,
                _exact_in((b.channel_hash, b.version), part),
            )
        )


def _drop_empty_threads(conn: Connection, t: Tables, thread_ids: Iterable[str]) -> None:
    c, th = t.checkpoints.c, t.checkpoint_threads
    for part in _chunks(list(dict.fromkeys(thread_ids))):
        conn.execute(
            delete(th).where(
                th.c.thread_id.in_(part),
                ~exists(select(c.thread_id).where(c.thread_id == th.c.thread_id)),
            )
        )


def delete_for_runs(conn: Connection, t: Tables, run_ids: Sequence[str]) -> None:
    """Delete the checkpoints made by the runs, their writes, and blobs nobody needs any more."""
    c, w = t.checkpoints.c, t.checkpoint_writes.c
    victims: list[tuple[str, str, str]] = []
    for part in _chunks(list(run_ids)):
        victims += [
            (r.thread_id, r.ns_hash, r.checkpoint_id)
            for r in conn.execute(
                select(c.thread_id, c.ns_hash, c.checkpoint_id).where(c.run_id.in_(part))
            )
        ]
    for part in _chunks(victims):
        conn.execute(
            delete(t.checkpoints).where(_exact_in((c.thread_id, c.ns_hash, c.checkpoint_id), part))
        )
        conn.execute(
            delete(t.checkpoint_writes).where(
                _exact_in((w.thread_id, w.ns_hash, w.checkpoint_id), part)
            )
        )
    scopes = dict.fromkeys((v[0], v[1]) for v in victims)
    for thread_id, ns_hash in scopes:
        _gc_blobs(conn, t, thread_id, ns_hash)
    _drop_empty_threads(conn, t, [s[0] for s in scopes])


def prune_keep_latest(
    conn: Connection,
    t: Tables,
    thread_id: str,
    delta_channels: Callable[[Row[Any]], Sequence[str]],
) -> None:
    """Keep each namespace's latest checkpoint, and the ancestors (with their writes) that
    its delta channels need back to their nearest stored values; delete the rest.

    ``delta_channels(row)`` names the delta channels of a checkpoint row (read from its
    metadata, which only the saver can decode).
    """
    c, w = t.checkpoints.c, t.checkpoint_writes.c
    nss = conn.execute(
        select(c.ns_hash).where(c.thread_id == thread_id).group_by(c.ns_hash)
    ).scalars()
    for ns_hash in list(nss):
        latest = _target(conn, t, thread_id, ns_hash, None)
        assert latest is not None
        keep = [latest.checkpoint_id]
        versions = json.loads(latest.versions)
        # (a value kept in the record, ``null`` in the column, needs no ancestor)
        wanted = [ch for ch in delta_channels(latest) if versions.get(ch) is not None]
        if wanted:
            stored = _blobs_for(
                conn, t, [(thread_id, ns_hash, key_hash(ch), str(versions[ch])) for ch in wanted]
            )
            empty = [
                ch
                for ch in wanted
                if stored.get((thread_id, ns_hash, key_hash(ch), str(versions[ch]))) is None
                or stored[(thread_id, ns_hash, key_hash(ch), str(versions[ch]))].kind == EMPTY
            ]
            if empty:
                keep += _walk(conn, t, thread_id, ns_hash, latest.parent_checkpoint_id, empty).path
        scope = (c.thread_id == thread_id, c.ns_hash == ns_hash)
        older = c.checkpoint_id < latest.checkpoint_id
        for part in _chunks(keep):
            older = and_(older, c.checkpoint_id.notin_(part))
        conn.execute(delete(t.checkpoints).where(*scope, older))
        wolder = w.checkpoint_id < latest.checkpoint_id
        for part in _chunks(keep):
            wolder = and_(wolder, w.checkpoint_id.notin_(part))
        conn.execute(
            delete(t.checkpoint_writes).where(
                w.thread_id == thread_id, w.ns_hash == ns_hash, wolder
            )
        )
        _gc_blobs(conn, t, thread_id, ns_hash)


def copy_thread(conn: Connection, t: Tables, source: str, target: str, now: int) -> bool:
    """Copy every row of ``source`` to ``target`` (ids unchanged). False if ``source`` has no
    checkpoints; raises ValueError if ``target`` already has some."""
    c = t.checkpoints.c
    if conn.execute(select(c.thread_id).where(c.thread_id == target).limit(1)).first():
        raise ValueError(f"target_thread_id: thread {target!r} already has checkpoints")
    if not conn.execute(select(c.thread_id).where(c.thread_id == source).limit(1)).first():
        return False
    for table in (t.checkpoints, t.checkpoint_blobs, t.checkpoint_writes):
        names = [col.name for col in table.columns]
        cols = [
            literal(target, table.c.thread_id.type).label("thread_id")
            if n == "thread_id"
            else table.c[n]
            for n in names
        ]
        conn.execute(
            table.insert().from_select(names, select(*cols).where(table.c.thread_id == source))
        )
    th = t.checkpoint_threads
    conn.execute(
        th.insert().from_select(
            ["thread_id", "created_at", "updated_at", "metadata"],
            select(
                literal(target, th.c.thread_id.type),
                literal(now),
                literal(now),
                th.c.metadata,
            ).where(th.c.thread_id == source),
        )
    )
    return True


# -- threads --------------------------------------------------------------------------------


def list_threads(
    conn: Connection,
    t: Tables,
    conditions: Sequence[ColumnElement[bool]],
    limit: int | None,
    offset: int,
) -> list[ThreadRow]:
    """Threads, most recently updated first, with their checkpoint counts (no blob is read)."""
    th, c = t.checkpoint_threads.c, t.checkpoints.c
    count = (
        select(func.count())
        .select_from(t.checkpoints)
        .where(c.thread_id == th.thread_id)
        .scalar_subquery()
    )
    q = select(th.thread_id, th.created_at, th.updated_at, th.metadata, count.label("n"))
    for cond in conditions:
        q = q.where(cond)
    q = q.order_by(th.updated_at.desc(), th.thread_id).offset(offset)
    if limit is not None:
        q = q.limit(limit)
    return [
        ThreadRow(r.thread_id, r.created_at, r.updated_at, int(r.n), r.metadata)
        for r in conn.execute(q)
    ]


def delete_idle_threads(conn: Connection, t: Tables, cutoff: int, limit: int) -> list[str]:
    """Delete up to ``limit`` threads not updated since ``cutoff`` (ms); return their ids."""
    th = t.checkpoint_threads.c
    ids = list(
        conn.execute(
            select(th.thread_id).where(th.updated_at < cutoff).order_by(th.updated_at).limit(limit)
        ).scalars()
    )
    if ids:
        delete_threads(conn, t, ids)
    return ids
