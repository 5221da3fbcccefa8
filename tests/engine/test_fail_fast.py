"""Fast, plain failures.

A database server that is not there fails the first call at once, without retries, with the
package's typed error: nothing listening, a peer that resets the connection, a peer that
accepts and never answers (bounded by the connect timeout, 3 s by default, on every driver).
The retry deadline is for servers that were reachable and went away (see
test_engine_faults.py). A SQLite file whose write lock another process holds makes a writer
wait up to the retry deadline, saying so after a second, while readers keep reading. The
command line prints one sentence naming the database, never a class name or a traceback
(unless asked with ``--debug``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import sqlite3
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from support import MARIADB_URL, POSTGRES_URL, console, server_url

from langmem_sqlite import ConversationStore, SQLSaver, SQLStore
from langmem_sqlite.engine import DatabaseUnavailableError, get_database

SCHEMES = {
    "postgres": "postgresql://postgres:pw@127.0.0.1:{port}/x",
    "mariadb": "mariadb://root:pw@127.0.0.1:{port}/x",
}

CLASS_NAME = re.compile(r"\b\w*(Error|Exception)\b")
"""A Python class name in what the user reads (``ValueError``, ``OperationalError`` ...)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _peer(behaviour: str, close_after: float | None = None) -> Iterator[int]:
    """A TCP server on a free loopback port that accepts connections and then never answers
    (``silent``; closed after ``close_after`` seconds if given) or resets them at once
    (``reset``)."""
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
            elif close_after is not None:
                threading.Timer(close_after, conn.close).start()
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


def _one_plain_line(proc: subprocess.CompletedProcess[str], *named: str) -> str:
    """The stderr of a failed command: one ``error: ...`` line naming ``named``, with no class
    name, SQLAlchemy link or traceback."""
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    line = lines[0]
    assert not CLASS_NAME.search(line) and "Background on this error" not in line, line
    for name in named:
        assert name in line, (name, line)
    return line


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


def _fails_at_once(url: str) -> None:
    """Every component's first call raises the typed error on its first try, naming the
    database with its password hidden."""
    for name, call in _calls(url):
        with pytest.raises(DatabaseUnavailableError) as info:
            call()
        text = str(info.value)
        assert "cannot open the database" in text, (name, text)
        assert ":pw@" not in text and "***" in text, (name, text)
        assert info.value.attempts == 1, (name, info.value.attempts)


# -- servers that are not there -------------------------------------------------------------


@pytest.mark.parametrize("server", sorted(SCHEMES))
def test_nothing_listening_fails_at_once(server: str) -> None:
    _fails_at_once(SCHEMES[server].format(port=_free_port()))


@pytest.mark.parametrize("server", sorted(SCHEMES))
def test_a_peer_that_resets_fails_at_once(server: str) -> None:
    with _peer("reset") as port:
        _fails_at_once(SCHEMES[server].format(port=port))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("server", sorted(SCHEMES))
def test_a_peer_that_never_answers_fails_within_the_connect_timeout(server: str) -> None:
    """The connect timeout bounds the whole start of a connection, handshake included: libpq's
    does by itself; PyMySQL reads the handshake with its read timeout, which the package sets
    to the connect timeout until the connection is made."""
    with _peer("silent") as port:
        url = SCHEMES[server].format(port=port)
        with pytest.raises(DatabaseUnavailableError) as info:
            get_database(url).run(lambda session: session.execute(sa.text("SELECT 1")).scalar())
        assert f"127.0.0.1:{port}" in str(info.value) and "***" in str(info.value)
        with pytest.raises(DatabaseUnavailableError) as info:
            SQLSaver(url, table_prefix="ff_").get_tuple({"configurable": {"thread_id": "t"}})
        assert "cannot open the database" in str(info.value)


@pytest.mark.parametrize("server", sorted(SCHEMES))
def test_the_cli_fails_with_one_line_when_a_server_never_answers(server: str) -> None:
    with _peer("silent") as port:
        url = SCHEMES[server].format(port=port).replace(":pw@", "@")
        proc = console("users", "--db", url)
    _one_plain_line(proc, f"127.0.0.1:{port}/x", "cannot open the database")


def test_the_cli_fails_fast_with_one_line() -> None:
    port = _free_port()
    proc = console("sessions", "--db", SCHEMES["postgres"].format(port=port))
    line = _one_plain_line(proc, f"127.0.0.1:{port}", "cannot open the database")
    assert ":pw@" not in line


@pytest.mark.timeout(300)
@pytest.mark.parametrize("server", sorted(SCHEMES))
def test_the_connect_timeout_is_set_in_the_url(server: str) -> None:
    """``?connect_timeout=N`` in the URL wins: a peer that closes after 4 s of silence times
    out with 2 s, and is seen closing with 10 s."""
    timed_out = {"postgres": "timeout expired", "mariadb": "timed out"}[server]
    with _peer("silent", close_after=4) as port:
        base = SCHEMES[server].format(port=port)
        short = get_database(f"{base}?connect_timeout=2")
        with pytest.raises(DatabaseUnavailableError, match=timed_out):
            short.run(lambda session: session.execute(sa.text("SELECT 1")).scalar())
        long = get_database(f"{base}?connect_timeout=10")
        with pytest.raises(DatabaseUnavailableError) as info:
            long.run(lambda session: session.execute(sa.text("SELECT 1")).scalar())
        assert timed_out not in str(info.value), str(info.value)


def _sleep(seconds: int) -> Callable[[Any], Any]:
    return lambda session: session.execute(sa.text("SELECT SLEEP(:s)"), {"s": seconds}).scalar()


@pytest.mark.mysql
@pytest.mark.timeout(300)
def test_mariadb_read_timeout_ends_a_stalled_statement() -> None:
    """``?read_timeout=N`` in the URL bounds the wait for a statement's reply: the call gives
    up with the typed error naming the database."""
    url = server_url("mariadb")
    db = get_database(f"{url}?read_timeout=1", retry_seconds=0)
    with pytest.raises(DatabaseUnavailableError) as info:
        db.run(_sleep(4))
    assert "timed out" in str(info.value) and "127.0.0.1" in str(info.value)
    assert db.run(_sleep(0)) == 0  # the next call opens a new connection


@pytest.mark.mysql
@pytest.mark.timeout(300)
def test_mariadb_defaults_do_not_cut_off_long_statements() -> None:
    """The handshake's bound (the connect timeout, 3 s) does not carry over to statements,
    whose default read timeout is an hour; a URL's own read timeout holds after the
    handshake as well."""
    assert get_database(server_url("mariadb")).run(_sleep(4)) == 0
    assert get_database(f"{MARIADB_URL}?connect_timeout=1&read_timeout=30").run(_sleep(2)) == 0


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: MARIADB_URL.rsplit("/", 1)[0] + "/no_such_db_ff", "no_such_db_ff"),
        (lambda: POSTGRES_URL.rsplit("/", 1)[0] + "/no_such_db_ff", "no_such_db_ff"),
    ],
    ids=["mariadb", "postgres"],
)
def test_an_unknown_server_database_is_the_typed_error(make: Callable[[], str], named: str) -> None:
    server_url("mariadb" if "mariadb" in make() else "postgres")
    with pytest.raises(DatabaseUnavailableError, match=f"cannot open the database .*{named}"):
        SQLStore(make(), table_prefix="ff_").get(("ns",), "k")
    proc = console("users", "--db", make())
    _one_plain_line(proc, named)


# -- files that are not databases -------------------------------------------------------------


def test_a_file_that_is_not_a_database_is_one_sentence(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping: milk, eggs\n")
    with pytest.raises(DatabaseUnavailableError, match="not a database"):
        ConversationStore(str(notes)).get_messages("s")
    for command in (["users"], ["sessions"], ["history", "s"]):
        _one_plain_line(console(*command, "--db", str(notes)), str(notes), "not a database")
    assert notes.read_text() == "shopping: milk, eggs\n"


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "x.db"
    with pytest.raises(DatabaseUnavailableError, match=f"directory {tmp_path / 'no'}"):
        ConversationStore(str(target)).add_messages("s", [HumanMessage("x")])
    proc = console("chat", "--db", str(target), "--offline", "--script", "-", input="hi\n")
    _one_plain_line(proc, str(target))
    assert not (tmp_path / "no").exists()


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    for proc in (
        console("--debug", "users", "--db", str(notes)),
        console("users", "--db", str(notes), env={"LANGMEM_SQLITE_DEBUG": "1"}),
    ):
        assert proc.returncode == 1
        assert "Traceback" in proc.stderr and "DatabaseUnavailableError" in proc.stderr


# -- a SQLite file another process holds the write lock of ---------------------------------


@contextlib.contextmanager
def _write_locked(path: Path) -> Iterator[None]:
    """Another connection (as another process would) holds the file's write lock."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.timeout(120)
def test_a_writer_gives_up_on_a_locked_file_at_the_deadline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Writers wait up to the retry deadline (here 2 s), then raise the typed error naming the
    file and the other process; after a second one warning says they wait. Several writers of
    one process, which take turns on the file, give up by the same deadline, and readers keep
    reading all along."""
    caplog.set_level(logging.WARNING, logger="langmem_sqlite.engine.retry")
    path = tmp_path / "locked.db"
    db = get_database(path, retry_seconds=2)
    store = ConversationStore(db)
    store.add_messages("s", [HumanMessage("before")])
    facts = SQLStore(db)
    facts.put(("ns",), "k", {"v": 1})

    def write(n: int) -> BaseException | None:
        try:
            store.add_messages(f"s{n}", [HumanMessage("never stored")])
        except BaseException as e:
            return e
        return None

    with _write_locked(path):
        with ThreadPoolExecutor(4) as pool:
            errors = list(pool.map(write, range(4)))
        with pytest.raises(DatabaseUnavailableError) as info:
            asyncio.run(facts.aput(("ns",), "k", {"v": 2}))
        assert [m.content for m in store.get_messages("s")] == ["before"]
        assert asyncio.run(facts.aget(("ns",), "k")).value == {"v": 1}  # type: ignore[union-attr]
    for error in [*errors, info.value]:
        assert isinstance(error, DatabaseUnavailableError), repr(error)
        assert str(path) in str(error) and "another process holds its write lock" in str(error)
    notices = [r.getMessage() for r in caplog.records if "waiting for the database" in r.msg]
    assert notices and all(str(path) in n for n in notices), caplog.text
    store.add_messages("s", [HumanMessage("after")])  # the lock is gone: writes go on
    assert [m.content for m in store.get_messages("s")] == ["before", "after"]


@pytest.mark.timeout(200)
def test_the_chat_says_it_waits_for_a_locked_file_then_gives_up(tmp_path: Path) -> None:
    """The chat (a writer) on a file another process holds the write lock of: after a second
    a line says it is waiting, then one sentence naming the file and the other process; the
    read-only commands keep working meanwhile."""
    path = tmp_path / "chat.db"
    assert console("migrate", "--db", str(path)).returncode == 0
    with _write_locked(path):
        reader = console("sessions", "--db", str(path))
        chat = console(
            "chat",
            "--db",
            str(path),
            "--offline",
            "--script",
            "-",
            input="hello\n",
            env={"LANGMEM_SQLITE_RETRY_SECONDS": "3"},
        )
    assert reader.returncode == 0, reader.stderr
    assert chat.returncode == 1
    lines = chat.stderr.strip().splitlines()
    assert lines[0].startswith(f"waiting for the database sqlite:///{path}"), chat.stderr
    assert "another process holds its write lock" in lines[0]
    assert lines[-1].startswith("error: ") and str(path) in lines[-1], chat.stderr
    assert "another process holds its write lock" in lines[-1]
    assert not CLASS_NAME.search(chat.stderr) and "Background" not in chat.stderr


def test_sqlite_busy_waits_are_short_and_bounded_by_the_retry_loop(tmp_path: Path) -> None:
    """One try waits a second for the file lock, so that the retry loop can say that it waits
    and bound the whole wait by the call's deadline."""
    db = get_database(tmp_path / "p.db")
    assert db.run(lambda session: session.execute(sa.text("PRAGMA busy_timeout")).scalar()) == 1000


# -- help ---------------------------------------------------------------------------------------


def test_help_shows_at_least_not_the_int64_bound() -> None:
    for command, shown in ((["history"], "[x>=1]"), (["chat"], "[x>=200]")):
        proc = console(*command, "--help")
        assert shown in proc.stdout and "9223372036854775807" not in proc.stdout, proc.stdout
    for value in ("0", str(2**63)):
        proc = console("history", "s", "--limit", value, "--db", "x.db")
        assert proc.returncode == 2 and "--limit" in proc.stderr, proc.stderr
