"""An application's own tools see the package's SQL: every statement goes through SQLAlchemy's
execution, so an engine's `before_cursor_execute` listeners, `echo=True` and OpenTelemetry's
SQLAlchemy instrumentation see each public operation of the history, the checkpointer and the
store, sync and async, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy.ext.asyncio import create_async_engine
from support import async_url, backend_url

from langmem_sqlite import SQLChatMessageHistory, SQLSaver, SQLStore, get_database

SERVERS = ["sqlite", "postgres", "mariadb"]


@pytest.fixture(params=SERVERS)
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return backend_url(str(request.param), tmp_path)


class Seen:
    """The statements an engine's `before_cursor_execute` listeners receive."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        self.statements.append(statement)

    def during(self, call: Callable[[], Any]) -> list[str]:
        self.statements.clear()
        call()
        return list(self.statements)


@pytest.fixture
def engine(url: str) -> Iterator[tuple[sa.Engine, Seen]]:
    """The application's own engine, with its own listener."""
    engine = sa.create_engine(get_database(url).url)  # the URL with the package's driver
    seen = Seen()
    sa.event.listen(engine, "before_cursor_execute", seen)
    yield engine, seen
    engine.dispose()


def _config(thread: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _prefix() -> str:
    return f"ev{uuid.uuid4().hex[:8]}_"


def test_history_operations_are_seen(engine: tuple[sa.Engine, Seen]) -> None:
    eng, seen = engine
    history = SQLChatMessageHistory("s1", eng, table_prefix=_prefix())
    operations: dict[str, Callable[[], Any]] = {
        "add_messages": lambda: history.add_messages([HumanMessage("hi"), AIMessage("hello")]),
        "messages": lambda: history.messages,
        "get_messages": lambda: history.get_messages(limit=1),
        "get_token_window": lambda: history.get_token_window(100),
        "clear": history.clear,
    }
    for name, call in operations.items():
        assert seen.during(call), name


def test_saver_operations_are_seen(engine: tuple[sa.Engine, Seen]) -> None:
    eng, seen = engine
    saver = SQLSaver(eng, table_prefix=_prefix())
    saver.setup()
    thread = uuid.uuid4().hex
    checkpoint = empty_checkpoint()
    stored: dict[str, Any] = {}

    def put() -> None:
        stored["config"] = saver.put(_config(thread), checkpoint, {"source": "input"}, {})

    operations: dict[str, Callable[[], Any]] = {
        "put": put,
        "put_writes": lambda: saver.put_writes(stored["config"], [("ch", 1)], "task-1"),
        "get_tuple": lambda: saver.get_tuple(_config(thread)),
        "list": lambda: list(saver.list(_config(thread))),
        "delete_thread": lambda: saver.delete_thread(thread),
    }
    for name, call in operations.items():
        assert seen.during(call), name


def test_store_operations_are_seen(engine: tuple[sa.Engine, Seen]) -> None:
    eng, seen = engine
    store = SQLStore(eng, table_prefix=_prefix())
    store.setup()
    operations: dict[str, Callable[[], Any]] = {
        "put": lambda: store.put(("users", "u1"), "k", {"v": 1}),
        "get": lambda: store.get(("users", "u1"), "k"),
        "search": lambda: store.search(("users",)),
        "list_namespaces": lambda: store.list_namespaces(),
        "delete": lambda: store.delete(("users", "u1"), "k"),
    }
    for name, call in operations.items():
        assert seen.during(call), name


def test_async_operations_are_seen_on_a_sync_engine(engine: tuple[sa.Engine, Seen]) -> None:
    """The async API on a sync engine runs the same statements in worker threads."""
    eng, seen = engine
    _async_operations(eng, seen)


def test_async_operations_are_seen_on_an_async_engine(url: str) -> None:
    """A caller's `AsyncEngine`: its sync core's listeners see the statements."""
    aengine = create_async_engine(async_url(url))
    seen = Seen()
    sa.event.listen(aengine.sync_engine, "before_cursor_execute", seen)
    try:
        _async_operations(aengine, seen)
    finally:
        asyncio.run(aengine.dispose())


def _async_operations(engine: Any, seen: Seen) -> None:
    prefix = _prefix()
    history = SQLChatMessageHistory("s1", engine, table_prefix=prefix)
    saver = SQLSaver(engine, table_prefix=prefix)
    store = SQLStore(engine, table_prefix=prefix)
    thread = uuid.uuid4().hex

    async def run() -> None:
        await saver.asetup()
        await store.asetup()
        config = await saver.aput(_config(thread), empty_checkpoint(), {}, {})
        operations: dict[str, Callable[[], Awaitable[Any]]] = {
            "aadd_messages": lambda: history.aadd_messages([HumanMessage("hi")]),
            "aget_messages": lambda: history.aget_messages(),
            "aclear": lambda: history.aclear(),
            "aput": lambda: saver.aput(_config(thread), empty_checkpoint(), {}, {}),
            "aput_writes": lambda: saver.aput_writes(config, [("ch", 1)], "task-1"),
            "aget_tuple": lambda: saver.aget_tuple(_config(thread)),
            "alist": lambda: _collect(saver.alist(_config(thread))),
            "adelete_thread": lambda: saver.adelete_thread(thread),
            "store.aput": lambda: store.aput(("users",), "k", {"v": 1}),
            "store.aget": lambda: store.aget(("users",), "k"),
            "store.asearch": lambda: store.asearch(("users",)),
            "store.adelete": lambda: store.adelete(("users",), "k"),
        }
        for name, call in operations.items():
            seen.statements.clear()
            await call()
            assert seen.statements, name

    asyncio.run(run())


async def _collect(items: Any) -> list[Any]:
    return [i async for i in items]


def test_echo_logs_the_statements(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    eng = sa.create_engine(f"sqlite:///{tmp_path}/echo.db", echo=True)
    store = SQLStore(eng)
    store.setup()
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    caplog.clear()
    store.put(("a",), "k", {"v": 1})
    assert store.get(("a",), "k") is not None
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("sqlalchemy.engine")]
    assert any("INSERT" in m for m in logged)
    assert any("SELECT" in m for m in logged)
    eng.dispose()


def test_opentelemetry_records_a_span_per_statement(tmp_path: Any) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    eng = sa.create_engine(f"sqlite:///{tmp_path}/otel.db")
    seen = Seen()
    sa.event.listen(eng, "before_cursor_execute", seen)
    instrumentor = SQLAlchemyInstrumentor()
    instrumentor.instrument(engine=eng, tracer_provider=provider, skip_dep_check=True)
    try:
        history = SQLChatMessageHistory("s1", eng)
        history.add_messages([HumanMessage("hi")])
        exporter.clear()
        seen.statements.clear()
        history.add_messages([AIMessage("hello")])
        assert [m.content for m in history.messages] == ["hi", "hello"]
        traced = [
            s.attributes["db.statement"]
            for s in exporter.get_finished_spans()
            if s.attributes and "db.statement" in s.attributes  # not the pool's "connect"
        ]
        assert seen.statements
        assert traced == seen.statements
    finally:
        instrumentor.uninstrument()
        eng.dispose()
