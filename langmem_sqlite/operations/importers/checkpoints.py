"""Any LangGraph checkpointer (`SqliteSaver` files, `PostgresSaver` databases) -> SQLSaver: the
source read through its own saver, written with `SQLSaver.put` and `put_writes` oldest first,
each checkpoint with the channel versions that changed since its parent, as a graph writes them.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from ...checkpoint import SQLSaver
from ...validation import check_id, check_list
from .report import ImportMismatchError, ImportReport, progress_bar, source_connection, source_name


@contextmanager
def open_sqlite_saver(path: str | Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """A `SqliteSaver` (langgraph-checkpoint-sqlite) reading an existing file: its
    connection refuses writes (`PRAGMA query_only`), so the file keeps its bytes and journal
    mode, and closing it leaves no `-wal` or `-shm` file.

    Raises:
        FileNotFoundError: no such file.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    if not Path(path).is_file():
        raise FileNotFoundError(f"source: no SQLite file at {Path(path).absolute()}")
    conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@contextmanager
def open_postgres_saver(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """A `PostgresSaver` (langgraph-checkpoint-postgres) on `postgresql://...`."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url.replace("postgresql+psycopg://", "postgresql://")) as s:
        yield s


def source_thread_ids(source_db: Any, table: str = "checkpoints") -> list[str]:
    """The thread ids in the anchor's `checkpoints` table (read with SQLAlchemy)."""
    with source_connection(source_db) as conn:
        if not sa.inspect(conn).has_table(table):
            raise ValueError(
                f"source: no table {table!r} in {source_name(conn)} (not a LangGraph "
                "checkpointer database)"
            )
        t = sa.Table(table, sa.MetaData(), autoload_with=conn)
        rows = conn.execute(sa.select(t.c.thread_id).distinct().order_by(t.c.thread_id))
        return [str(r[0]) for r in rows]


def _config(t: CheckpointTuple) -> RunnableConfig:
    return {"configurable": dict(t.config["configurable"])}


def _new_versions(t: CheckpointTuple, parent: CheckpointTuple | None) -> dict[str, Any]:
    now = t.checkpoint["channel_versions"]
    before = parent.checkpoint["channel_versions"] if parent else {}
    return {ch: v for ch, v in now.items() if before.get(ch) != v}


def _copy_one(
    target: SQLSaver,
    t: CheckpointTuple,
    parent: CheckpointTuple | None,
    metadata: Any,
    report: ImportReport,
) -> None:
    conf = t.config["configurable"]
    exists = target.get_tuple(_config(t)) is not None
    if exists:
        report.skipped += 1
    else:
        where = {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns", "")}
        if t.parent_config:  # put() takes the parent's id in the config
            where["checkpoint_id"] = t.parent_config["configurable"]["checkpoint_id"]
        put_config: RunnableConfig = {"configurable": where}
        target.put(put_config, t.checkpoint, metadata, _new_versions(t, parent))
        report.imported += 1
    by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in t.pending_writes or []:
        by_task[task_id].append((channel, value))
    for task_id, writes in by_task.items():
        target.put_writes(_config(t), writes, task_id)  # first write wins: safe to repeat
        if exists:
            report.writes_present += len(writes)
        else:
            report.writes += len(writes)


def _verify(target: SQLSaver, t: CheckpointTuple, metadata: Any) -> None:
    got = target.get_tuple(_config(t))
    if (
        got is None
        or got.checkpoint["channel_values"] != t.checkpoint["channel_values"]
        or dict(got.metadata or {}) != dict(metadata or {})
        or sorted(map(repr, got.pending_writes or [])) != sorted(map(repr, t.pending_writes or []))
    ):
        raise ImportMismatchError(
            f"thread {t.config['configurable']['thread_id']!r}: checkpoint "
            f"{t.config['configurable']['checkpoint_id']!r} reads back different (imported "
            "before under another user?)"
        )


def _thread_user(
    tuples: Sequence[CheckpointTuple], user_id: str | None, user_key: str | None
) -> str | None:
    """The user the imported thread belongs to: `user_id`, else the newest value of
    `user_key` in its checkpoints' metadata (`None`: leave the metadata as it is)."""
    if user_id is not None:
        return user_id
    if user_key is None:
        return None
    for t in tuples:  # newest first
        value = (t.metadata or {}).get(user_key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _with_user(t: CheckpointTuple, user: str | None) -> Any:
    return t.metadata if user is None else {**(t.metadata or {}), "user_id": user}


def import_checkpoints(
    source: BaseCheckpointSaver[Any],
    target: SQLSaver,
    thread_ids: Sequence[str],
    *,
    user_id: str | None = None,
    user_key: str | None = None,
    progress: bool = False,
) -> ImportReport:
    """Copy `thread_ids` (every namespace, checkpoint and pending write) from `source`.

    Checkpoints already in `target` are skipped (their writes are re-offered; first write
    wins), so the import can be re-run after an interruption. Every checkpoint is read back
    from `target` and compared (values, metadata, pending writes). Both databases are
    reached, and every thread is looked up, before anything is written.

    Args:
        source: the saver to read (see
            [`open_sqlite_saver`][langmem_sqlite.operations.importers.open_sqlite_saver],
            [`open_postgres_saver`][langmem_sqlite.operations.importers.open_postgres_saver]).
        target: where to import.
        thread_ids: the threads to import (a list: a single id is `[thread_id]`).
        user_id: the user the imported threads belong to: written as the `user_id` key of
            every checkpoint's metadata, as LangGraph does for a graph run with
            `configurable.user_id`, so that `list_threads(metadata={"user_id": ...})` and
            `langmem-sqlite users` find them.
        user_key: instead of `user_id`, take each thread's user from this key of its
            checkpoints' metadata (threads without it keep their metadata as it is).
        progress: show a progress bar (stderr).

    Raises:
        TypeError: `target` is not a [`SQLSaver`][langmem_sqlite.SQLSaver], or `thread_ids` is a
            single string.
        ValueError: both `user_id` and `user_key`.
        LookupError: a thread has no checkpoint in `source`.
        ImportMismatchError: a checkpoint reads back different.
    """
    if not isinstance(target, SQLSaver):
        raise TypeError(f"target: expected a SQLSaver, got {type(target).__name__}")
    ids = [check_id(t, "thread_ids") for t in check_list(thread_ids, "thread_ids")]
    if user_id is not None and user_key is not None:
        raise ValueError("user_id: give user_id or user_key, not both")
    if user_id is not None:
        user_id = check_id(user_id, "user_id")
    report = ImportReport("checkpoints", len(ids), container="threads", item="checkpoints")
    for thread_id in ids:  # a refused import creates nothing: the target is reached after
        if not list(source.list({"configurable": {"thread_id": thread_id}}, limit=1)):
            raise LookupError(f"thread_ids: no thread {thread_id!r} in the source")
    target.list_threads(limit=1)  # the target answers (and has its tables) before any bar
    without_user = 0
    with progress_bar("importing threads", len(ids), progress) as advance:
        for thread_id in ids:
            tuples = list(source.list({"configurable": {"thread_id": thread_id}}))
            user = _thread_user(tuples, user_id, user_key)
            without_user += user is None and user_key is not None
            tuples.reverse()  # oldest first: parents before children
            seen: dict[tuple[str, str], CheckpointTuple] = {}
            for t in tuples:
                conf = t.config["configurable"]
                parent_id = (
                    t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
                )
                parent = seen.get((conf.get("checkpoint_ns", ""), parent_id or ""))
                _copy_one(target, t, parent, _with_user(t, user), report)
                seen[(conf.get("checkpoint_ns", ""), conf["checkpoint_id"])] = t
            for t in tuples:
                _verify(target, t, _with_user(t, user))
            advance()
    if user_key is not None:
        report.details["threads_without_user"] = without_user
    report.verified = True
    return report
