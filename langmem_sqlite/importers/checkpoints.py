"""Any LangGraph checkpointer (``SqliteSaver`` files, ``PostgresSaver`` databases) -> SQLSaver.

The source is read through its own saver (``list`` per thread), so whatever it stores
(inline values, blobs, writes) comes back as LangGraph objects; they are written with
:meth:`SQLSaver.put` and :meth:`SQLSaver.put_writes` oldest first, each checkpoint with the
channel versions that changed since its parent, exactly as a running graph writes them.
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

from ..checkpoint import SQLSaver
from .report import ImportMismatchError, ImportReport, progress_bar, source_engine

__all__ = [
    "import_checkpoints",
    "open_postgres_saver",
    "open_sqlite_saver",
    "source_thread_ids",
]


@contextmanager
def open_sqlite_saver(path: str | Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """A ``SqliteSaver`` (langgraph-checkpoint-sqlite) on an existing file.

    Raises:
        FileNotFoundError: no such file.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    if not Path(path).is_file():
        raise FileNotFoundError(f"source: no SQLite file {str(path)!r}")
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@contextmanager
def open_postgres_saver(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """A ``PostgresSaver`` (langgraph-checkpoint-postgres) on ``postgresql://...``."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url.replace("postgresql+psycopg://", "postgresql://")) as s:
        yield s


def source_thread_ids(source_db: Any, table: str = "checkpoints") -> list[str]:
    """The thread ids in the anchor's ``checkpoints`` table (read with SQLAlchemy)."""
    with source_engine(source_db).connect() as conn:
        if not sa.inspect(conn).has_table(table):
            raise ValueError(f"source: no {table!r} table (not a LangGraph checkpointer database)")
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
    target: SQLSaver, t: CheckpointTuple, parent: CheckpointTuple | None, report: ImportReport
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
        target.put(put_config, t.checkpoint, t.metadata, _new_versions(t, parent))
        report.imported += 1
    by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in t.pending_writes or []:
        by_task[task_id].append((channel, value))
    for task_id, writes in by_task.items():
        target.put_writes(_config(t), writes, task_id)  # first write wins: safe to repeat
        if not exists:
            report.writes += len(writes)


def _verify(target: SQLSaver, t: CheckpointTuple) -> None:
    got = target.get_tuple(_config(t))
    if (
        got is None
        or got.checkpoint["channel_values"] != t.checkpoint["channel_values"]
        or dict(got.metadata or {}) != dict(t.metadata or {})
        or sorted(map(repr, got.pending_writes or [])) != sorted(map(repr, t.pending_writes or []))
    ):
        raise ImportMismatchError(
            f"thread {t.config['configurable']['thread_id']!r}: checkpoint "
            f"{t.config['configurable']['checkpoint_id']!r} reads back different"
        )


def import_checkpoints(
    source: BaseCheckpointSaver[Any],
    target: SQLSaver,
    thread_ids: Sequence[str],
    *,
    progress: bool = False,
) -> ImportReport:
    """Copy ``thread_ids`` (every namespace, checkpoint and pending write) from ``source``.

    Checkpoints already in ``target`` are skipped (their writes are re-offered; first write
    wins), so the import can be re-run after an interruption. Every checkpoint is read back
    from ``target`` and compared (values, metadata, pending writes).

    Raises:
        TypeError: ``target`` is not a :class:`SQLSaver`.
        LookupError: a thread has no checkpoint in ``source``.
        ImportMismatchError: a checkpoint reads back different.
    """
    if not isinstance(target, SQLSaver):
        raise TypeError(f"target: expected a SQLSaver, got {type(target).__name__}")
    report = ImportReport("checkpoints", containers=len(thread_ids))
    with progress_bar("importing threads", len(thread_ids), progress) as bar:
        for thread_id in thread_ids:
            tuples = list(source.list({"configurable": {"thread_id": thread_id}}))
            if not tuples:
                raise LookupError(f"thread_ids: no thread {thread_id!r} in the source")
            tuples.reverse()  # oldest first: parents before children
            seen: dict[tuple[str, str], CheckpointTuple] = {}
            for t in tuples:
                conf = t.config["configurable"]
                parent_id = (
                    t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
                )
                parent = seen.get((conf.get("checkpoint_ns", ""), parent_id or ""))
                _copy_one(target, t, parent, report)
                seen[(conf.get("checkpoint_ns", ""), conf["checkpoint_id"])] = t
            for t in tuples:
                _verify(target, t)
            bar.advance()
    report.verified = True
    return report
