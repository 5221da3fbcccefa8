"""The operations of [`SQLSaver`][langmem_sqlite.SQLSaver], each a
[`Plan`][langmem_sqlite.engine.Plan] that checks its arguments, encodes values outside any
transaction, and yields the steps that run the SQL (`puts`, `reads`, `threads`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy import exc

from .. import clock
from ..engine import Database, Plan, Step
from ..engine.migrations import schema_plan
from ..engine.schema import Tables
from ..validation import check_id, check_number, check_positive, check_text
from . import puts, reads, threads
from .codec import dumps, loads
from .meta import check_filter, json_safe, matches, prefilter
from .reads import ListQuery
from .records import (
    DELETE_BATCH,
    MAX_IDLE_DAYS,
    ThreadInfo,
    check_writes,
    checked_id,
    ckpt_config,
    delta_names,
    put_rows,
    scope,
)
from .storage import DELTA, ListCache, key_hash, read_value


class Saver(Protocol):
    """What the plans read of an [`SQLSaver`][langmem_sqlite.SQLSaver]."""

    db: Database
    tables: Tables
    serde: SerializerProtocol
    lists: ListCache
    page_size: int
    searchable_metadata: bool
    encrypted_only: bool


class Pager:
    """The state of one `list()` call: which page to read next and how many items remain."""

    def __init__(
        self,
        saver: Saver,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> None:
        self.saver, self.filter, self.left = saver, check_filter(filter), limit
        if limit is not None:
            check_positive(limit, "limit", allow_zero=True)
        self.query = q = ListQuery()
        if config is not None:
            s = scope(config)
            q.thread_id, q.checkpoint_id = s.thread_id, s.checkpoint_id
            if config["configurable"].get("checkpoint_ns") is not None:
                q.ns_hash = s.ns_hash
        if before is not None:
            conf = before.get("configurable") if isinstance(before, Mapping) else None
            cid = conf.get("checkpoint_id") if isinstance(conf, Mapping) else None
            if not cid:
                raise ValueError("before: expected a config with configurable.checkpoint_id")
            q.before = check_id(cid, "before.configurable.checkpoint_id")
        if saver.searchable_metadata:
            cols = saver.tables.checkpoints.c
            q.conditions = prefilter(cols.metadata_json, self.filter, saver.db.rules)
        self.cursor: tuple[str, str, str] | None = None
        self.done = limit == 0

    def plan(self) -> Plan[list[CheckpointTuple]]:
        """Read the next page (what of it is within `limit`)."""
        size = self.saver.page_size
        if self.left is not None and not self.filter:
            size = min(size, self.left)
        rows, writes, blobs = yield from _op(
            self.saver, reads.list_page, self.query, self.cursor, size, single=True
        )
        if len(rows) < size:
            self.done = True
        else:
            last = rows[-1]
            self.cursor = (last.checkpoint_id, last.thread_id, last.ns_hash)
        out = []
        for row in rows:
            metadata = _loads(self.saver, row.metadata_type, row.metadata)
            if self.filter and not matches(metadata, self.filter):
                continue
            key = (row.thread_id, row.ns_hash, row.checkpoint_id)
            out.append(_tuple(self.saver, row, metadata, writes.get(key, []), blobs, False))
        if self.left is not None:
            out = out[: self.left]
            self.left -= len(out)
            self.done = self.done or self.left <= 0
        return out


def setup(saver: Saver) -> Plan[None]:
    """Create the tables, once per process and set of tables (SQLite files first get the
    saver's file settings, where the file is not busy)."""
    key = ("checkpointer", saver.tables.key)
    if key not in saver.db.ready:
        file_setup = saver.db.rules.checkpoint_file_setup(saver.db.url)
        if file_setup is not None and not saver.db.reading:
            with contextlib.suppress(exc.DBAPIError):  # a busy file keeps its settings
                yield Step(file_setup, (), own_transaction=True)
        yield from schema_plan(saver.db, saver.tables)
        with saver.db.lock:
            saver.db.ready.add(key)


def _op(saver: Saver, fn: Any, *args: Any, write: bool = False, single: bool = False) -> Plan[Any]:
    """Run `fn(unit, tables, *args)` in a transaction (`single`: `fn` makes one statement or
    reads only rows never updated in place, and runs in autocommit where the rules allow it)."""
    yield from setup(saver)
    single = single and saver.db.rules.checkpoint_single_autocommits
    return (yield Step(fn, (saver.tables, *args), write=write, single=single))


def _loads(saver: Saver, type_: str, data: Any) -> Any:
    return loads(saver.serde, type_, data, encrypted_only=saver.encrypted_only)


def _tuple(
    saver: Saver,
    row: Any,
    metadata: Any,
    writes: Sequence[Any],
    blobs: Mapping[tuple[str, ...], Any],
    remember: bool,
) -> CheckpointTuple:
    """The checkpoint tuple of `row`, every value decoded afresh. `remember`: note
    the lists read in `lists`, so that the next `put` stores them as deltas."""
    versions = json.loads(row.versions)
    ns = row.checkpoint_ns
    values: dict[str, Any] = {}
    remember = remember and saver.lists.size > 0
    for ch, v in versions.items():  # the channels with rows (see split_versions)
        key = (row.thread_id, row.ns_hash, key_hash(ch), str(v))
        if key in blobs:
            values[ch], state = read_value(partial(_loads, saver), blobs, key, remember)
            if state is not None:
                saver.lists.put((row.thread_id, ns, ch), state)
    checkpoint = _loads(saver, row.type, row.checkpoint)
    versions.update(checkpoint.pop("channel_versions", None) or {})  # see split_versions
    checkpoint.update(id=row.checkpoint_id, channel_values=values, channel_versions=versions)
    ordered = sorted(writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
    parent = row.parent_checkpoint_id
    return CheckpointTuple(
        config=ckpt_config(row.thread_id, ns, row.checkpoint_id),
        checkpoint=checkpoint,
        metadata=metadata,
        parent_config=ckpt_config(row.thread_id, ns, parent) if parent else None,
        pending_writes=[(w.task_id, w.channel, _loads(saver, w.type, w.value)) for w in ordered],
    )


def get_tuple(saver: Saver, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
    s = scope(config)
    found = yield from _op(
        saver, reads.read_checkpoint, s.thread_id, s.ns_hash, s.checkpoint_id, single=True
    )
    if found is None:
        return None
    row, writes, blobs = found
    metadata = _loads(saver, row.metadata_type, row.metadata)
    return _tuple(saver, row, metadata, writes, blobs, True)


def put(
    saver: Saver,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Plan[RunnableConfig]:
    s = scope(config)
    if not isinstance(checkpoint, Mapping):
        raise TypeError("checkpoint: expected a Checkpoint mapping")
    md = get_checkpoint_metadata(config, metadata)
    # What the rows store is checked once they are built, before anything is written; also
    # when the encoding fails, so that a wrong id, channel or version is reported as such.
    try:
        row, blobs, lists = put_rows(
            saver.serde, saver.lists, s, checkpoint, md, new_versions, saver.searchable_metadata
        )
    finally:
        cid = checked_id(checkpoint, new_versions)
    row["checkpoint_id"] = cid
    thread_md = row["metadata_json"] if s.ns == "" else None
    stored = yield from _op(saver, puts.put_checkpoint, row, blobs, thread_md, write=True)
    for ch, entry in lists.items():
        b = stored.get(ch)
        if b is None:
            continue  # stored by an earlier put of this version
        saver.lists.put((s.thread_id, s.ns, ch), entry if b.kind == DELTA else entry.as_root())
    return ckpt_config(s.thread_id, s.ns, cid)


def put_writes(
    saver: Saver,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> Plan[None]:
    s = scope(config)
    if s.checkpoint_id is None:
        raise ValueError("config.configurable.checkpoint_id: required by put_writes")
    task_id = check_id(task_id, "task_id")
    check_text(task_path, "task_path")
    writes = check_writes(writes)
    special = all(ch in WRITES_IDX_MAP for ch, _ in writes)
    rows: dict[int, dict[str, Any]] = {}
    for i, (ch, value) in enumerate(writes):
        check_text(ch, "writes channel")
        idx = WRITES_IDX_MAP.get(ch, i)
        if idx in rows and not special:
            continue  # first write wins, as in the database
        type_, data = dumps(saver.serde, value, f"write to channel {ch!r}")
        rows[idx] = {
            "thread_id": s.thread_id,
            "ns_hash": s.ns_hash,
            "checkpoint_id": s.checkpoint_id,
            "task_hash": key_hash(task_id),
            "idx": idx,
            "task_id": task_id,
            "task_path": task_path,
            "channel": ch,
            "type": type_,
            "value": data,
        }
    if rows:
        # One statement, unless a value goes in parts (MariaDB/MySQL: see puts._write).
        part = saver.db.rules.checkpoint_value_part
        single = part is None or all(len(r["value"]) <= part for r in rows.values())
        yield from _op(
            saver, puts.put_writes, list(rows.values()), special, write=True, single=single
        )


def delta_channel_history(
    saver: Saver, config: RunnableConfig, channels: Sequence[str]
) -> Plan[dict[str, DeltaChannelHistory]]:
    s = scope(config)
    chans = [check_text(ch, "channels") for ch in channels]
    out: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in chans}
    if not chans:
        return out
    found = yield from _op(saver, reads.delta_walk, s.thread_id, s.ns_hash, s.checkpoint_id, chans)
    if found is None:
        return out
    for ch in chans:
        seed = found.seeds.get(ch)
        idx = seed[0] if seed is not None else len(found.path) - 1
        collected: list[PendingWrite] = []
        for cp_id in reversed(found.path[: idx + 1]):
            rows = [
                w for w in found.writes.get((s.thread_id, s.ns_hash, cp_id), []) if w.channel == ch
            ]
            rows.sort(key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
            collected += [(w.task_id, w.channel, _loads(saver, w.type, w.value)) for w in rows]
        entry: DeltaChannelHistory = {"writes": collected}
        if seed is not None:
            entry["seed"] = read_value(partial(_loads, saver), found.blobs, seed[1])[0]
        out[ch] = entry
    return out


def delete_thread(saver: Saver, thread_id: str) -> Plan[None]:
    tid = check_id(thread_id, "thread_id")
    yield from _op(saver, threads.delete_threads, [tid], write=True)
    saver.lists.forget_threads([tid])


def delete_for_runs(saver: Saver, run_ids: Sequence[str]) -> Plan[None]:
    if isinstance(run_ids, str) or not isinstance(run_ids, Sequence):
        raise TypeError("run_ids: expected a sequence of run ids")
    ids = [check_id(r, "run_ids") for r in run_ids]
    if ids:
        yield from _op(saver, threads.delete_for_runs, ids, write=True)
        saver.lists.forget_threads()


def copy_thread(saver: Saver, source_thread_id: str, target_thread_id: str) -> Plan[None]:
    src = check_id(source_thread_id, "source_thread_id")
    dst = check_id(target_thread_id, "target_thread_id")
    if src == dst:
        raise ValueError("target_thread_id: must differ from source_thread_id")
    yield from _op(saver, threads.copy_thread, src, dst, clock.now_ms(), write=True)


def _delta_channels(saver: Saver, row: Any) -> list[str]:
    metadata = _loads(saver, row.metadata_type, row.metadata)
    return [str(k) for k in delta_names(metadata)] if isinstance(metadata, Mapping) else []


def prune(saver: Saver, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
    if isinstance(thread_ids, str) or not isinstance(thread_ids, Sequence):
        raise TypeError("thread_ids: expected a sequence of thread ids")
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"strategy: expected 'keep_latest' or 'delete', got {strategy!r}")
    ids = [check_id(t, "thread_ids") for t in thread_ids]
    if strategy == "delete":
        if ids:
            yield from _op(saver, threads.delete_threads, ids, write=True)
    else:
        for tid in ids:
            yield from _op(
                saver, threads.prune_keep_latest, tid, partial(_delta_channels, saver), write=True
            )
    saver.lists.forget_threads(ids)


def list_threads(
    saver: Saver, metadata: Mapping[str, Any] | None, limit: int | None, offset: int
) -> Plan[list[ThreadInfo]]:
    exact = check_filter(metadata, "metadata")
    if exact and not saver.searchable_metadata:
        raise ValueError(
            "metadata: listing threads by metadata needs searchable_metadata=True (off by "
            "default with an EncryptedSerializer, which keeps metadata out of plain JSON)"
        )
    for key, value in exact.items():  # what the threads' JSON copy can hold, or nothing
        if not (json_safe(key) and json_safe(value)):
            raise ValueError(
                f"metadata[{key!r}]: threads are listed by scalar metadata (str, int, "
                f"finite float, bool or None, without NUL), got {type(value).__name__}"
            )
    if limit is not None:
        check_positive(limit, "limit")
    check_positive(offset, "offset", allow_zero=True)
    col = saver.tables.checkpoint_threads.c.metadata
    conds = prefilter(col, exact, saver.db.rules)
    if not exact:
        return (yield from _op(saver, threads.list_threads, conds, limit, offset))
    # The SQL conditions may over-select (see meta.prefilter): page in Python then.
    rows = yield from _op(saver, threads.list_threads, conds, None, 0)
    found = [r for r in rows if matches(r.metadata, exact)][offset:]
    return found if limit is None else found[:limit]


def delete_idle_threads(saver: Saver, days: float) -> Plan[int]:
    days = check_number(days, "days", low=0, high=MAX_IDLE_DAYS)
    cutoff = clock.now_ms() - int(days * clock.DAY_MS)
    total = 0
    while True:
        ids = yield from _op(saver, threads.delete_idle_threads, cutoff, DELETE_BATCH, write=True)
        saver.lists.forget_threads(ids)
        total += len(ids)
        if len(ids) < DELETE_BATCH:
            return total
