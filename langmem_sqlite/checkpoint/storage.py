"""Channel values stored once per version, lists as deltas.

A `list` is stored as "the first `base_len` items of version `base_version`, then these items";
version `d` since the last full copy builds on version `d & (d - 1)` (skip deltas), so a read
decodes at most `popcount(d) + 1` rows; a list that doubled is stored whole again. The shared
prefix is found from digests of the serialized items (`ListCache` keeps them, never the items).
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from ..validation import check_int, check_number
from .codec import dumps

VALUE = "v"
"""Blob kind: a complete serialized value (a channel version without a row has no value)."""
DELTA = "d"
"""Blob kind: `base_version[:base_len]` plus the serialized list of appended items."""

MAX_DELTA_DEPTH = 10_000
"""Most versions of a list stored as deltas after one full copy."""

DIGEST_SIZE = 16
"""Bytes of SHA-256 kept per list item."""


@lru_cache(maxsize=4096)
def key_hash(text: str) -> str:
    """Fixed-width key for unbounded text (namespaces, channel names, task ids): MD5 hex."""
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


MAX_VERSION_COUNTER = 10**12 - 2
"""The largest counter `next_version` accepts: the next one still has 12 digits, so that
versions compare as text in the order of their counters (as LangGraph compares them)."""


def _counter(current: Any) -> int:
    if isinstance(current, str):
        head = current.split(".", 1)[0]
        if not (head.isascii() and head.isdigit()):
            raise ValueError(f"current: expected a version '<counter>.<suffix>', got {current!r}")
        n = int(head)
        if n > MAX_VERSION_COUNTER:
            raise ValueError(
                f"current: expected a counter from 0 to {MAX_VERSION_COUNTER:_}, got {current!r}"
            )
        return n
    if isinstance(current, float):
        return int(check_number(current, "current", low=0, high=MAX_VERSION_COUNTER))
    return check_int(current, "current", high=MAX_VERSION_COUNTER)


def next_version(current: str | int | float | None) -> str:
    """`"<counter:012>.<48 random bits>"`: increasing, and unique across forks of a thread
    (the bits come from `random`, reseeded in a forked child: a version is not a secret).

    Raises:
        ValueError: `current` is a bool, NaN, an infinity, negative, above
            `MAX_VERSION_COUNTER`, or a string without a counter.
    """
    n = 0 if current is None else _counter(current)
    return f"{n + 1:012d}.{random.getrandbits(48):012x}"


@dataclass
class BlobRow:
    """One `checkpoint_blobs` row to insert (`channel` is for the caller, not stored)."""

    channel: str
    channel_hash: str
    version: str
    kind: str
    type: str | None = None
    value: bytes | None = None
    base_version: str | None = None
    base_len: int | None = None
    root_version: str | None = None
    depth: int = 0
    full: Callable[[], BlobRow] | None = field(default=None, repr=False)
    """For a delta: builds the complete row, used if the base has vanished meanwhile."""

    def as_params(self, thread_id: str, ns_hash: str) -> dict[str, Any]:
        row = {k: v for k, v in vars(self).items() if k not in ("channel", "full")}
        return {"thread_id": thread_id, "ns_hash": ns_hash, **row}


def fingerprint_serde(serde: SerializerProtocol) -> SerializerProtocol:
    """The serializer whose output identifies a list item: `serde` itself, or the serializer
    inside an `EncryptedSerializer` (whose output differs at every call)."""
    return serde.serde if isinstance(serde, EncryptedSerializer) else serde


def item_digests(serde: SerializerProtocol, items: Iterable[Any]) -> bytes | None:
    """`DIGEST_SIZE` bytes of SHA-256 per item, of its type and bytes as `serde` serializes it;
    None if an item cannot be serialized (the value is then stored whole, by the path that
    reports the error)."""
    out = bytearray()
    try:
        for item in items:
            type_, data = serde.dumps_typed(item)
            out += hashlib.sha256(type_.encode() + b"\x00" + data).digest()[:DIGEST_SIZE]
    except Exception:
        return None
    return bytes(out)


def common_prefix(a: bytes, b: bytes) -> int:
    """How many leading items two digest strings share."""
    size = DIGEST_SIZE
    n, i = min(len(a), len(b)) // size, 0
    while i < n and a[i * size : (i + 1) * size] == b[i * size : (i + 1) * size]:
        i += 1
    return i


def _pack(items: list[Any], digests: bytes | None) -> Any:
    """What a list row stores: its items and their digests (the bare list without digests)."""
    return items if digests is None else {"items": items, "digests": digests}


def _unpack(payload: Any) -> tuple[list[Any], bytes | None]:
    if isinstance(payload, dict):
        return list(payload["items"]), bytes(payload["digests"])
    return list(payload), None


@dataclass(frozen=True, slots=True)
class ListState:
    """A list value stored as `version`: its item digests and the versions it is built on.

    `chain` holds `(depth, version, shared)` of the versions a read of this one decodes
    (its full copy first, at depth 0), `shared` being how many leading items that version has
    in common with this one (at least). Immutable: no item of the list is kept."""

    version: str
    root: str
    depth: int
    root_len: int
    """Items of the chain's full copy."""
    digests: bytes
    chain: tuple[tuple[int, str, int], ...] = ()

    def __len__(self) -> int:
        return len(self.digests) // DIGEST_SIZE

    def as_root(self) -> ListState:
        """The same list, stored whole."""
        return ListState(self.version, self.version, 0, len(self), self.digests)

    def extend(
        self, version: str, digests: bytes, max_depth: int
    ) -> tuple[str, int, ListState] | None:
        """`(base_version, base_len, state)` to store the list `digests` as `version`, a
        delta; None when it should be stored whole (nothing shared, doubled, too deep)."""
        common = common_prefix(self.digests, digests)
        if not common or self.depth >= max_depth:
            return None
        if len(digests) // DIGEST_SIZE >= 2 * max(self.root_len, 1):
            return None
        depth = self.depth + 1
        target = depth & (depth - 1)  # the depth of the base (see the module's docstring)
        if target == self.depth:
            base, shared = self.version, common
        else:
            at = [(v, s) for d, v, s in self.chain if d == target]
            if not at:
                return None
            base, shared = at[0][0], min(at[0][1], common)
        if not shared:
            return None
        chain = tuple((d, v, min(s, common)) for d, v, s in self.chain if d < target)
        state = ListState(
            version,
            self.root,
            depth,
            self.root_len,
            digests,
            (*chain, (target, base, shared)),
        )
        return base, shared, state


class ListCache:
    """Bounded, thread-safe map `(thread, ns, channel) -> ListState` (least recently used
    entries are evicted)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[tuple[str, str, str], ListState] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> ListState | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is not None:
                self._data.move_to_end(key)
            return entry

    def put(self, key: tuple[str, str, str], entry: ListState) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._data[key] = entry
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def forget_threads(self, thread_ids: Iterable[str] | None = None) -> None:
        """Drop the entries of some threads (all entries when `thread_ids` is None)."""
        with self._lock:
            if thread_ids is None:
                self._data.clear()
                return
            drop = set(thread_ids)
            for key in [k for k in self._data if k[0] in drop]:
                del self._data[key]


def encode_channel(
    serde: SerializerProtocol,
    cache: ListCache,
    key: tuple[str, str, str],
    version: str,
    values: Mapping[str, Any],
) -> tuple[BlobRow | None, ListState | None]:
    """The row storing channel `key[2]` at `version` (None without a value) and the list state
    it makes: a delta if the list shares a prefix with the one the cache knows for the channel,
    else the value whole. Nothing of `values` is kept."""
    channel = key[2]
    ch_hash = key_hash(channel)
    what = f"channel {channel!r}"
    if channel not in values:
        return None, None
    value = values[channel]
    if type(value) is not list:
        type_, data = dumps(serde, value, what)
        return BlobRow(channel, ch_hash, version, VALUE, type_, data), None
    known = cache.get(key)
    digests = item_digests(fingerprint_serde(serde), value) if cache.size > 0 else None

    def full() -> BlobRow:
        type_, data = dumps(serde, _pack(value, digests), what)
        return BlobRow(channel, ch_hash, version, VALUE, type_, data, root_version=version)

    if digests is None:
        return full(), None
    plan = known.extend(version, digests, MAX_DELTA_DEPTH) if known is not None else None
    if known is None or plan is None:
        return full(), ListState(version, version, 0, len(value), digests)
    base, base_len, state = plan
    added = _pack(value[base_len:], digests[base_len * DIGEST_SIZE :])
    type_, data = dumps(serde, added, what)
    row = BlobRow(
        channel,
        ch_hash,
        version,
        DELTA,
        type_,
        data,
        base_version=base,
        base_len=base_len,
        root_version=known.root,
        depth=state.depth,
        full=full,
    )
    return row, state


def read_value(
    loads: Callable[[str, Any], Any],
    rows: Mapping[tuple[str, ...], Any],
    key: tuple[str, ...],
    state: bool = False,
) -> tuple[Any, ListState | None]:
    """The value stored under `key` in the fetched blob `rows`, decoded afresh (two values
    read from the same rows share no object) and, for a list stored with digests, its
    `ListState` (when `state`). `loads(type, data)` decodes a stored value."""
    row = rows[key]
    if row.root_version is None:  # not a list
        return loads(row.type, row.value), None
    chain = [(key, row)]
    while row.kind == DELTA:
        cur = (*key[:3], row.base_version)
        row = rows.get(cur)
        if row is None or len(chain) > MAX_DELTA_DEPTH:
            raise LookupError(f"checkpoint storage: list version {cur[3]!r} is missing")
        chain.append((cur, row))
    items: list[Any] = []
    digests: bytes | None = b""
    root_len = 0
    for k, row in reversed(chain):
        decoded, its_digests = _unpack(loads(row.type, row.value))
        if row.kind != DELTA:
            items, digests, root_len = decoded, its_digests, len(decoded)
            continue
        if row.base_len > len(items):
            raise LookupError(f"checkpoint storage: list version {k[3]!r} is damaged")
        del items[row.base_len :]
        items.extend(decoded)
        if digests is not None and its_digests is not None:
            digests = digests[: row.base_len * DIGEST_SIZE] + its_digests
        else:
            digests = None
    if not state or digests is None:
        return items, None
    return items, _state_of(chain, digests, root_len)


def _state_of(chain: list[tuple[tuple[str, ...], Any]], digests: bytes, root_len: int) -> ListState:
    """The `ListState` of the list read along `chain` (target first, full copy last)."""
    target = chain[0][1]
    elements: list[tuple[int, str, int]] = []
    shared: int | None = None
    for (_, row), (key, base) in pairwise(chain):
        shared = row.base_len if shared is None else min(shared, row.base_len)
        elements.append((int(base.depth), key[3], int(shared)))
    return ListState(
        chain[0][0][3],
        chain[-1][0][3],
        int(target.depth),
        root_len,
        digests,
        tuple(reversed(elements)),
    )
