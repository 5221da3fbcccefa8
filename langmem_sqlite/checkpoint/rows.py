"""What the checkpointer's SQL modules (`puts`, `reads`, `threads`) share: the rows they
write and read, and the key lists. Their functions take a
[`Unit`][langmem_sqlite.engine.Unit] and (de)serialize nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import and_, or_
from sqlalchemy.sql.elements import ColumnElement

from ..engine.schema import Tables
from .storage import key_hash

__all__ = [
    "BLOB_COLS",
    "BlobKey",
    "CheckpointRow",
    "ListQuery",
    "PendingWrite",
    "blob_keys",
    "checkpoint_columns",
    "chunks",
    "exact_in",
    "scope_groups",
]

CHUNK = 200
"""Keys per `IN (...)` list (SQLite allows 32766 bound variables)."""

BlobKey = tuple[str, str, str, str]
"""`(thread_id, ns_hash, channel_hash, version)`."""

BLOB_COLS = (
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
"""The columns of a `checkpoint_blobs` row, in the order the statements name them."""


@dataclass
class CheckpointRow:
    """A `checkpoints` row to upsert."""

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
    """What `list_page` selects (`None` = no condition)."""

    thread_id: str | None = None
    ns_hash: str | None = None
    checkpoint_id: str | None = None
    before: str | None = None
    conditions: list[ColumnElement[bool]] = field(default_factory=list)


def chunks(items: Sequence[Any], n: int = CHUNK) -> Iterator[Sequence[Any]]:
    """`items` in slices of at most `n`."""
    for i in range(0, len(items), n):
        yield items[i : i + n]


def exact_in(cols: Sequence[Any], keys: Sequence[tuple[Any, ...]]) -> ColumnElement[bool]:
    """`(cols) IN keys` as an OR of `c1 = ? AND ... AND cN IN (...)` per key prefix.

    Row-value `IN` lists make SQLite scan the table; this form uses the index on every
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


def scope_groups(
    keys: Iterable[tuple[Any, ...]],
) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """Distinct keys grouped by their `(thread_id, ns_hash)`."""
    groups: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for k in dict.fromkeys(keys):
        groups.setdefault((k[0], k[1]), []).append(k)
    return groups


def checkpoint_columns(t: Tables) -> list[Any]:
    """The `checkpoints` columns a read returns."""
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


class PendingWrite(NamedTuple):
    """A row of pending writes, as `read_checkpoint` returns it."""

    checkpoint_id: str
    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    value: Any


def blob_keys(row: Any) -> list[BlobKey]:
    """The blob keys a checkpoint row references.

    The `versions` column maps each channel the SQL must know of to its version: channels
    with a blob row, and delta channels (a version without a row is a channel without a
    value). A channel whose value is kept in the checkpoint's record maps to `null` there
    (its version is in the record too), so that the walks of `delta_walk` find it.
    """
    return [
        (row.thread_id, row.ns_hash, key_hash(ch), str(v))
        for ch, v in json.loads(row.versions).items()
        if v is not None
    ]
