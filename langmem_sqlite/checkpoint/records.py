"""What a put stores where, and the checks on what callers pass: pure functions of the saver.

A checkpoint's versions are split between the column the SQL reads and its record
(`split_versions`); configs, versions and writes are checked before anything is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..engine.schema import ID_MAX_CHARS
from ..validation import check_id, check_list, check_text
from .storage import key_hash

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


def version_text(version: Any, channel: str) -> str:
    """A channel version (str, int or finite float) as the text stored for it."""
    name = f"new_versions[{channel!r}]"
    if isinstance(version, bool):
        raise ValueError(f"{name}: expected str, int or finite float, got {version!r}")
    if not isinstance(version, str | int | float):
        raise TypeError(f"{name}: expected str, int or float, got {type(version).__name__}")
    if isinstance(version, float) and not math.isfinite(version):
        # NaN equals nothing, itself included: a channel of that version would never be seen
        raise ValueError(f"{name}: expected str, int or finite float, got {version!r}")
    text = check_text(str(version), name)
    if len(text) > ID_MAX_CHARS:
        raise ValueError(f"new_versions[{channel!r}]: longer than {ID_MAX_CHARS} characters")
    return text


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


NOT_IN_RECORD = frozenset({"id", "channel_values", "channel_versions"})  # a column, blob rows


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
