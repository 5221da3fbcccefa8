"""Commands that read leave the database as they found them; refused jobs create nothing; what
the listing, maintenance and import commands print.

Reading commands run in a real process of the console script, on real SQLite files (compared
byte for byte, with the directory's listing, before and after) and on fresh PostgreSQL and
MariaDB databases that each test creates and drops.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import pty
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, message_to_dict
from support import MARIADB_URL, POSTGRES_URL, console, server_url

from langmem_sqlite import ConversationStore
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.migrations import SchemaNotReadyError, ensure_schema
from langmem_sqlite.engine.opening import reading_database
from langmem_sqlite.engine.schema import get_tables
from langmem_sqlite.operations.copy import copy_database

READERS = (
    ["users"],
    ["sessions"],
    ["threads"],
    ["history", "main", "--user", "ada"],
    ["checkpoints", "chat:ada:main"],
    ["facts", "--user", "ada"],
    ["stats"],
    ["export", "main", "--user", "ada"],
    ["export", "--thread", "chat:ada:main"],
    ["prune", "--older-than", "0", "--dry-run"],
    ["forget-user", "ada", "--dry-run"],
)
"""Every command that only reads (with arguments that find something in the tour's database)."""


def snapshot(directory: Path) -> dict[str, str]:
    """Every file in ``directory`` and the SHA-256 of its bytes."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def sqlite_tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:  # closed now, not by a later gc
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.fixture(scope="module")
def tour_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database the package made (WAL mode): the scripted chat of user ada, in a process of
    its own that has ended (no connection left open)."""
    path = tmp_path_factory.mktemp("tour") / "tour.db"
    proc = console("chat", "--tour", "--db", str(path))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in path.parent.iterdir()) == ["tour.db"]
    return path


@pytest.fixture
def foreign_db(tmp_path: Path) -> Path:
    """Someone else's SQLite file, in rollback-journal mode."""
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    conn.close()
    return path


# -- 2. commands that read never write -----------------------------------------------------------


def test_reading_commands_leave_a_foreign_sqlite_file_as_found(foreign_db: Path) -> None:
    before = snapshot(foreign_db.parent)
    for args in READERS:
        proc = console(*args, "--db", str(foreign_db))
        assert proc.returncode == 1, (args, proc.stdout)
        assert proc.stderr == (
            f"error: no langmem-sqlite tables with prefix 'langmem_' in {foreign_db}\n"
        ), args
        assert snapshot(foreign_db.parent) == before, args
    assert sqlite_tables(foreign_db) == {"notes"}
    with sqlite3.connect(foreign_db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_reading_commands_leave_a_package_database_as_found(tour_db: Path) -> None:
    before = snapshot(tour_db.parent)
    for args in READERS:
        proc = console(*args, "--db", str(tour_db))
        assert proc.returncode == 0, (args, proc.stderr)
        assert snapshot(tour_db.parent) == before, args


def test_a_prefix_without_tables_is_named_with_the_prefixes_there(tour_db: Path) -> None:
    before = snapshot(tour_db.parent)
    proc = console("users", "--db", str(tour_db), "--prefix", "typo_")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        f"error: no langmem-sqlite tables with prefix 'typo_' in {tour_db} "
        "(tables with prefix 'langmem_' are there: add --prefix langmem_)\n"
    )
    assert snapshot(tour_db.parent) == before
    assert not any(t.startswith("typo_") for t in sqlite_tables(tour_db))


@pytest.fixture(params=["postgres", "mariadb"])
def fresh_server_db(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of its own on the server, without tables; dropped afterwards."""
    base = server_url(request.param)
    name = f"lm_readers_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(get_database(base).url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    url = (POSTGRES_URL if request.param == "postgres" else MARIADB_URL).rsplit("/", 1)[0]
    try:
        yield f"{url}/{name}"
    finally:
        with admin.connect() as conn:
            force = " WITH (FORCE)" if request.param == "postgres" else ""
            conn.execute(sa.text(f"DROP DATABASE {name}{force}"))
        admin.dispose()


def _server_tables(url: str) -> list[str]:
    engine = sa.create_engine(get_database(url).url)
    try:
        return sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_reading_commands_create_no_table_on_a_server(fresh_server_db: str) -> None:
    for args in (["users"], ["threads"], ["sessions"], ["stats"], ["vacuum"]):
        proc = console(*args, "--db", fresh_server_db)
        assert proc.returncode == 1, (args, proc.stdout)
        assert "no langmem-sqlite tables with prefix 'langmem_' in " in proc.stderr, args
        assert len(proc.stderr.splitlines()) == 1, (args, proc.stderr)
        assert _server_tables(fresh_server_db) == [], args


def test_reading_database_checks_the_schema_and_changes_nothing(
    tour_db: Path, foreign_db: Path
) -> None:
    reading = reading_database(str(foreign_db))
    assert reading.reading and not get_database(str(foreign_db)).reading
    with pytest.raises(SchemaNotReadyError, match="no langmem-sqlite tables with prefix"):
        ensure_schema(reading, get_tables())
    with pytest.raises(SchemaNotReadyError):  # the stores on it neither create tables
        ConversationStore(reading).list_sessions()
    reading.dispose()
    assert sqlite_tables(foreign_db) == {"notes"}
    before = snapshot(tour_db.parent)
    tour = reading_database(str(tour_db))
    assert [s.session_id for s in ConversationStore(tour).list_sessions("ada")][-1] == "main"
    with pytest.raises(sa.exc.OperationalError, match="readonly") as refused:  # reads only
        ConversationStore(tour).add_messages("s", [HumanMessage("x")])
    del refused  # its traceback holds the refused statement, which keeps a connection open
    gc.collect()
    tour.dispose()
    assert snapshot(tour_db.parent) == before


def test_an_older_schema_is_not_migrated_by_a_reader(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    ConversationStore(str(path)).list_sessions()
    get_database(str(path)).dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM langmem_migrations WHERE version = 1")
    conn.close()
    before = snapshot(tmp_path)
    proc = console("sessions", "--db", str(path))
    assert proc.returncode == 1
    assert proc.stderr == (
        f"error: the langmem-sqlite tables with prefix 'langmem_' in {path} are at schema "
        "version 0, this langmem-sqlite reads version 1: run `langmem-sqlite migrate` on it "
        "first\n"
    )
    assert snapshot(tmp_path) == before


def test_copy_leaves_its_source_as_found_and_names_it_by_its_file(
    tour_db: Path, tmp_path: Path
) -> None:
    before = snapshot(tour_db.parent)
    target = tmp_path / "copy.db"
    proc = console("copy", "--from", str(tour_db), "--to", str(target), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["source"], doc["target"]) == (str(tour_db), str(target))
    assert snapshot(tour_db.parent) == before
    proc = console("copy", "--from", str(tour_db), "--to", str(target))
    assert proc.returncode == 0, proc.stderr
    assert f"from {tour_db} to {target}; verified by reading back" in proc.stdout
    assert snapshot(tour_db.parent) == before
    report = copy_database(str(tour_db), str(tmp_path / "again.db"))  # in this process too
    assert report.source == str(tour_db)
    assert snapshot(tour_db.parent) == before


# -- 7. no silent no-ops -------------------------------------------------------------------------


def test_copy_of_an_unknown_user_is_refused_and_creates_nothing(
    tour_db: Path, tmp_path: Path
) -> None:
    target = tmp_path / "nobody.db"
    proc = console("copy", "--from", str(tour_db), "--to", str(target), "--user", "nobody")
    assert proc.returncode == 1
    assert proc.stderr == (
        f"error: nothing of user 'nobody' in {tour_db} (prefix 'langmem_'): nothing copied\n"
    )
    assert list(tmp_path.iterdir()) == []
    proc = console("copy", "--from", str(tour_db), "--to", str(target), "--user", "ada", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["copied"] > 0


def _tour_copy(tour_db: Path, tmp_path: Path) -> Path:
    path = tmp_path / "mine.db"
    assert console("copy", "--from", str(tour_db), "--to", str(path)).returncode == 0
    return path


def test_forget_user_reports_an_unknown_user_and_does_nothing(
    tour_db: Path, tmp_path: Path
) -> None:
    path = _tour_copy(tour_db, tmp_path)
    before = snapshot(tmp_path)
    proc = console("forget-user", "nobody", "--db", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"nothing stored about user 'nobody' in {path}: nothing deleted\n"
    assert snapshot(tmp_path) == before  # no VACUUM either


def test_forget_user_asks_on_a_terminal_and_needs_yes_in_a_script(
    tour_db: Path, tmp_path: Path
) -> None:
    path = _tour_copy(tour_db, tmp_path)
    before = snapshot(tmp_path)
    proc = console("forget-user", "ada", "--db", str(path), stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert proc.stderr == (
        "error: forget-user deletes user 'ada''s data for good: pass --yes to confirm "
        "(stdin is not a terminal to ask on)\n"
    )
    assert snapshot(tmp_path) == before

    def on_terminal(answer: bytes) -> subprocess.CompletedProcess[str]:
        main, side = pty.openpty()
        try:
            os.write(main, answer)
            return console("forget-user", "ada", "--db", str(path), stdin=side)
        finally:
            os.close(main)
            os.close(side)

    proc = on_terminal(b"n\n")
    assert "delete 2 sessions, 2 threads, 3 facts, 0 other store items of user 'ada' in" in (
        proc.stderr
    )
    assert proc.returncode == 1 and "not confirmed: nothing deleted" in proc.stderr
    assert snapshot(tmp_path) == before
    proc = on_terminal(b"y\n")
    assert proc.returncode == 0, proc.stderr
    assert "deleted for user 'ada'" in proc.stdout
    assert ConversationStore(str(path)).list_sessions("ada") == []
    proc = console("forget-user", "ada", "--db", str(path), "--yes")
    assert proc.stdout.startswith("nothing stored about user 'ada'")


def _langgraph_sqlite_file(path: Path) -> None:
    """A langgraph-checkpoint-sqlite file (WAL mode) of one thread with pending writes."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    stored = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    saver.put_writes(stored, [("messages", "a"), ("messages", "b")], "task-1")
    conn.close()


def test_imports_leave_their_source_as_found_and_a_failed_one_creates_nothing(
    tmp_path: Path, foreign_db: Path
) -> None:
    source_dir = tmp_path / "source"
    source_dir.mkdir()
    source = source_dir / "lg.db"
    _langgraph_sqlite_file(source)
    before = snapshot(source_dir)
    target = tmp_path / "target.db"
    for args, message in (
        (
            ["history", str(foreign_db)],
            f"no table 'message_store' in {foreign_db}",
        ),
        (["history", str(tmp_path / "none.db")], f"no SQLite file at {tmp_path / 'none.db'}"),
        (
            ["sqlite-saver", str(foreign_db), "--thread", "t1"],
            f"no table 'checkpoints' in {foreign_db} (not a LangGraph checkpointer database)",
        ),
        (["sqlite-saver", str(tmp_path / "none.db")], f"no SQLite file at {tmp_path / 'none.db'}"),
        (["sqlite-saver", str(source), "--thread", "nosuch"], "no thread 'nosuch' in the source"),
    ):
        proc = console("import", *args, "--db", str(target))
        assert proc.returncode == 1, args
        assert proc.stderr == f"error: {message}\n", args
        assert not target.exists(), args
    assert snapshot(source_dir) == before
    assert sqlite_tables(foreign_db) == {"notes"}
    community = source_dir / "community.db"  # langchain-community's table, in WAL mode
    with sqlite3.connect(community) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE message_store (id INTEGER PRIMARY KEY, session_id TEXT, message TEXT)"
        )
        body = json.dumps(message_to_dict(HumanMessage("hi")))
        conn.execute("INSERT INTO message_store (session_id, message) VALUES ('s', ?)", (body,))
    conn.close()
    before = snapshot(source_dir)
    proc = console("import", "history", str(community), "--db", str(target))
    assert proc.returncode == 0, proc.stderr
    assert "chat_history: 1 session found, 1 message imported" in proc.stdout
    assert snapshot(source_dir) == before
    first = console("import", "sqlite-saver", str(source), "--db", str(target))
    assert first.returncode == 0, first.stderr
    assert (
        "checkpoints: 1 thread found, 1 checkpoint imported, 0 already there, "
        "pending writes: 2 imported, 0 already present; verified by reading back"
    ) in first.stdout
    again = console("import", "sqlite-saver", str(source), "--db", str(target))
    assert (
        "0 checkpoints imported, 1 already there, pending writes: 0 imported, 2 already present"
    ) in again.stdout
    assert snapshot(source_dir) == before


# -- 9. what the commands print ------------------------------------------------------------------


def test_listings_keep_one_row_per_line_and_count_in_the_singular(tmp_path: Path) -> None:
    path = str(tmp_path / "one.db")
    store = ConversationStore(path)
    store.add_messages("s1", [HumanMessage("hi"), AIMessage("hello")], user_id="two\nlines")
    get_database(path).dispose()
    proc = console("sessions", "--db", path)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if "s1" in line]
    assert len(rows) == 1 and "two\\x0alines" in rows[0]
    assert "title" not in proc.stdout  # no session has a title
    assert "+00:00" in rows[0]  # the time's zone, as facts show it
    users = console("users", "--db", path)
    assert len([line for line in users.stdout.splitlines() if "lines" in line]) == 1
    proc = console("prune", "--older-than", "0", "--dry-run", "--db", path)
    assert proc.stdout.splitlines()[0] == "would delete 1 session and 0 threads"
    out = tmp_path / "s1.md"
    proc = console("export", "s1", "--user", "two\nlines", "-o", str(out), "--db", path)
    assert proc.stderr == f"wrote 2 messages to {out}\n"
    ConversationStore(path).rename_session("s1", "Greeting", user_id="two\nlines")
    get_database(path).dispose()
    assert "Greeting" in console("sessions", "--db", path).stdout


def test_hints_quote_values_for_the_shell(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    ConversationStore(path).add_messages("s", [HumanMessage("x")], user_id="ünï[c]ode")
    get_database(path).dispose()
    proc = console("history", "s", "--db", path)
    assert proc.returncode == 1
    assert proc.stderr.endswith("have one: add --user 'ünï[c]ode'\n"), proc.stderr


@pytest.mark.parametrize("backend", ["postgres", "mariadb"])
def test_copy_creates_a_missing_server_database(
    backend: str, tour_db: Path, tmp_path: Path
) -> None:
    base = server_url(backend)
    name = f"lm_readers_{uuid.uuid4().hex[:12]}"
    url = f"{(POSTGRES_URL if backend == 'postgres' else MARIADB_URL).rsplit('/', 1)[0]}/{name}"
    admin = sa.create_engine(get_database(base).url, isolation_level="AUTOCOMMIT")
    try:
        proc = console("copy", "--from", str(tour_db), "--to", url, "--user", "ada", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["copied"] > 0
        assert "langmem_sessions" in _server_tables(url)
    finally:
        with admin.connect() as conn:
            force = " WITH (FORCE)" if backend == "postgres" else ""
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}{force}"))
        admin.dispose()


def test_copy_says_when_the_login_may_not_create_the_database(tour_db: Path) -> None:
    base = server_url("postgres")
    role = f"lm_readers_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(get_database(base).url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN NOCREATEDB"))
    server = sa.make_url(POSTGRES_URL).set(username=role)
    url = server.set(database=f"{role}_db").render_as_string(hide_password=False)
    try:
        proc = console("copy", "--from", str(tour_db), "--to", url)
        assert proc.returncode == 1
        assert proc.stderr == (
            f"error: the database '{role}_db' does not exist on "
            f"postgresql+psycopg://{role}@{server.host}:{server.port} and this login may not "
            "create it (permission denied to create database): create it first\n"
        )
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP ROLE {role}"))
        admin.dispose()
