"""What the tests share besides fixtures: the server URLs, the backends, the console script.

Server URLs come from ``LANGMEM_TEST_POSTGRES_URL``, ``LANGMEM_TEST_MARIADB_URL`` and
``LANGMEM_TEST_PGBOUNCER_URL`` (defaults: the local servers, and a PgBouncer in transaction
pooling mode in front of the PostgreSQL server, which ``.ci/pgbouncer`` starts). A server that
cannot be reached skips its tests locally, and FAILS them when ``CI=true`` (or
``LANGMEM_REQUIRE_SERVERS=1``), so CI never passes by skipping.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from langmem_sqlite.engine import get_database

POSTGRES_URL = os.environ.get(
    "LANGMEM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
MARIADB_URL = os.environ.get("LANGMEM_TEST_MARIADB_URL", "mariadb://root@127.0.0.1:3306/test")
PGBOUNCER_URL = os.environ.get(
    "LANGMEM_TEST_PGBOUNCER_URL", "postgresql://postgres@127.0.0.1:6432/test"
)
REQUIRE_SERVERS = os.environ.get("CI", "").lower() == "true" or bool(
    os.environ.get("LANGMEM_REQUIRE_SERVERS")
)
BACKENDS = ["sqlite", "postgres", "mariadb", "pgbouncer"]
_SERVER_URLS = {"postgres": POSTGRES_URL, "mariadb": MARIADB_URL, "pgbouncer": PGBOUNCER_URL}

CONSOLE_SCRIPT = str(Path(sys.executable).with_name("langmem-sqlite"))
"""The installed console script of the Python running the tests."""

NO_KEY = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
"""The environment without a model API key (the chat then runs offline)."""


def console(
    *args: str,
    input: str = "",
    stdin: Any = None,
    env: dict[str, str] | None = None,
    cwd: os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``langmem-sqlite ARGS``: the real console script in a new process, without an API key
    (unless ``env`` gives one), ``input`` on its stdin (or the file ``stdin``). The timeout only
    guards against a hang."""
    feed: dict[str, Any] = {"stdin": stdin} if stdin is not None else {"input": input}
    return subprocess.run(
        [CONSOLE_SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**NO_KEY, "COLUMNS": "200", **(env or {})},
        cwd=cwd,
        **feed,
    )


_reachable: dict[str, str | None] = {}


def _check_server(url: str) -> str | None:
    """None if the server answers, else the error text (cached per URL)."""
    if url not in _reachable:
        try:
            engine = sa.create_engine(get_database(url).url, pool_pre_ping=True)
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            engine.dispose()
            _reachable[url] = None
        except Exception as e:  # pragma: no cover - depends on the machine
            _reachable[url] = f"{type(e).__name__}: {e}"
    return _reachable[url]


def server_url(backend: str) -> str:
    """The URL of a server backend, or skip/fail the test if the server is unreachable."""
    url = _SERVER_URLS[backend]
    error = _check_server(url)
    if error is not None:
        message = f"{backend} server at {url} unreachable: {error}"
        if REQUIRE_SERVERS:
            pytest.fail(message)
        pytest.skip(message)
    return url


def backend_url(backend: str, tmp_path: os.PathLike[str]) -> str:
    """A database URL for ``backend``: a fresh SQLite file, or the test server."""
    if backend == "sqlite":
        return f"sqlite:///{os.fspath(tmp_path)}/test.db"
    return server_url(backend)


_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg_async",
    "mysql": "mysql+asyncmy",
    "mariadb": "mariadb+asyncmy",
}


def async_url(url: str) -> sa.URL:
    """The same database as ``url`` through its async driver (for an ``AsyncEngine``)."""
    parsed = get_database(url).url
    return parsed.set(drivername=_ASYNC_DRIVERS[parsed.get_backend_name()])


def cfg(thread: str, ns: str = "", **extra: Any) -> dict[str, Any]:
    """A checkpointer config: `thread` and checkpoint namespace `ns`, and `extra` keys."""
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, **extra}}


def graph_cfg(thread: str, **extra: Any) -> dict[str, Any]:
    """A graph's run config: `thread` and `extra` keys (the graph sets the namespace)."""
    return {"configurable": {"thread_id": thread, **extra}}
