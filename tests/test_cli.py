"""The command line, run as a user runs it (a separate process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from langmem_sqlite import ConversationStore


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "langmem_sqlite", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_survives_restart(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    proc = cli("demo", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "Your name is Ada and you live in Lyon." in proc.stdout
    assert "read back 4 messages" in proc.stdout
    store = ConversationStore(str(db))
    assert store.count_messages("demo-session") == 6


def test_sessions_and_history(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    store.add_messages("s1", [HumanMessage("héllo"), AIMessage("hi")], user_id="u")
    store.rename_session("s1", "Greeting", user_id="u")
    proc = cli("sessions", "--db", db_url, "--prefix", prefix, "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert (row["session_id"], row["user_id"], row["title"], row["message_count"]) == (
        "s1",
        "u",
        "Greeting",
        2,
    )
    proc = cli("history", "s1", "--user", "u", "--db", db_url, "--prefix", prefix, "--json")
    assert [m["data"]["content"] for m in json.loads(proc.stdout)] == ["héllo", "hi"]
    proc = cli("history", "s1", "--user", "u", "--db", db_url, "--prefix", prefix, "--limit", "1")
    assert "hi" in proc.stdout and "héllo" not in proc.stdout
    proc = cli("sessions", "--db", db_url, "--prefix", prefix)
    assert "Greeting" in proc.stdout


def test_errors_are_one_line(tmp_path: Path) -> None:
    for args in (
        ["sessions", "--db", "postgresql://nobody@127.0.0.1:1/none"],
        ["history", "", "--db", str(tmp_path / "x.db")],
        ["sessions", "--bogus"],
        ["sessions", "--db", str(tmp_path / "x.db"), "--prefix", "bad prefix;"],
    ):
        proc = cli(*args)
        assert proc.returncode != 0, args
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("error"), proc.stderr


def test_migrate(tmp_path: Path) -> None:
    proc = cli("migrate", "--db", str(tmp_path / "m.db"))
    assert proc.returncode == 0, proc.stderr
    assert "schema at version" in proc.stdout
