"""LangGraph checkpointer on SQL: [`SQLSaver`][langmem_sqlite.SQLSaver] (sync and async in one
object)."""

from .codec import CheckpointEncryptionError
from .saver import SQLSaver, ThreadInfo

__all__ = ["CheckpointEncryptionError", "SQLSaver", "ThreadInfo"]
