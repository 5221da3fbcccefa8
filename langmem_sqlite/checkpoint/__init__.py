"""LangGraph checkpointer on SQL: :class:`SQLSaver` (sync and async in one object)."""

from .codec import CheckpointEncryptionError
from .saver import SQLSaver, ThreadInfo

__all__ = ["CheckpointEncryptionError", "SQLSaver", "ThreadInfo"]
