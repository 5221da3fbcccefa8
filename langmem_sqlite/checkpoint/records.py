"""What a put stores where, and the checks on what callers pass: pure functions of the saver.

`put_rows` builds a put's rows (a checkpoint's versions split between the column the SQL reads
and its record: `split_versions`); configs, ids, versions and writes are checked before
anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol

from .. import clock
from ..engine.schema import ID_MAX_CHARS
from ..validation import check_id, check_list, check_text, check_version
from .codec import dumps
from .meta import json_copy
from .storage import BlobRow, ListCache, ListState, encode_channel, key_hash

MAX_IDLE_DAYS = 100_000_000_000
"""The largest `days` of
[`SQLSaver.delete_idle_threads`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_idle_threads]:
its cut-off time in ms since the epoch still fits a 64-bit integer column."""
DELETE_BATCH = 200
"""Idle threads deleted per transaction."""


@dataclass(frozen=True)
class ThreadInfo:
    """A thread as listed by
    [`SQLSaver.list_threads`][langmem_sqlite.checkpoint.saver.SQLSaver.list_threads] (times in ms
    since the epoch)."""

    thread_id: str
    created_at: int
    updated_at: int
    checkpoint_count: int
    """Checkpoints of the thread, all namespaces included."""
    metadata: dict[str, Any] | None
    """Scalar metadata of the thread's latest root checkpoint (`user_id`, `source`...)."""


def check_writes(writes: Any) -> list[tuple[str, Any]]:
    """`writes` as a list of `(channel, value)` pairs; a `str` (or a mapping) is refused
    rather than taken apart into characters (or keys)."""
    items = check_list(writes, "writes")
    for i, item in enumerate(items):
        pair = isinstance(item, tuple | list)
        if not pair or len(item) != 2:
            got = f"{len(item)} items" if pair else type(item).__name__
            raise TypeError(f"writes[{i}]: expected a (channel, value) pair, got {got}")
    return [(ch, v) for ch, v in items]


def ckpt_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config naming one checkpoint."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def delta_names(metadata: Mapping[str, Any]) -> Any:
    """The delta channels named by a checkpoint's metadata."""
    counters = metadata.get("counters_since_delta_snapshot")
    return counters if isinstance(counters, Mapping) else ()


def split_versions(
    versions: Mapping[str, Any], values: Mapping[str, Any], delta: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`(column, record)`: the versions of the channels with a blob row (and of delta
    channels) go to the `versions` column, which the SQL reads (blob keys, ancestor walks,
    clean-up); those of the channels without a value go to the compressed record."""
    column = {ch: v for ch, v in versions.items() if ch in values or ch in delta}
    return column, {ch: v for ch, v in versions.items() if ch not in column}


@dataclass(frozen=True)
class Scope:
    """What a config names: a thread, a namespace (and its hash), maybe a checkpoint."""

    thread_id: str
    ns: str
    ns_hash: str
    checkpoint_id: str | None


def scope(config: Any, name: str = "config") -> Scope:
    """The `Scope` of a config, checked (`name`: the argument, for messages)."""
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(conf, Mapping):
        raise ValueError(f"{name}: expected a RunnableConfig with a 'configurable' mapping")
    thread_id = check_id(conf.get("thread_id"), f"{name}.configurable.thread_id")
    ns = conf.get("checkpoint_ns")
    ns = "" if ns is None else check_text(ns, f"{name}.configurable.checkpoint_ns")
    cid = conf.get("checkpoint_id")
    cid = check_id(cid, f"{name}.configurable.checkpoint_id") if cid else None
    return Scope(thread_id, ns, key_hash(ns), cid)


def put_rows(
    serde: SerializerProtocol,
    cache: ListCache,
    s: Scope,
    checkpoint: Mapping[str, Any],
    metadata: Mapping[str, Any],
    new_versions: Mapping[str, Any],
    searchable: bool,
) -> tuple[dict[str, Any], list[BlobRow], dict[str, ListState]]:
    """What a put stores: the `checkpoints` row but its `checkpoint_id` (see `checked_id`),
    the blob rows of the channels in `new_versions`, and the state each list channel's row
    makes (remembered once stored)."""
    values = checkpoint.get("channel_values") or {}
    versions = dict(checkpoint.get("channel_versions") or {})
    # The record: the checkpoint without its id (a column) and its values (blob rows), with
    # the versions of the channels without a value (see split_versions).
    body = {
        k: v for k, v in checkpoint.items() if k not in ("id", "channel_values", "channel_versions")
    }
    column, in_record = split_versions(versions, values, delta_names(metadata))
    if in_record:
        body["channel_versions"] = in_record
    ctype, cdata = dumps(serde, body, "checkpoint")
    mtype, mdata = dumps(serde, metadata, "metadata")
    run_id = metadata.get("run_id")
    run_id = str(run_id) if run_id is not None else None
    if run_id is not None and (len(run_id) > ID_MAX_CHARS or "\x00" in run_id):
        run_id = None
    blobs: list[BlobRow] = []
    lists: dict[str, ListState] = {}
    for ch, ver in (new_versions or {}).items():
        # str(ver): the text `check_version` checks and returns
        blob, state = encode_channel(serde, cache, (s.thread_id, s.ns, ch), str(ver), values)
        if blob is not None:
            blobs.append(blob)
        if state is not None:
            lists[ch] = state
    row = {
        "thread_id": s.thread_id,
        "ns_hash": s.ns_hash,
        "checkpoint_ns": s.ns,
        "parent_checkpoint_id": s.checkpoint_id,
        "type": ctype,
        "checkpoint": cdata,
        "versions": json.dumps(column, separators=(",", ":")),
        "metadata_type": mtype,
        "metadata": mdata,
        "metadata_json": json_copy(metadata) if searchable else None,
        "run_id": run_id,
        "created_at": clock.now_ms(),
    }
    return row, blobs, lists


def checked_id(checkpoint: Mapping[str, Any], new_versions: Mapping[str, Any]) -> str:
    """The id of a checkpoint to put, checked with the channels and versions it stores."""
    cid = check_id(checkpoint.get("id"), "checkpoint['id']")
    for ch, ver in dict(checkpoint.get("channel_versions") or {}).items():
        check_text(ch, "checkpoint['channel_versions'] key")
        check_version(ver, f"new_versions[{ch!r}]")
    for ch, ver in (new_versions or {}).items():
        check_text(ch, "new_versions key")
        check_version(ver, f"new_versions[{ch!r}]")
    return cid
