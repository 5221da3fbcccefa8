"""Linear storage of channel values: each value once, lists as deltas from an earlier version.

A checkpoint references one stored value per channel *version* (versions are unique across
forks, see :func:`next_version`), so a channel that did not change is never written again.
(Small scalars, None and the graph's input are kept in the checkpoint's own record instead,
which costs less than a row: see ``saver._record_values``.) A
``list`` value (``messages`` under ``add_messages``, any append-only list) is stored as a
*delta*: "the first ``base_len`` items of version ``base_version`` of this channel, then these
items". A 200-turn chat therefore stores each message once instead of once per checkpoint.

Once a list has doubled since its last full copy it is stored whole again, which bounds the
full copies to about twice the items (a geometric series) and a read to one full row plus the
deltas written since.

The delta base is found without reading the database: :class:`ListCache` remembers, per
``(thread, namespace, channel)``, the last list this process stored or read, with the item
objects themselves. LangGraph's reducers keep the item objects of the previous value, so the
new value's common prefix is found by identity. Each cached item also keeps the identity of
its attribute values, so a message whose fields were reassigned in place is not mistaken for
the stored one (deep in-place mutation of nested containers is not detected; LangGraph
expects state to be updated by returning new values). A miss only costs a full copy.

Every stored byte goes through the saver's serializer (``serde.dumps_typed``), so encryption
and msgpack allowlists cover channel values, deltas, checkpoints, metadata and writes alike.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter, is_
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from .codec import dumps, loads

__all__ = [
    "EMPTY",
    "BlobRow",
    "CachedList",
    "ListCache",
    "Resolver",
    "encode_channel",
    "key_hash",
    "next_version",
    "still_stored",
]

EMPTY = "e"
"""Blob kind: the channel has a version but no value (such rows are not stored: a version
without a row reads as empty)."""
VALUE = "v"
"""Blob kind: a complete serialized value."""
DELTA = "d"
"""Blob kind: ``base_version[:base_len]`` plus the serialized list of appended items."""

DEFAULT_MAX_DELTA_DEPTH = 10_000
"""Longest chain of deltas before a list is stored whole again."""


@lru_cache(maxsize=4096)
def key_hash(text: str) -> str:
    """Fixed-width key for unbounded text (namespaces, channel names, task ids): MD5 hex."""
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def next_version(current: str | int | float | None) -> str:
    """``"<counter:012>.<48 random bits>"``: increasing, and unique across forks of a thread.

    The bits come from the ``random`` module (seeded from the OS, and reseeded in a forked
    child): a version is not a secret, and ``secrets`` costs a system call that releases the
    GIL on every call, three times per turn of a chat graph."""
    if current is None:
        n = 0
    elif isinstance(current, str):
        n = int(current.split(".", 1)[0])
    else:
        n = int(current)
    return f"{n + 1:012d}.{random.getrandbits(48):012x}"


@dataclass
class BlobRow:
    """One ``checkpoint_blobs`` row to insert (``channel`` is for the caller, not stored)."""

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
        """Column values for an insert."""
        return {
            "thread_id": thread_id,
            "ns_hash": ns_hash,
            "channel_hash": self.channel_hash,
            "version": self.version,
            "kind": self.kind,
            "type": self.type,
            "value": self.value,
            "base_version": self.base_version,
            "base_len": self.base_len,
            "root_version": self.root_version,
            "depth": self.depth,
        }


_ATOMIC = frozenset({str, bytes, int, float, bool, type(None)})


def _shape(item: Any) -> Any:
    """What must stay equal for ``item`` to still be the stored value: its fields (a copy of its
    ``__dict__``, as for LangChain messages), or its items; held, so compared by identity
    first."""
    if type(item) in _ATOMIC:
        return None
    try:
        return dict(item.__dict__)
    except AttributeError:
        pass
    if type(item) is dict:
        return (*item, *item.values())
    if type(item) in (list, tuple):
        return tuple(item)
    return None


_fields = attrgetter("__dict__")


def _shapes(items: list[Any]) -> list[Any]:
    return [_shape(v) for v in items]


def _unchanged(items: list[Any], shapes: list[Any]) -> bool:
    """True if each item's fields are still the recorded ones (for objects with a ``__dict__``
    the whole comparison runs in C: 0.15 us per message)."""
    try:
        live = list(map(_fields, items))
    except AttributeError:
        live = _shapes(items)
    return live == shapes


@dataclass
class CachedList:
    """A list value known to be stored as ``version`` (a delta chain from ``root``)."""

    version: str
    root: str
    depth: int
    items: list[Any]
    shapes: list[Any]
    root_len: int
    """Items stored in the chain's full (root) row."""

    def common_prefix(self, value: list[Any]) -> int:
        """How many leading items of ``value`` are the stored items, unchanged (the same
        objects, whose field values are still equal to those stored)."""
        items = self.items
        if all(map(is_, items, value)):  # the common case: one pass, no list (map stops early)
            k = min(len(items), len(value))
        else:
            k = list(map(is_, items, value)).index(False)
        try:
            shapes = self.shapes if k == len(self.shapes) else self.shapes[:k]
            if _unchanged(value[:k] if k < len(value) else value, shapes):
                return k
            now = _shapes(value[:k])
            return next(i for i, (a, b) in enumerate(zip(now, self.shapes, strict=False)) if a != b)
        except Exception:  # values whose == fails (arrays...): store the list whole
            return 0


def still_stored(entry: CachedList) -> bool:
    """True if the cached items still hold the values stored for ``entry.version``."""
    try:
        return _unchanged(entry.items, entry.shapes)
    except Exception:  # values whose == fails: read them from the database
        return False


class ListCache:
    """Bounded, thread-safe map ``(thread, ns, channel) -> CachedList`` (least recently used
    entries are evicted)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[tuple[str, str, str], CachedList] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> CachedList | None:
        """The cached list for ``key``, if any."""
        with self._lock:
            entry = self._data.get(key)
            if entry is not None:
                self._data.move_to_end(key)
            return entry

    def put(self, key: tuple[str, str, str], entry: CachedList) -> None:
        """Remember ``entry`` for ``key``."""
        if self.size <= 0:
            return
        with self._lock:
            self._data[key] = entry
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def scope(self, thread_id: str, ns: str) -> dict[str, CachedList]:
        """channel -> cached list, for one thread and namespace."""
        with self._lock:
            return {k[2]: e for k, e in self._data.items() if k[0] == thread_id and k[1] == ns}

    def forget_threads(self, thread_ids: Iterable[str] | None = None) -> None:
        """Drop the entries of some threads (all entries when ``thread_ids`` is None)."""
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
    max_depth: int = DEFAULT_MAX_DELTA_DEPTH,
) -> tuple[BlobRow, CachedList | None]:
    """The row storing channel ``key[2]`` at ``version``, and the cache entry it would make.

    Lists become a delta from the cached list of the same channel when they share a prefix
    with it; anything else is serialized whole.
    """
    channel = key[2]
    ch_hash = key_hash(channel)
    if channel not in values:
        return BlobRow(channel, ch_hash, version, EMPTY), None
    value = values[channel]

    def full() -> BlobRow:
        type_, data = dumps(serde, value, f"channel {channel!r}")
        root = version if type(value) is list else None
        return BlobRow(channel, ch_hash, version, VALUE, type_, data, root_version=root)

    if type(value) is not list:
        return full(), None
    known = cache.get(key)
    prefix = known.common_prefix(value) if known is not None and known.depth < max_depth else 0
    # Store the list whole again once it has doubled since its last full copy: at most ~2x
    # the items in full copies (a geometric series), and a read decodes one full row plus
    # the deltas written since (fewer than half the items).
    if known is None or prefix == 0 or len(value) >= 2 * max(known.root_len, 1):
        entry = CachedList(version, version, 0, list(value), _shapes(value), len(value))
        return full(), entry
    added = value[prefix:]
    type_, data = dumps(serde, added, f"channel {channel!r}")
    row = BlobRow(
        channel,
        ch_hash,
        version,
        DELTA,
        type_,
        data,
        base_version=known.version,
        base_len=prefix,
        root_version=known.root,
        depth=known.depth + 1,
        full=full,
    )
    shapes = known.shapes[:prefix] + _shapes(added)
    entry = CachedList(version, known.root, known.depth + 1, list(value), shapes, known.root_len)
    return row, entry


class Resolver:
    """Turns fetched blob rows back into values, decoding each delta at most once.

    ``rows`` maps ``(thread_id, ns_hash, channel_hash, version)`` to a row with ``kind``,
    ``type``, ``value``, ``base_version`` and ``base_len``. Items decoded for a shared prefix
    are shared by the lists built from it (within one resolver, that is one read).
    """

    def __init__(self, serde: SerializerProtocol, rows: Mapping[tuple[str, ...], Any]) -> None:
        self.serde = serde
        self.rows = rows
        # version -> (spine, n): the value is spine[:n]; versions of an append-only chain
        # share one spine list, extended in place, so rebuilding a chain is linear.
        self._lists: dict[tuple[str, ...], tuple[list[Any], int]] = {}

    def has_value(self, key: tuple[str, ...]) -> bool:
        """True if ``key`` is stored with a value (not missing, not empty)."""
        row = self.rows.get(key)
        return row is not None and row.kind != EMPTY

    def value(self, key: tuple[str, ...]) -> Any:
        """The value stored under ``key`` (a fresh list object for list values)."""
        row = self.rows[key]
        if row.kind == VALUE and row.root_version is None:
            return loads(self.serde, row.type, row.value)
        spine, n = self._list(key)
        return spine[:n]

    def _list(self, key: tuple[str, ...]) -> tuple[list[Any], int]:
        chain: list[tuple[str, ...]] = []
        cur = key
        while cur not in self._lists:
            row = self.rows.get(cur)
            if row is None:
                raise LookupError(f"checkpoint storage: list version {cur[3]!r} is missing")
            chain.append(cur)
            if row.kind != DELTA:
                break
            cur = (*cur[:3], row.base_version)
        base = self._lists.get(cur)  # decoded earlier, or None at a full value
        for k in reversed(chain):
            row = self.rows[k]
            decoded = list(loads(self.serde, row.type, row.value))
            if row.kind == DELTA:
                assert base is not None
                spine, n = base
                if row.base_len == n == len(spine):
                    spine.extend(decoded)  # nobody extended this spine past n: append
                else:
                    spine = spine[: row.base_len] + decoded
                base = (spine, row.base_len + len(decoded))
            else:
                base = (decoded, len(decoded))
            self._lists[k] = base
        return self._lists[key]

    def cache_entry(self, key: tuple[str, ...], items: list[Any]) -> CachedList | None:
        """A :class:`ListCache` entry for the list ``items`` just returned for ``key``."""
        row = self.rows.get(key)
        if row is None or row.root_version is None:
            return None
        root = (*key[:3], row.root_version)
        decoded = self._lists.get(root)
        if decoded is None:  # the chain's root was not read (a fallback full copy intervened)
            return None
        return CachedList(
            key[3], row.root_version, row.depth, list(items), _shapes(items), decoded[1]
        )
