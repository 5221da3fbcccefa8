"""A database server that is not there fails the first call at once (or within the connect
timeout, 3 s by default), with the package's typed error: nothing listening, a peer that never
answers, a peer that resets the connection. The retry deadline is for servers that were
reachable and went away (see test_hardening_faults.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langmem_sqlite import ConversationStore, SQLSaver, SQLStore
from langmem_sqlite.engine import DatabaseUnavailableError

SCHEMES = {
    "postgres": "postgresql://postgres:pw@127.0.0.1:{port}/x",
    "mariadb": "mariadb://root:pw@127.0.0.1:{port}/x",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _peer(behaviour: str) -> Iterator[int]:
    """A TCP server on a free loopback port that accepts connections and then never answers
    (``silent``) or resets them at once (``reset``)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            if behaviour == "reset":
                conn.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                conn.close()
            else:
                held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        for c in held:
            c.close()
        server.close()


def _calls(url: str) -> list[tuple[str, Callable[[], Any]]]:
    prefix = f"ff{uuid.uuid4().hex[:8]}_"
    return [
        (
            "history",
            lambda: ConversationStore(url, table_prefix=prefix).add_messages(
                "s", [HumanMessage("x")]
            ),
        ),
        ("store", lambda: SQLStore(url, table_prefix=prefix).get(("ns",), "k")),
        (
            "saver",
            lambda: SQLSaver(url, table_prefix=prefix).get_tuple(
                {"configurable": {"thread_id": "t"}}
            ),
        ),
        ("async store", lambda: asyncio.run(SQLStore(url, table_prefix=prefix).aget(("ns",), "k"))),
        (
            "async saver",
            lambda: asyncio.run(
                SQLSaver(url, table_prefix=prefix).aget_tuple({"configurable": {"thread_id": "t"}})
            ),
        ),
        (
            "async history",
            lambda: asyncio.run(ConversationStore(url, table_prefix=prefix).aget_messages("s")),
        ),
    ]


def _fails_within(url: str, bound: float) -> None:
    for name, call in _calls(url):
        start = time.monotonic()
        with pytest.raises(DatabaseUnavailableError) as info:
            call()
        elapsed = time.monotonic() - start
        assert elapsed < bound, f"{name}: failed after {elapsed:.1f}s (bound {bound}s)"
        text = str(info.value)
        assert "cannot connect" in text and ":pw@" not in text and "***" in text, text


@pytest.mark.parametrize("server", sorted(SCHEMES))
def test_nothing_listening_fails_at_once(server: str) -> None:
    _fails_within(SCHEMES[server].format(port=_free_port()), 1.5)


@pytest.mark.parametrize("server", sorted(SCHEMES))
def test_a_peer_that_resets_fails_at_once(server: str) -> None:
    with _peer("reset") as port:
        _fails_within(SCHEMES[server].format(port=port), 1.5)


def test_a_peer_that_never_answers_fails_within_the_connect_timeout() -> None:
    """PostgreSQL: libpq's ``connect_timeout`` bounds the whole start of a connection. (PyMySQL's
    bounds the TCP connection only: a MariaDB peer that accepts and never answers the handshake
    is bounded by a ``read_timeout`` the caller sets.)"""
    with _peer("silent") as port:
        url = SCHEMES["postgres"].format(port=port)
        start = time.monotonic()
        with pytest.raises(DatabaseUnavailableError):
            SQLStore(url, table_prefix="ff_").get(("ns",), "k")
        elapsed = time.monotonic() - start
        assert 2.5 <= elapsed < 6, f"waited {elapsed:.1f}s (connect timeout 3 s)"


def test_the_connect_timeout_is_configurable() -> None:
    """``connect_timeout`` in the URL's query (or in ``engine_args["connect_args"]``) wins."""
    with _peer("silent") as port:
        url = SCHEMES["postgres"].format(port=port)
        store = SQLStore(
            url, table_prefix="ff_", engine_args={"connect_args": {"connect_timeout": 5}}
        )
        start = time.monotonic()
        with pytest.raises(DatabaseUnavailableError):
            store.get(("ns",), "k")
        assert 4.5 <= time.monotonic() - start < 9


def test_the_cli_fails_fast_with_one_line() -> None:
    url = SCHEMES["postgres"].format(port=_free_port())
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "langmem_sqlite", "sessions", "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert elapsed < 8, f"the CLI took {elapsed:.1f}s to give up"
    out = (proc.stdout + proc.stderr).strip()
    assert "cannot connect" in out and "Traceback" not in out and ":pw@" not in out, out
