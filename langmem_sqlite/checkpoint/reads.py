"""The SQL of reads: a checkpoint with its writes and values, pages of `list()`, and the
walk up a delta channel's ancestors (`get_delta_channel_history`, `prune`). The functions
take a [`Unit`][langmem_sqlite.engine.Unit] and decode nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, literal_column, select, tuple_
from sqlalchemy.sql.elements import ColumnElement

from ..engine.schema import Tables
from ..engine.unit import Unit
from .storage import DELTA, key_hash

WALK_PAGE = 900
"""Rows per recursive query (MySQL 8 stops recursive CTEs at 1000 by default)."""
CHUNK = 200
"""Keys per `IN (...)` list (SQLite allows 32766 bound variables)."""

BlobKey = tuple[str, str, str, str]
"""`(thread_id, ns_hash, channel_hash, version)`."""


@dataclass
class ListQuery:
    """What `list_page` selects (`None` = no condition)."""

    thread_id: str | None = None
    ns_hash: str | None = None
    checkpoint_id: str | None = None
    before: str | None = None
    conditions: list[ColumnElement[bool]] = field(default_factory=list)


class PendingWrite(NamedTuple):
    checkpoint_id: str
    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    value: Any


def chunks(items: Sequence[Any], n: int = CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _scope_groups(keys: Iterable[tuple[Any, ...]]) -> dict[tuple[str, str], list[Any]]:
    groups: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for k in dict.fromkeys(keys):
        groups.setdefault((k[0], k[1]), []).append(k)
    return groups


def _blob_keys(row: Any) -> list[BlobKey]:
    """The blob keys a checkpoint row references (its `versions` column)."""
    versions = json.loads(row.versions).items()
    return [(row.thread_id, row.ns_hash, key_hash(ch), str(v)) for ch, v in versions]


def _checkpoint_columns(t: Tables) -> list[Any]:
    skip = ("metadata_json", "run_id", "created_at")
    return [c for c in t.checkpoints.columns if c.name not in skip]


def _writes_for(
    unit: Unit, t: Tables, keys: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], list[PendingWrite]]:
    """Pending writes of the `(thread_id, ns_hash, checkpoint_id)` keys, unsorted."""
    w = t.checkpoint_writes.c
    cols = (w.checkpoint_id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.value)
    out: dict[tuple[str, str, str], list[PendingWrite]] = {}
    for (tid, nsh), group in _scope_groups(keys).items():
        for part in chunks(group):
            ids = [k[2] for k in part]
            q = select(*cols).where(w.thread_id == tid, w.ns_hash == nsh, w.checkpoint_id.in_(ids))
            for r in unit.execute(q).all():
                out.setdefault((tid, nsh, r.checkpoint_id), []).append(PendingWrite(*r))
    return out


def _blobs_stmt(t: Tables, keys_only: bool) -> Any:
    """The blob rows of the keys `(:t, :n, :ch, :v)` (channels and versions as two `IN` lists,
    which may add a few rows) and, unless `keys_only`, the rows their deltas are built on, in
    one recursive query carrying the values (a row two chains share comes once per chain)."""
    b, p = t.checkpoint_blobs, t.checkpoint_blobs.alias("p")
    names = [col.name for col in b.columns][2:]  # the key within (thread, namespace), the row
    start = select(*[b.c[n] for n in (names[:2] if keys_only else names)]).where(
        b.c.thread_id == bindparam("t"),
        b.c.ns_hash == bindparam("n"),
        b.c.channel_hash.in_(bindparam("ch", expanding=True)),
        b.c.version.in_(bindparam("v", expanding=True)),
    )
    if keys_only:
        return start
    chain = start.add_columns(literal_column("0").label("hops")).cte("chain", recursive=True)
    chain = chain.union_all(
        select(*[p.c[n] for n in names], chain.c.hops + 1).where(
            p.c.thread_id == bindparam("t"),
            p.c.ns_hash == bindparam("n"),
            p.c.channel_hash == chain.c.channel_hash,
            p.c.version == chain.c.base_version,
            chain.c.kind == DELTA,
            chain.c.hops < WALK_PAGE - 1,
        )
    )
    return select(*[chain.c[n] for n in names])


def blobs_for(
    unit: Unit, t: Tables, keys: Iterable[BlobKey], keys_only: bool = False
) -> dict[BlobKey, Any]:
    """Blob rows by key, plus (unless `keys_only`: whether they exist, not their values) every
    row the deltas among them are built on; a base that no longer exists is left out (the
    `read_value` then raises)."""
    into: dict[BlobKey, Any] = {}
    stmt = unit.statement((t.key, "ckpt.blobs", keys_only), partial(_blobs_stmt, t, keys_only))
    for (tid, nsh), group in _scope_groups(keys).items():
        for part in chunks(group):
            ch = list(dict.fromkeys(k[2] for k in part))
            params = {"t": tid, "n": nsh, "ch": ch, "v": list(dict.fromkeys(k[3] for k in part))}
            for r in unit.execute(stmt, params).all():
                into[(tid, nsh, r.channel_hash, r.version)] = r
    return into


def _checkpoint_stmt(t: Tables, by_id: bool, with_writes: bool) -> Any:
    """The checkpoint `:id` of `(:t, :n)`, or (not `by_id`) its latest; `with_writes`: once per
    pending write (the write's columns last), or once with NULLs."""
    c = t.checkpoints.c
    q = select(*_checkpoint_columns(t)).where(
        c.thread_id == bindparam("t"), c.ns_hash == bindparam("n")
    )
    if by_id:
        q = q.where(c.checkpoint_id == bindparam("id"))
    else:
        q = q.order_by(c.checkpoint_id.desc()).limit(1)
    if not with_writes:
        return q
    sub, w = q.subquery(), t.checkpoint_writes.c
    on = and_(
        w.thread_id == sub.c.thread_id,
        w.ns_hash == sub.c.ns_hash,
        w.checkpoint_id == sub.c.checkpoint_id,
    )
    wcols = [
        col.label(f"w_{col.name}")
        for col in (w.task_id, w.task_path, w.idx, w.channel, w.type, w.value)
    ]
    return select(*sub.c, *wcols).select_from(sub.outerjoin(t.checkpoint_writes, on))


def _checkpoint_rows(
    unit: Unit, t: Tables, thread_id: str, ns_hash: str, cid: str | None, with_writes: bool
) -> Any:
    by_id = cid is not None
    key = (t.key, "ckpt.read", by_id, with_writes)
    stmt = unit.statement(key, partial(_checkpoint_stmt, t, by_id, with_writes))
    params = {"t": thread_id, "n": ns_hash}
    return unit.execute(stmt, {**params, "id": cid} if by_id else params)


def read_checkpoint(
    unit: Unit,
    t: Tables,
    thread_id: str,
    ns_hash: str,
    checkpoint_id: str | None,
) -> tuple[Any, list[PendingWrite], dict[BlobKey, Any]] | None:
    """A checkpoint row (the latest when `checkpoint_id` is None), its writes, and its blobs
    (with the rows their deltas are built on): two statements."""
    rows = _checkpoint_rows(unit, t, thread_id, ns_hash, checkpoint_id, True).all()
    if not rows:
        return None
    row = rows[0]
    writes = [PendingWrite(row.checkpoint_id, *r[-6:]) for r in rows if r.w_task_id is not None]
    return row, writes, blobs_for(unit, t, _blob_keys(row))


def list_page(
    unit: Unit,
    t: Tables,
    q: ListQuery,
    cursor: tuple[str, str, str] | None,
    limit: int,
) -> tuple[list[Any], dict[tuple[str, str, str], list[PendingWrite]], dict[BlobKey, Any]]:
    """Up to `limit` checkpoint rows after `cursor` (newest first), with writes and blobs."""
    c = t.checkpoints.c
    stmt = select(*_checkpoint_columns(t))
    for col, value in ((c.thread_id, q.thread_id), (c.ns_hash, q.ns_hash)):
        if value is not None:
            stmt = stmt.where(col == value)
    if q.checkpoint_id is not None:
        stmt = stmt.where(c.checkpoint_id == q.checkpoint_id)
    if q.before is not None:
        stmt = stmt.where(c.checkpoint_id < q.before)
    stmt = stmt.where(*q.conditions)
    if cursor is not None:
        stmt = stmt.where(tuple_(c.checkpoint_id, c.thread_id, c.ns_hash) < tuple_(*cursor))
    stmt = stmt.order_by(c.checkpoint_id.desc(), c.thread_id.desc(), c.ns_hash.desc())
    rows = list(unit.execute(stmt.limit(limit)).all())
    keys = [(r.thread_id, r.ns_hash, r.checkpoint_id) for r in rows]
    writes = _writes_for(unit, t, keys) if rows else {}
    blobs = blobs_for(unit, t, [k for r in rows for k in _blob_keys(r)]) if rows else {}
    return rows, writes, blobs


@dataclass
class WalkResult:
    """What `delta_walk` found above a checkpoint."""

    path: list[str]
    """Ancestor checkpoint ids, parent first, up to the farthest seed needed."""
    seeds: dict[str, tuple[int, BlobKey]]
    """channel -> (index in `path`, blob key) of its nearest stored value."""
    writes: dict[tuple[str, str, str], list[Any]] = field(default_factory=dict)
    blobs: dict[BlobKey, Any] = field(default_factory=dict)


def _ancestors(unit: Unit, t: Tables, thread_id: str, ns_hash: str, start: str) -> list[Any]:
    """`start` and up to `WALK_PAGE` - 1 of its ancestors, nearest first: one recursive query."""
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
    return list(unit.execute(select(anc).order_by(anc.c.depth)).all())


def walk(
    unit: Unit,
    t: Tables,
    thread_id: str,
    ns_hash: str,
    start: str | None,
    channels: Sequence[str],
) -> WalkResult:
    """Walk up from `start` until each channel meets a stored value (or the root)."""
    path: list[str] = []
    seeds: dict[str, tuple[int, BlobKey]] = {}
    remaining = list(dict.fromkeys(channels))
    hashes = {ch: key_hash(ch) for ch in remaining}
    stored: dict[BlobKey, Any] = {}
    while start is not None and remaining:
        page = _ancestors(unit, t, thread_id, ns_hash, start)
        if not page:
            break
        versions = [json.loads(r.versions) for r in page]
        wanted = {
            (thread_id, ns_hash, hashes[ch], str(v[ch]))
            for v in versions
            for ch in remaining
            if ch in v
        }
        stored.update(blobs_for(unit, t, [k for k in wanted if k not in stored], True))
        for row, v in zip(page, versions, strict=True):
            path.append(row.checkpoint_id)
            for ch in list(remaining):
                if ch not in v:
                    continue
                key = (thread_id, ns_hash, hashes[ch], str(v[ch]))
                if key in stored:
                    seeds[ch] = (len(path) - 1, key)
                    remaining.remove(ch)
            if not remaining:
                break
        start = page[-1].parent_checkpoint_id if len(page) >= WALK_PAGE and remaining else None
    if not remaining and seeds:
        path = path[: max(i for i, _ in seeds.values()) + 1]
    return WalkResult(path, seeds)


def find_checkpoint(
    unit: Unit, t: Tables, thread_id: str, ns_hash: str, checkpoint_id: str | None
) -> Any:
    """A checkpoint's row (the latest of `(thread, namespace)` without `checkpoint_id`), or None."""
    return _checkpoint_rows(unit, t, thread_id, ns_hash, checkpoint_id, False).first()


def delta_walk(
    unit: Unit,
    t: Tables,
    thread_id: str,
    ns_hash: str,
    checkpoint_id: str | None,
    channels: Sequence[str],
) -> WalkResult | None:
    """Everything `get_delta_channel_history` needs, in one transaction: the parent chain
    (`walk`), its writes, and the seed values; None if the checkpoint does not exist."""
    target = find_checkpoint(unit, t, thread_id, ns_hash, checkpoint_id)
    if target is None:
        return None
    result = walk(unit, t, thread_id, ns_hash, target.parent_checkpoint_id, channels)
    result.writes = _writes_for(unit, t, [(thread_id, ns_hash, cid) for cid in result.path])
    result.blobs = blobs_for(unit, t, [k for _, k in result.seeds.values()])
    return result
