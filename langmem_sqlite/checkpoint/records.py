"""What a put stores where, and the checks on what callers pass: pure functions of the saver.

A checkpoint's small values and its input are kept in its record (`record_values`), the
versions split between the column the SQL reads and the record (`split_versions`);
configs, versions and writes are checked before anything is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import START

from ..engine.schema import ID_MAX_CHARS
from ..validation import check_id, check_list, check_text
from .storage import key_hash

__all__ = [
    "DELETE_BATCH",
    "MAX_IDLE_DAYS",
    "NOT_IN_RECORD",
    "Scope",
    "ThreadInfo",
    "check_writes",
    "ckpt_config",
    "delta_names",
    "record_values",
    "scope",
    "split_versions",
    "version_text",
]

MAX_IDLE_DAYS = 100_000_000_000
"""The largest `days` of
[`SQLSaver.delete_idle_threads`][langmem_sqlite.checkpoint.saver.SQLSaver.delete_idle_threads]: its
cut-off time, in ms since the epoch, then still fits the 64-bit integer column every database stores
it in."""
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
        if not isinstance(item, tuple | list) or len(item) != 2:
            got = (
                type(item).__name__ if not isinstance(item, tuple | list) else f"{len(item)} items"
            )
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


NOT_IN_RECORD = frozenset({"id", "channel_values", "channel_versions"})


_SMALL_STR = 32
"""Longest string kept in a checkpoint's record rather than in a row of its own."""


def _small(value: Any) -> bool:
    """True for None, booleans, floats, 64-bit integers and strings of up to 32 characters."""
    t = type(value)
    if value is None or t is bool or t is float:
        return True
    if t is int:
        return -(2**63) <= value < 2**64
    return t is str and len(value) <= _SMALL_STR


def record_values(
    values: Mapping[str, Any], versions: Mapping[str, Any], delta: Any
) -> dict[str, Any]:
    """The channel values kept in the checkpoint's record instead of a blob row each.

    - Small scalars (`_small`): None (`branch:to:<node>` triggers, at every step of
      every graph), counters, flags, routing names. A row and its index entries take about 250
      bytes and a third of a small `put`'s time; in the record such a value takes a few.
    - The graph's input (`__start__`), read by the next step only.

    Each record whose checkpoint holds such a value has it again, so every record is whole on
    its own: which values are kept there depends on the value alone, the same for every
    checkpoint that holds its version. (A scalar that never changes is thus copied into each
    record, a few bytes each.) Delta channels keep their rows: their history is read from the
    rows (`delta`: their names, see `delta_names`)."""
    return {
        ch: v
        for ch, v in values.items()
        if (ch == START or _small(v)) and ch in versions and ch not in delta
    }


def delta_names(metadata: Mapping[str, Any]) -> Any:
    """The delta channels named by a checkpoint's metadata."""
    counters = metadata.get("counters_since_delta_snapshot")
    return counters if isinstance(counters, Mapping) else ()


def split_versions(
    versions: Mapping[str, Any], values: Mapping[str, Any], inline: Mapping[str, Any], delta: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`(column, record)`: the versions of channels with a blob row go to the `versions`
    column, which the SQL reads (blob keys, ancestor walks, clean-up); the versions of the
    others (values kept in the record, channels without a value) go to the compressed record.
    Delta channels always stay in the column. A channel whose value is in the record is named
    in the column too, with `None`: an ancestor walk must see that this checkpoint holds a
    value for it (a delta channel's seed may be such a value)."""
    column: dict[str, Any] = {}
    record: dict[str, Any] = {}
    for ch, v in versions.items():
        if ch in delta or (ch in values and ch not in inline):
            column[ch] = v
        else:
            record[ch] = v
            if ch in inline:
                column[ch] = None
    return column, record


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
