"""LangGraph checkpointer on SQL: :class:`SQLSaver` (sync and async in one object)."""

from .saver import SQLSaver, ThreadInfo

__all__ = ["SQLSaver", "ThreadInfo"]
