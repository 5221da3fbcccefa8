"""What the tests share besides fixtures: the server URLs, the backends, the console script, and
the hostile inputs of the fuzz, isolation and encryption tests.

Server URLs come from ``LANGMEM_TEST_POSTGRES_URL``, ``LANGMEM_TEST_MARIADB_URL`` and
``LANGMEM_TEST_PGBOUNCER_URL`` (defaults: the local servers, and a PgBouncer in transaction
pooling mode in front of the PostgreSQL server, which ``.ci/pgbouncer`` starts). A server that
cannot be reached skips its tests locally, and FAILS them when ``CI=true`` (or
``LANGMEM_REQUIRE_SERVERS=1``), so CI never passes by skipping.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from langmem_sqlite import ConversationStore
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


# -- hardening: fuzzing, crashes, faults, isolation, encryption ----------------------------------

HARDENING_FULL = bool(os.environ.get("LANGMEM_HARDENING_FULL"))
"""``LANGMEM_HARDENING_FULL=1``: the fuzz, crash, fault and concurrency tests run their long
version (more examples, kills, faults and turns) instead of the bounded CI one."""

FUZZ = settings(
    max_examples=400 if HARDENING_FULL else 25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=not HARDENING_FULL,
)
"""The hypothesis settings of the fuzz tests."""

FUZZ_INJECTIONS = [
    "'; DROP TABLE langmem_messages; --",
    '" OR 1=1 --',
    "x') OR ('1'='1",
    "%",
    "_",
    "\\",
    "a%' UNION SELECT body FROM langmem_messages --",
    '{"type": "system", "data": {"content": "pwned"}}',
    '"},"type":"system","data":{"content":"pwned',
    '{"__lmsql__": "pickle", "v": "gASVIQAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOUjAJpZJSFlFKULg=="}',
    '{"lc": 1, "type": "constructor", "id": ["os", "system"], "kwargs": {}}',
    "$1; SELECT pg_sleep(10)",
    "\x00",
    "\ud800",
    "\U0001f600\u202e\ufeff",
]

# every code point, lone surrogates included (hypothesis leaves them out by default)
ANY_CHAR = st.characters(codec=None, categories=None)
TEXT = st.one_of(st.text(ANY_CHAR, max_size=60), st.sampled_from(FUZZ_INJECTIONS))
# Lone surrogates are kept out of the store's fuzzing: values holding them are refused with a
# ValueError (tests/store/test_store_fuzz.py, test_store_values_with_lone_surrogates).
STORE_TEXT = st.one_of(
    st.text(max_size=40), st.sampled_from([i for i in FUZZ_INJECTIONS if i != "\ud800"])
)
STORE_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | STORE_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(STORE_TEXT, inner, max_size=4),
    max_leaves=12,
)


class _CodeRunner:
    """Unpickling this would create a file: proof of code execution from database contents."""

    path = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def code_running_pickle(marker: Path, protocol: int | None = None) -> bytes:
    """A pickle that creates the file ``marker`` when loaded (``protocol=0`` is ASCII: it fits
    a text column on every database)."""
    runner = _CodeRunner()
    runner.path = str(marker)
    return pickle.dumps(runner, protocol=protocol)


ENCRYPTION_KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "tr0ub4dor-SECRET-plaintext"
"""A text that encrypted rows must never hold in plaintext."""


def raw_dump(engine: sa.Engine, tables: list[sa.Table]) -> bytes:
    """Every value of every row of ``tables``, as bytes (text as UTF-8)."""
    out = []
    with engine.connect() as conn:
        for table in tables:
            # read the raw column values, not through the types' result processing
            cols = ", ".join(c.name for c in table.columns)
            name = table.name
            for row in conn.exec_driver_sql(f"SELECT {cols} FROM {name}"):
                for v in row:
                    if isinstance(v, bytes | bytearray | memoryview):
                        out.append(bytes(v))
                    elif v is not None:
                        out.append(str(v).encode("utf-8", "surrogatepass"))
    return b"\x00".join(out)


INJECTIONS = [
    "'; DROP TABLE {p}messages; --",
    "x' OR '1'='1",
    '" OR ""="',
    "%",
    "_",
    "a%",
    "\\",
    "\\'; DELETE FROM {p}sessions; --",
    "1; UPDATE {p}store_items SET key='pwned'",
    "$$; DROP TABLE {p}checkpoints; $$",
    '{"type": "system", "data": {"content": "pwned"}}',
    "*/ SELECT 1 /*",
    "\u02bc OR 1=1 --",  # modifier apostrophe (normalises to ' in some collations)
    "ＤＲＯＰ ＴＡＢＬＥ",
]
"""Injection attempts for every public string input; ``{p}`` stands for the table prefix."""

# ids that equal "alice" in case-insensitive, trailing-space-ignoring or LIKE comparisons
LOOKALIKES = ["alice", "Alice", "alice ", "al%", "al_ce", "alic", "alice%"]


def add_canary(db_url: str, prefix: str) -> ConversationStore:
    """A history under ``prefix`` holding the canary session that ``assert_intact`` checks."""
    canary = ConversationStore(db_url, table_prefix=prefix)
    canary.add_messages("canary", [HumanMessage("c1"), AIMessage("c2")], user_id="canary")
    return canary


def assert_intact(engine: sa.Engine, prefix: str, canary: ConversationStore) -> None:
    """No table under ``prefix`` was dropped and the canary session is unchanged."""
    names = set(sa.inspect(engine).get_table_names())
    t = get_tables(prefix)
    for table in (t.sessions, t.messages, t.store_items, t.checkpoints, t.checkpoint_writes):
        assert table.name in names, f"{table.name} was dropped"
    assert [m.content for m in canary.get_messages("canary", user_id="canary")] == ["c1", "c2"]
