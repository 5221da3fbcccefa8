"""The LangGraph API server's checkpointer and store, named in `langgraph.json` as
`{"checkpointer": {"path": "langmem_sqlite.server.checkpointer"}, "store": {"path":
"langmem_sqlite.server.store"}}`, on `$LANGMEM_SQLITE_URL` (or `langmem.db`).

Both are built in a worker thread: the server's development mode refuses blocking calls on
the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .checkpoint import SQLSaver
from .defaults import default_connection
from .store import SQLStore


@asynccontextmanager
async def checkpointer() -> AsyncIterator[SQLSaver]:
    """A set-up [`SQLSaver`][langmem_sqlite.SQLSaver] on `$LANGMEM_SQLITE_URL` (or `langmem.db`)."""
    saver = await asyncio.to_thread(SQLSaver, default_connection())
    await saver.asetup()
    yield saver


@asynccontextmanager
async def store() -> AsyncIterator[SQLStore]:
    """A set-up [`SQLStore`][langmem_sqlite.SQLStore] on `$LANGMEM_SQLITE_URL` (or
    `langmem.db`), without a vector index (`search` by filter and namespace)."""
    sql_store = await asyncio.to_thread(SQLStore, default_connection())
    await sql_store.asetup()
    yield sql_store
