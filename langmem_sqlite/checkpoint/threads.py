"""The SQL of threads: listing them, copying one, and what goes: deleted threads, the
checkpoints of runs, pruned ancestors, idle threads (and the values no remaining checkpoint
needs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Table, and_, delete, exists, func, literal, or_, select
from sqlalchemy.sql.elements import ColumnElement

from ..engine.schema import Tables
from ..engine.unit import Unit
from .reads import blobs_for, chunks, find_checkpoint, walk
from .records import ThreadInfo
from .storage import DELTA, key_hash


def _exact_in(cols: Sequence[Any], keys: Sequence[tuple[Any, ...]]) -> ColumnElement[bool]:
    """`(cols) IN keys` as an OR of `c1 = ? AND ... AND cN IN (...)` per key prefix: a
    row-value `IN` list makes SQLite scan the table, this form uses the index everywhere."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for k in keys:
        groups.setdefault(tuple(k[:-1]), []).append(k[-1])
    terms = [
        and_(*[c == v for c, v in zip(cols[:-1], prefix, strict=True)], cols[-1].in_(last))
        for prefix, last in groups.items()
    ]
    return terms[0] if len(terms) == 1 else or_(*terms)


def _thread_tables(t: Tables) -> tuple[Table, ...]:
    return (t.checkpoints, t.checkpoint_blobs, t.checkpoint_writes, t.checkpoint_threads)


def delete_threads(unit: Unit, t: Tables, thread_ids: Sequence[str]) -> None:
    """Delete every checkpoint, blob, write and thread row of the threads."""
    for part in chunks(list(thread_ids)):
        for table in _thread_tables(t):
            unit.execute(delete(table).where(table.c.thread_id.in_(part)))


def _gc_blobs(unit: Unit, t: Tables, thread_id: str, ns_hash: str) -> None:
    """Delete the blobs of `(thread, ns)` that no remaining checkpoint needs."""
    c, b = t.checkpoints.c, t.checkpoint_blobs.c
    keep: set[tuple[str, str]] = set()
    q = select(c.versions).where(c.thread_id == thread_id, c.ns_hash == ns_hash)
    for versions in unit.execute(q).scalars():
        keep.update((key_hash(ch), str(v)) for ch, v in json.loads(versions).items())
    base: dict[tuple[str, str], tuple[str, str] | None] = {}
    scope = (b.thread_id == thread_id, b.ns_hash == ns_hash)
    for r in unit.execute(select(b.channel_hash, b.version, b.kind, b.base_version).where(*scope)):
        delta = r.kind == DELTA
        base[(r.channel_hash, r.version)] = (r.channel_hash, r.base_version) if delta else None
    todo = [k for k in keep if k in base]
    while todo:
        parent = base.get(todo.pop())
        if parent is not None and parent not in keep:
            keep.add(parent)
            todo.append(parent)
    drop = [k for k in base if k not in keep]
    for part in chunks(drop):
        gone = _exact_in((b.channel_hash, b.version), part)
        unit.execute(delete(t.checkpoint_blobs).where(*scope, gone))


def delete_for_runs(unit: Unit, t: Tables, run_ids: Sequence[str]) -> None:
    """Delete the checkpoints made by the runs, their writes, and blobs nobody needs any more."""
    c = t.checkpoints.c
    victims: list[tuple[str, str, str]] = []
    for part in chunks(list(run_ids)):
        q = select(c.thread_id, c.ns_hash, c.checkpoint_id).where(c.run_id.in_(part))
        victims += [(r.thread_id, r.ns_hash, r.checkpoint_id) for r in unit.execute(q)]
    for part in chunks(victims):
        for table in (t.checkpoints, t.checkpoint_writes):
            key = (table.c.thread_id, table.c.ns_hash, table.c.checkpoint_id)
            unit.execute(delete(table).where(_exact_in(key, part)))
    scopes = dict.fromkeys((v[0], v[1]) for v in victims)
    for thread_id, ns_hash in scopes:
        _gc_blobs(unit, t, thread_id, ns_hash)
    th = t.checkpoint_threads  # the threads left without checkpoints
    empty = ~exists(select(c.thread_id).where(c.thread_id == th.c.thread_id))
    for part in chunks(list(dict.fromkeys(s[0] for s in scopes))):
        unit.execute(delete(th).where(th.c.thread_id.in_(part), empty))


def prune_keep_latest(
    unit: Unit,
    t: Tables,
    thread_id: str,
    delta_channels: Callable[[Any], Sequence[str]],
) -> None:
    """Keep each namespace's latest checkpoint, and the ancestors (with their writes) that its
    delta channels, named by `delta_channels(row)` (from the metadata, which only the saver
    decodes), need back to their nearest stored values; delete the rest."""
    c = t.checkpoints.c
    q = select(c.ns_hash).where(c.thread_id == thread_id).group_by(c.ns_hash)
    for ns_hash in unit.execute(q).scalars().all():
        latest = find_checkpoint(unit, t, thread_id, ns_hash, None)
        assert latest is not None
        keep = [latest.checkpoint_id]
        versions = json.loads(latest.versions)
        wanted = {
            ch: (thread_id, ns_hash, key_hash(ch), str(versions[ch]))
            for ch in delta_channels(latest)
            if ch in versions
        }
        stored = blobs_for(unit, t, list(wanted.values())) if wanted else {}
        empty = [ch for ch, k in wanted.items() if k not in stored]
        if empty:
            keep += walk(unit, t, thread_id, ns_hash, latest.parent_checkpoint_id, empty).path
        for table in (t.checkpoints, t.checkpoint_writes):
            col = table.c
            older = col.checkpoint_id < latest.checkpoint_id
            for part in chunks(keep):
                older = and_(older, col.checkpoint_id.notin_(part))
            scope = (col.thread_id == thread_id, col.ns_hash == ns_hash)
            unit.execute(delete(table).where(*scope, older))
        _gc_blobs(unit, t, thread_id, ns_hash)


def copy_thread(unit: Unit, t: Tables, source: str, target: str, now: int) -> None:
    """Copy every row of `source` to `target` (ids unchanged); raises ValueError if `target`
    already has checkpoints."""
    c = t.checkpoints.c
    if unit.execute(select(c.thread_id).where(c.thread_id == target).limit(1)).first():
        raise ValueError(f"target_thread_id: thread {target!r} already has checkpoints")
    for table in _thread_tables(t):
        new = {"thread_id": literal(target, table.c.thread_id.type)}
        if table is t.checkpoint_threads:  # a new thread: created and updated now
            new |= {"created_at": literal(now), "updated_at": literal(now)}
        names = [col.name for col in table.columns]
        cols = [new[n].label(n) if n in new else table.c[n] for n in names]
        unit.execute(
            table.insert().from_select(names, select(*cols).where(table.c.thread_id == source))
        )


def list_threads(
    unit: Unit,
    t: Tables,
    conditions: Sequence[ColumnElement[bool]],
    limit: int | None,
    offset: int,
) -> list[ThreadInfo]:
    """Threads, most recently updated first, with their checkpoint counts (no blob is read)."""
    th, c = t.checkpoint_threads.c, t.checkpoints.c
    count = select(func.count()).where(c.thread_id == th.thread_id).scalar_subquery()
    q = select(th.thread_id, th.created_at, th.updated_at, th.metadata, count.label("n"))
    q = q.where(*conditions).order_by(th.updated_at.desc(), th.thread_id)
    q = q.offset(offset).limit(limit)  # no LIMIT when `limit` is None
    return [
        ThreadInfo(r.thread_id, r.created_at, r.updated_at, int(r.n), r.metadata)
        for r in unit.execute(q)
    ]


def delete_idle_threads(unit: Unit, t: Tables, cutoff: int, limit: int) -> list[str]:
    """Delete up to `limit` threads not updated since `cutoff` (ms); return their ids."""
    th = t.checkpoint_threads.c
    q = select(th.thread_id).where(th.updated_at < cutoff).order_by(th.updated_at).limit(limit)
    ids = list(unit.execute(q).scalars())
    if ids:
        delete_threads(unit, t, ids)
    return ids
