"""`SQLSaver`: a LangGraph checkpointer on SQLite, PostgreSQL or MariaDB/MySQL, sync and async.

One object serves ``graph.invoke``/``stream`` and ``ainvoke``/``astream``: every operation is
written once as a :data:`~langmem_sqlite.engine.Plan`; the sync method runs it with
:meth:`Database.drive`, the async one with :meth:`Database.adrive`. There is no instance lock:
each transaction checks a connection out of the pool, so threads and tasks run in parallel,
and ``list()`` holds nothing while it yields (it reads page by page).

Storage grows linearly with a conversation (see :mod:`langmem_sqlite.checkpoint.storage`),
every stored value goes through ``self.serde``, and the whole ``BaseCheckpointSaver`` contract
of langgraph-checkpoint 4 is implemented, including ``delete_for_runs``, ``copy_thread``,
DeltaChannel-aware ``prune`` and a one-walk ``get_delta_channel_history``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import math
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
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
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.constants import START
from sqlalchemy import exc
from sqlalchemy.engine import URL, Connection

from ..engine import Database, DatabaseLike, Plan, Step, get_database
from ..engine.migrations import schema_plan
from ..engine.schema import DEFAULT_PREFIX, ID_MAX_CHARS, Tables, get_tables
from ..validation import check_id, check_list, check_number, check_positive, check_text
from . import sql
from .codec import dumps, loads
from .meta import check_filter, json_copy, json_safe, matches, prefilter
from .storage import (
    DELTA,
    EMPTY,
    ListCache,
    ListState,
    Resolver,
    encode_channel,
    key_hash,
    next_version,
)

__all__ = ["SQLSaver", "ThreadInfo"]

_DAY_MS = 86_400_000
MAX_IDLE_DAYS = 100_000_000_000
"""The largest ``days`` of :meth:`SQLSaver.delete_idle_threads`: its cut-off time, in ms since
the epoch, then still fits the 64-bit integer column every database stores it in."""
_DELETE_BATCH = 200


@dataclass(frozen=True)
class ThreadInfo:
    """A thread as listed by :meth:`SQLSaver.list_threads` (times in ms since the epoch)."""

    thread_id: str
    created_at: int
    updated_at: int
    checkpoint_count: int
    """Checkpoints of the thread, all namespaces included."""
    metadata: dict[str, Any] | None
    """Scalar metadata of the thread's latest root checkpoint (``user_id``, ``source``...)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _version_text(version: Any, channel: str) -> str:
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


def _check_writes(writes: Any) -> list[tuple[str, Any]]:
    """``writes`` as a list of ``(channel, value)`` pairs; a ``str`` (or a mapping) is refused
    rather than taken apart into characters (or keys)."""
    items = check_list(writes, "writes")
    for i, item in enumerate(items):
        if not isinstance(item, tuple | list) or len(item) != 2:
            got = (
                type(item).__name__ if not isinstance(item, tuple | list) else f"{len(item)} items"
            )
            raise TypeError(f"writes[{i}]: expected a (channel, value) pair, got {got}")
    return [(ch, v) for ch, v in items]


def _ckpt_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


_NOT_IN_RECORD = frozenset({"id", "channel_values", "channel_versions"})


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


def _record_values(
    values: Mapping[str, Any], versions: Mapping[str, Any], delta: Any
) -> dict[str, Any]:
    """The channel values kept in the checkpoint's record instead of a blob row each.

    - Small scalars (:func:`_small`): None (``branch:to:<node>`` triggers, at every step of
      every graph), counters, flags, routing names. A row and its index entries take about 250
      bytes and a third of a small ``put``'s time; in the record such a value takes a few.
    - The graph's input (``__start__``), read by the next step only.

    Each record whose checkpoint holds such a value has it again, so every record is whole on
    its own: which values are kept there depends on the value alone, the same for every
    checkpoint that holds its version. (A scalar that never changes is thus copied into each
    record, a few bytes each.) Delta channels keep their rows: their history is read from the
    rows (``delta``: their names, see :func:`_delta_names`)."""
    return {
        ch: v
        for ch, v in values.items()
        if (ch == START or _small(v)) and ch in versions and ch not in delta
    }


def _delta_names(metadata: Mapping[str, Any]) -> Any:
    """The delta channels named by a checkpoint's metadata."""
    counters = metadata.get("counters_since_delta_snapshot")
    return counters if isinstance(counters, Mapping) else ()


def _split_versions(
    versions: Mapping[str, Any], values: Mapping[str, Any], inline: Mapping[str, Any], delta: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(column, record)``: the versions of channels with a blob row go to the ``versions``
    column, which the SQL reads (blob keys, ancestor walks, clean-up); the versions of the
    others (values kept in the record, channels without a value) go to the compressed record.
    Delta channels always stay in the column. A channel whose value is in the record is named
    in the column too, with ``None``: an ancestor walk must see that this checkpoint holds a
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
class _Scope:
    thread_id: str
    ns: str
    ns_hash: str
    checkpoint_id: str | None


def _scope(config: Any, name: str = "config") -> _Scope:
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(conf, Mapping):
        raise ValueError(f"{name}: expected a RunnableConfig with a 'configurable' mapping")
    thread_id = check_id(conf.get("thread_id"), f"{name}.configurable.thread_id")
    ns = conf.get("checkpoint_ns")
    ns = "" if ns is None else check_text(ns, f"{name}.configurable.checkpoint_ns")
    cid = conf.get("checkpoint_id")
    cid = check_id(cid, f"{name}.configurable.checkpoint_id") if cid else None
    return _Scope(thread_id, ns, key_hash(ns), cid)


class _Pager:
    """The state of one ``list()`` call: which page to read next and how many items remain."""

    def __init__(
        self, saver: SQLSaver, query: sql.ListQuery, filter: dict[str, Any], limit: int | None
    ) -> None:
        self.saver, self.query, self.filter, self.left = saver, query, filter, limit
        self.cursor: tuple[str, str, str] | None = None
        self.done = limit == 0

    def plan(self) -> Plan[list[CheckpointTuple]]:
        """Read the next page."""
        size = self.saver.page_size
        if self.left is not None and not self.filter:
            size = min(size, self.left)
        rows, writes, blobs = yield from self.saver._op(
            sql.list_page, self.query, self.cursor, size, single=True
        )
        if len(rows) < size:
            self.done = True
        else:
            last = rows[-1]
            self.cursor = (last.checkpoint_id, last.thread_id, last.ns_hash)
        resolver = Resolver(self.saver._loads, blobs)
        out = []
        for row in rows:
            metadata = self.saver._loads(row.metadata_type, row.metadata)
            if self.filter and not matches(metadata, self.filter):
                continue
            key = (row.thread_id, row.ns_hash, row.checkpoint_id)
            out.append(self.saver._tuple(row, metadata, writes.get(key, []), resolver, False))
        return out

    def take(self, items: list[CheckpointTuple]) -> list[CheckpointTuple]:
        """The part of a page still within ``limit``."""
        if self.left is not None:
            items = items[: self.left]
            self.left -= len(items)
            self.done = self.done or self.left <= 0
        return items


class _SaverContext:
    """What :meth:`SQLSaver.from_conn_string` returns: usable with ``with`` and ``async with``.

    ``owned``: the saver's connections were opened for this block (it was given a URL or a
    path), so leaving the block closes them."""

    def __init__(self, saver: SQLSaver, owned: bool) -> None:
        self.saver = saver
        self.owned = owned

    def __enter__(self) -> SQLSaver:
        self.saver.setup()
        return self.saver

    def __exit__(self, *exc_info: object) -> None:
        if self.owned:
            self.saver.db.dispose()

    async def __aenter__(self) -> SQLSaver:
        await self.saver.asetup()
        return self.saver

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.owned:
            await self.saver.db.adispose()
            self.saver.db.dispose()


def _enable_auto_vacuum(conn: Connection) -> None:
    """On a new SQLite file, switch to incremental auto-vacuum (before it holds data).

    Runs as a step of its own (``VACUUM`` cannot run in a transaction), so async callers run it
    on the async engine instead of blocking their event loop.
    """
    conn.execution_options(isolation_level="AUTOCOMMIT")
    if conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() != 0:
        return
    if (conn.exec_driver_sql("PRAGMA page_count").scalar() or 0) > 64:
        return
    conn.exec_driver_sql("PRAGMA auto_vacuum = INCREMENTAL")
    conn.exec_driver_sql("VACUUM")


class SQLSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer storing threads in SQL, for sync and async graphs alike.

    Args:
        conn: a URL (``"sqlite:///chat.db"``, ``"postgresql://..."``, ``"mariadb://..."``), a
            path (a SQLite file), a SQLAlchemy ``Engine`` or ``AsyncEngine``, or a
            :class:`~langmem_sqlite.Database`. Pools are shared per URL.
        serde: the serializer for everything stored (default: LangGraph's
            ``JsonPlusSerializer``, no pickle fallback; wrap it in ``EncryptedSerializer`` to
            encrypt values, deltas, checkpoints, metadata and writes at rest).
        encrypted_only: refuse stored values that ``serde`` (an ``EncryptedSerializer``) did
            not write: a read that meets one raises :class:`CheckpointEncryptionError`. A
            value stored unencrypted (by a saver without the key, or before encryption was
            turned on) and one that the key cannot decrypt (another key, or altered bytes)
            are refused alike. On by default with an ``EncryptedSerializer``; pass ``False``
            to read a database that holds rows written before encryption was turned on
            (``EncryptedSerializer`` then reads unencrypted values as they are).
        table_prefix: prefix of the table names.
        schema: PostgreSQL schema for the tables.
        engine_args: extra ``create_engine`` arguments when ``conn`` is a URL.
        list_cache_size: how many ``(thread, namespace, channel)`` lists to remember for
            storing the next version as a delta (their versions and item digests, never the
            items; 0 disables deltas: every list is stored whole).
        page_size: checkpoints read per query by :meth:`list`.
        searchable_metadata: keep a plain JSON copy of the metadata's scalar keys, so that SQL
            narrows ``list(filter=...)`` and :meth:`list_threads` can filter by metadata. Off by
            default when ``serde`` is an ``EncryptedSerializer`` (nothing stays in plaintext;
            ``list(filter=...)`` then filters the decrypted metadata in Python).

    The tables are created on first use (:meth:`setup` does it explicitly). The metadata's
    scalar keys are also kept as plain JSON for filtering; the serialized metadata is the
    source of truth.

    What a read returns is the caller's own, as with LangGraph's serializing savers: every
    value is decoded afresh for each call, so changing a returned message, dict or list (or the
    objects given to :meth:`put`) changes nothing stored and nothing another call returned.

    Raises:
        ValueError: ``encrypted_only=True`` without an ``EncryptedSerializer``.
    """

    def __init__(
        self,
        conn: DatabaseLike | Database,
        *,
        serde: SerializerProtocol | None = None,
        table_prefix: str = DEFAULT_PREFIX,
        schema: str | None = None,
        engine_args: dict[str, Any] | None = None,
        list_cache_size: int = 256,
        page_size: int = 100,
        searchable_metadata: bool | None = None,
        encrypted_only: bool | None = None,
    ) -> None:
        cache_size = check_positive(list_cache_size, "list_cache_size", allow_zero=True)
        page = check_positive(page_size, "page_size")
        super().__init__(serde=serde)
        encrypted = isinstance(serde, EncryptedSerializer)
        if searchable_metadata is None:
            searchable_metadata = not encrypted
        self.searchable_metadata = bool(searchable_metadata)
        if encrypted_only is None:
            encrypted_only = encrypted
        elif encrypted_only and not encrypted:
            raise ValueError("encrypted_only: needs an EncryptedSerializer as serde")
        self.encrypted_only = bool(encrypted_only)
        self.db: Database = get_database(conn, engine_args=engine_args)
        self.tables: Tables = get_tables(table_prefix, schema)
        self.lists = ListCache(cache_size)
        self.page_size = page

    @classmethod
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> _SaverContext:
        """A context manager (``with`` or ``async with``) yielding a set-up saver.

        Given a URL or a path, leaving the block closes the connections the saver's engines
        hold (sync and, after ``async with``, the event loop's async pool), so that the
        database can be dropped or the file removed right after. The pool is shared per URL:
        another saver of the same URL opens new connections at its next use. Given an
        ``Engine``, an ``AsyncEngine`` or a :class:`~langmem_sqlite.Database`, the block
        leaves it as it found it: the caller owns it.
        """
        owned = isinstance(conn_string, str | os.PathLike | URL)
        return _SaverContext(cls(conn_string, **kwargs), owned)

    # -- plumbing --------------------------------------------------------------------------

    def _ready_plan(self) -> Plan[None]:
        key = ("checkpointer", self.tables.key)
        if key not in self.db.ready:
            if self.db.dialect == "sqlite" and self.db.url.database not in (None, "", ":memory:"):
                # once per process, before the tables exist; an optimisation only: a busy
                # file keeps its mode
                with contextlib.suppress(exc.DBAPIError):
                    yield Step(_enable_auto_vacuum, (), own_transaction=True)
            yield from schema_plan(self.db, self.tables)
            with self.db.lock:
                self.db.ready.add(key)

    def _op(self, fn: Any, *args: Any, write: bool = False, single: bool = False) -> Plan[Any]:
        """Run ``fn(conn, tables, *args)`` in a transaction.

        ``single``: ``fn`` makes one statement, or only reads rows that are never updated in
        place; on PostgreSQL it then runs in autocommit mode, which saves the BEGIN and COMMIT
        round trips (SQLite has none to save, and keeps its ``BEGIN IMMEDIATE``). Every
        operation runs on the light lane (:mod:`langmem_sqlite.engine.session`).
        """
        yield from self._ready_plan()
        # SQLite keeps its transaction: a snapshot costs nothing there
        single = single and self.db.dialect != "sqlite"
        return (yield Step(fn, (self.tables, *args), write=write, lite=True, single=single))

    def _loads(self, type_: str, data: Any) -> Any:
        if type_ == sql.CARRIED_NULL:
            return None
        return loads(self.serde, type_, data, encrypted_only=self.encrypted_only)

    def _tuple(
        self, row: Any, metadata: Any, writes: Sequence[Any], resolver: Resolver, remember: bool
    ) -> CheckpointTuple:
        """The checkpoint tuple of ``row``, every value decoded afresh. ``remember``: note
        the lists read in :attr:`lists`, so that the next ``put`` stores them as deltas."""
        versions = json.loads(row.versions)
        ns = row.checkpoint_ns
        values: dict[str, Any] = {}
        for ch, v in versions.items():  # the channels with rows (see _split_versions)
            if v is None:
                continue  # kept in the record
            key = (row.thread_id, row.ns_hash, key_hash(ch), str(v))
            if not resolver.has_value(key):
                continue
            if not (remember and self.lists.size):
                values[ch] = resolver.value(key)
                continue
            values[ch], state = resolver.value_and_state(key)
            if state is not None:
                known = self.lists.get((row.thread_id, ns, ch))
                if known is None or known.version != state.version:
                    self.lists.put((row.thread_id, ns, ch), state)
        checkpoint = self._loads(row.type, row.checkpoint)
        # the versions and values kept in the record itself (see _split_versions and
        # _record_values)
        versions.update(checkpoint.pop("channel_versions", None) or {})
        versions = {ch: v for ch, v in versions.items() if v is not None}
        for ch, value in (checkpoint.pop("channel_values", None) or {}).items():
            if ch in versions:
                values[ch] = value
        checkpoint["id"] = row.checkpoint_id
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = versions
        ordered = sorted(writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
        parent = row.parent_checkpoint_id
        return CheckpointTuple(
            config=_ckpt_config(row.thread_id, ns, row.checkpoint_id),
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=_ckpt_config(row.thread_id, ns, parent) if parent else None,
            pending_writes=[(w.task_id, w.channel, self._loads(w.type, w.value)) for w in ordered],
        )

    # -- plans: each operation written once ------------------------------------------------------

    def _setup_plan(self) -> Plan[None]:
        yield from self._ready_plan()

    def _get_plan(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        s = _scope(config)
        found = yield from self._op(
            sql.read_checkpoint, s.thread_id, s.ns_hash, s.checkpoint_id, single=True
        )
        if found is None:
            return None
        row, writes, blobs = found
        metadata = self._loads(row.metadata_type, row.metadata)
        return self._tuple(row, metadata, writes, Resolver(self._loads, blobs), True)

    def _pager(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> _Pager:
        exact = check_filter(filter)
        if limit is not None:
            check_positive(limit, "limit", allow_zero=True)
        q = sql.ListQuery()
        if config is not None:
            s = _scope(config)
            q.thread_id, q.checkpoint_id = s.thread_id, s.checkpoint_id
            if config["configurable"].get("checkpoint_ns") is not None:
                q.ns_hash = s.ns_hash
        if before is not None:
            conf = before.get("configurable") if isinstance(before, Mapping) else None
            cid = conf.get("checkpoint_id") if isinstance(conf, Mapping) else None
            if not cid:
                raise ValueError("before: expected a config with configurable.checkpoint_id")
            q.before = check_id(cid, "before.configurable.checkpoint_id")
        cols = self.tables.checkpoints.c
        if self.searchable_metadata:
            q.conditions = prefilter(cols.metadata_json, exact, self.db.dialect)
        return _Pager(self, q, exact, limit)

    def _put_plan(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        s = _scope(config)
        if not isinstance(checkpoint, Mapping):
            raise TypeError("checkpoint: expected a Checkpoint mapping")
        cid = check_id(checkpoint.get("id"), "checkpoint['id']")
        values = checkpoint.get("channel_values") or {}
        versions = dict(checkpoint.get("channel_versions") or {})
        for ch, ver in versions.items():
            check_text(ch, "checkpoint['channel_versions'] key")
            _version_text(ver, ch)
        md = get_checkpoint_metadata(config, metadata)
        # The record: the checkpoint without its id (a column) and the values stored in blob
        # rows, with the values that take no row (see _record_values) and the versions of
        # the channels without a row (see _split_versions).
        body = {k: v for k, v in checkpoint.items() if k not in _NOT_IN_RECORD}
        delta = _delta_names(md)
        inline = _record_values(values, versions, delta)
        column, in_record = _split_versions(versions, values, inline, delta)
        if inline:
            body["channel_values"] = inline
        if in_record:
            body["channel_versions"] = in_record
        try:
            ctype, cdata = dumps(self.serde, body, "checkpoint")
        except ValueError:
            for ch, v in inline.items():  # name the channel at fault, if it is one
                dumps(self.serde, v, f"channel {ch!r}")
            raise
        mtype, mdata = dumps(self.serde, md, "metadata")
        md_json = json_copy(md) if self.searchable_metadata else None
        run_id = md.get("run_id")
        run_id = str(run_id) if run_id is not None else None
        if run_id is not None and (len(run_id) > ID_MAX_CHARS or "\x00" in run_id):
            run_id = None
        blobs: list[Any] = []
        entries: dict[str, ListState] = {}
        for ch, ver in (new_versions or {}).items():
            check_text(ch, "new_versions key")
            if ch in inline:
                _version_text(ver, ch)
                continue
            blob, entry = encode_channel(
                self.serde, self.lists, (s.thread_id, s.ns, ch), _version_text(ver, ch), values
            )
            if blob.kind != EMPTY:  # no row means "versioned, but no value"
                blobs.append(blob)
            if entry is not None:
                entries[ch] = entry
        row = sql.CheckpointRow(
            thread_id=s.thread_id,
            ns_hash=s.ns_hash,
            checkpoint_id=cid,
            checkpoint_ns=s.ns,
            parent_checkpoint_id=s.checkpoint_id,
            type=ctype,
            checkpoint=cdata,
            versions=json.dumps(column, separators=(",", ":")),
            metadata_type=mtype,
            metadata=mdata,
            metadata_json=md_json,
            run_id=run_id,
            created_at=_now_ms(),
        )
        thread_md = md_json if s.ns == "" else None
        # one statement on PostgreSQL (see sql.put_checkpoint): autocommit, one round trip
        stored = yield from self._op(
            sql.put_checkpoint, row, blobs, thread_md, write=True, single=True
        )
        for ch, entry in entries.items():
            b = stored.get(ch)
            if b is None:
                continue  # stored by an earlier put of this version
            self.lists.put((s.thread_id, s.ns, ch), entry if b.kind == DELTA else entry.as_root())
        return _ckpt_config(s.thread_id, s.ns, cid)

    def _writes_plan(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Plan[None]:
        s = _scope(config)
        if s.checkpoint_id is None:
            raise ValueError("config.configurable.checkpoint_id: required by put_writes")
        task_id = check_id(task_id, "task_id")
        check_text(task_path, "task_path")
        writes = _check_writes(writes)
        special = all(ch in WRITES_IDX_MAP for ch, _ in writes)
        rows: dict[int, dict[str, Any]] = {}
        # Writes of None after the call's first row ride on that row (its ``nulls``): one row
        # for a node's output and its ``branch:to:<node>`` triggers. Not for special channels,
        # which are upserted one by one.
        nulls: dict[int, str] = {}
        for i, (ch, value) in enumerate(writes):
            check_text(ch, "writes channel")
            idx = WRITES_IDX_MAP.get(ch, i)
            if (idx in rows or idx in nulls) and not special:
                continue  # first write wins, as in the database
            if value is None and rows and not special:
                nulls[idx] = ch
                continue
            type_, data = dumps(self.serde, value, f"write to channel {ch!r}")
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
                "nulls": None,
            }
        if nulls:
            carried = [[idx, ch] for idx, ch in nulls.items()]
            next(iter(rows.values()))["nulls"] = json.dumps(carried, separators=(",", ":"))
        if rows:
            # One statement, unless MySQL gets a value in parts (see sql.MYSQL_PART).
            single = all(len(r["value"]) <= sql.MYSQL_PART for r in rows.values())
            yield from self._op(
                sql.put_writes, list(rows.values()), special, write=True, single=single
            )

    def _history_plan(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Plan[dict[str, DeltaChannelHistory]]:
        s = _scope(config)
        chans = [check_text(ch, "channels") for ch in channels]
        out: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in chans}
        if not chans:
            return out
        found = yield from self._op(sql.delta_walk, s.thread_id, s.ns_hash, s.checkpoint_id, chans)
        if found is None:
            return out
        resolver = Resolver(self._loads, found.blobs)
        for ch in chans:
            seed = found.seeds.get(ch)
            idx = seed[0] if seed is not None else len(found.path) - 1
            collected: list[PendingWrite] = []
            for cp_id in reversed(found.path[: idx + 1]):
                rows = [
                    w
                    for w in found.writes.get((s.thread_id, s.ns_hash, cp_id), [])
                    if w.channel == ch
                ]
                rows.sort(key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
                collected += [(w.task_id, w.channel, self._loads(w.type, w.value)) for w in rows]
            entry: DeltaChannelHistory = {"writes": collected}
            if seed is not None and seed[1] is not None:
                entry["seed"] = resolver.value(seed[1])
            elif seed is not None:  # a value kept in that checkpoint's record
                record = self._loads(*found.records[found.path[idx]])
                entry["seed"] = record["channel_values"][ch]
            out[ch] = entry
        return out

    def _delete_plan(self, thread_id: str) -> Plan[None]:
        tid = check_id(thread_id, "thread_id")
        yield from self._op(sql.delete_threads, [tid], write=True)
        self.lists.forget_threads([tid])

    def _delete_runs_plan(self, run_ids: Sequence[str]) -> Plan[None]:
        if isinstance(run_ids, str) or not isinstance(run_ids, Sequence):
            raise TypeError("run_ids: expected a sequence of run ids")
        ids = [check_id(r, "run_ids") for r in run_ids]
        if ids:
            yield from self._op(sql.delete_for_runs, ids, write=True)
            self.lists.forget_threads()

    def _copy_plan(self, source_thread_id: str, target_thread_id: str) -> Plan[None]:
        src = check_id(source_thread_id, "source_thread_id")
        dst = check_id(target_thread_id, "target_thread_id")
        if src == dst:
            raise ValueError("target_thread_id: must differ from source_thread_id")
        yield from self._op(sql.copy_thread, src, dst, _now_ms(), write=True)

    def _delta_channels(self, row: Any) -> list[str]:
        metadata = self._loads(row.metadata_type, row.metadata)
        return [str(k) for k in _delta_names(metadata)] if isinstance(metadata, Mapping) else []

    def _prune_plan(self, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
        if isinstance(thread_ids, str) or not isinstance(thread_ids, Sequence):
            raise TypeError("thread_ids: expected a sequence of thread ids")
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"strategy: expected 'keep_latest' or 'delete', got {strategy!r}")
        ids = [check_id(t, "thread_ids") for t in thread_ids]
        if strategy == "delete":
            if ids:
                yield from self._op(sql.delete_threads, ids, write=True)
        else:
            for tid in ids:
                yield from self._op(sql.prune_keep_latest, tid, self._delta_channels, write=True)
        self.lists.forget_threads(ids)

    def _threads_plan(
        self, metadata: Mapping[str, Any] | None, limit: int | None, offset: int
    ) -> Plan[list[ThreadInfo]]:
        exact = check_filter(metadata, "metadata")
        if exact and not self.searchable_metadata:
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
        col = self.tables.checkpoint_threads.c.metadata
        conds = prefilter(col, exact, self.db.dialect)
        # The SQL conditions may over-select (see meta.prefilter): page in Python then.
        in_sql = not exact
        lim, off = (limit, offset) if in_sql else (None, 0)
        rows = yield from self._op(sql.list_threads, conds, lim, off)
        found = [
            ThreadInfo(r.thread_id, r.created_at, r.updated_at, r.checkpoint_count, r.metadata)
            for r in rows
            if matches(r.metadata, exact)
        ]
        if not in_sql:
            found = found[offset:]
            found = found if limit is None else found[:limit]
        return found

    def _idle_plan(self, days: float) -> Plan[int]:
        days = check_number(days, "days", low=0, high=MAX_IDLE_DAYS)
        cutoff = _now_ms() - int(days * _DAY_MS)
        total = 0
        while True:
            ids = yield from self._op(sql.delete_idle_threads, cutoff, _DELETE_BATCH, write=True)
            self.lists.forget_threads(ids)
            total += len(ids)
            if len(ids) < _DELETE_BATCH:
                return total

    # -- the public API: sync ---------------------------------------------------------------

    def setup(self) -> None:
        """Create or migrate the tables (idempotent; also done automatically on first use)."""
        self.db.drive(self._setup_plan())

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (the thread's latest without a ``checkpoint_id``),
        with its parent config and its pending writes in ``writes_sort_key`` order."""
        return self.db.drive(self._get_plan(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (and namespace, if given) or, with
        ``config=None``, of all threads; ``filter`` matches metadata keys by equality."""
        pager = self._pager(config, filter, before, limit)
        while not pager.done:
            yield from pager.take(self.db.drive(pager.plan()))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the values of its channels listed in ``new_versions``."""
        return self.db.drive(self._put_plan(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes (first write wins; special channels are replaced)."""
        self.db.drive(self._writes_plan(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value and write of a thread, in every namespace."""
        self.db.drive(self._delete_plan(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose ``metadata['run_id']`` is listed.

        Values still referenced by remaining checkpoints are kept. Deleting a run whose
        checkpoints a live ``DeltaChannel`` still needs breaks that channel (see ``prune``).
        """
        self.db.drive(self._delete_runs_plan(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread whole (every namespace, checkpoint, value and write; same ids).

        Raises:
            ValueError: the target thread already has checkpoints, or is the source.
        """
        self.db.drive(self._copy_plan(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's latest checkpoint, plus the ancestors its
        ``DeltaChannel`` values are rebuilt from (back to their nearest snapshot);
        ``delete``: delete the threads.

        Run it (and :meth:`delete_for_runs`) on threads that are not being written at the
        same moment: on PostgreSQL and MySQL a concurrent ``put`` could build a delta on a
        value this call is deleting (SQLite serializes writers, so it is safe there).
        """
        self.db.drive(self._prune_plan(thread_ids, strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes of ``channels`` along the parent chain back to each one's nearest stored
        value (the ``seed``), in one transaction with one recursive query per 900 ancestors."""
        return self.db.drive(self._history_plan(config, channels))

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        """A version greater than ``current`` and unique across forks."""
        return next_version(current)

    def list_threads(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[ThreadInfo]:
        """Threads, most recently updated first, with checkpoint counts (no value is read).

        ``metadata`` filters on the scalar metadata of each thread's latest checkpoint, e.g.
        ``{"user_id": "u1"}`` (keys of ``configurable`` are copied into metadata).
        """
        return self.db.drive(self._threads_plan(metadata, limit, offset))

    def delete_idle_threads(self, days: float) -> int:
        """Delete the threads not updated for ``days`` days; return how many."""
        return self.db.drive(self._idle_plan(days))

    def vacuum(self, *, full: bool = False) -> None:
        """Give freed space back to the OS (SQLite only; a no-op elsewhere).

        ``full=False`` runs ``PRAGMA incremental_vacuum`` (effective on files created by this
        saver, which turns on incremental auto-vacuum); ``full=True`` runs ``VACUUM``, which
        also switches an older file to incremental auto-vacuum. ``VACUUM`` rewrites the file
        and needs as much free disk space.
        """
        if self.db.dialect != "sqlite":
            return
        raw = self.db.sync_engine.raw_connection()
        try:
            conn: Any = raw.driver_connection
            if full:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("VACUUM")
            else:
                # executescript steps the pragma to completion (execute frees one page).
                conn.executescript("PRAGMA incremental_vacuum;")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            raw.close()

    # -- the public API: async (the same plans) ----------------------------------------------

    async def asetup(self) -> None:
        """Async :meth:`setup`."""
        await self.db.adrive(self._setup_plan())

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        return await self.db.adrive(self._get_plan(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        pager = self._pager(config, filter, before, limit)
        while not pager.done:
            for item in pager.take(await self.db.adrive(pager.plan())):
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return await self.db.adrive(self._put_plan(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        await self.db.adrive(self._writes_plan(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self.db.adrive(self._delete_plan(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self.db.adrive(self._delete_runs_plan(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self.db.adrive(self._copy_plan(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        await self.db.adrive(self._prune_plan(thread_ids, strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async :meth:`get_delta_channel_history`."""
        return await self.db.adrive(self._history_plan(config, channels))

    async def alist_threads(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[ThreadInfo]:
        """Async :meth:`list_threads`."""
        return await self.db.adrive(self._threads_plan(metadata, limit, offset))

    async def adelete_idle_threads(self, days: float) -> int:
        """Async :meth:`delete_idle_threads`."""
        return await self.db.adrive(self._idle_plan(days))

    async def avacuum(self, *, full: bool = False) -> None:
        """Async :meth:`vacuum` (in a worker thread)."""
        await asyncio.to_thread(self.vacuum, full=full)
