"""Sync methods that a coroutine may await, as on LangGraph's async stores.

LangGraph's async stores spell their lifecycle `await store.setup()`, `await store.sweep_ttl()`,
`await store.start_ttl_sweeper()` and `await store.stop_ttl_sweeper()`. The same methods of
[`SQLStore`][langmem_sqlite.SQLStore] are sync; decorated with `awaitable_from_coroutines`,
called from a coroutine (an `async def`, an async generator, or a notebook cell with a top-level
`await`) they return the awaitable of their `a` twin instead, so that code written for
AsyncSqliteStore or AsyncPostgresStore runs as it is without blocking its event loop. Called
from anywhere else they run at once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["awaitable_from_coroutines"]

F = TypeVar("F", bound=Callable[..., Any])

_ASYNC_CODE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def awaitable_from_coroutines(twin: str) -> Callable[[F], F]:
    """A method that, called from a coroutine, returns `self.<twin>(...)` (a coroutine with
    the same arguments) instead of running."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            frame = inspect.currentframe()
            caller = frame.f_back if frame is not None else None
            try:
                if caller is not None and caller.f_code.co_flags & _ASYNC_CODE:
                    return getattr(self, twin)(*args, **kwargs)
            finally:
                del frame, caller
            return method(self, *args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
