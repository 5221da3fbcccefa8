"""The command line: every command, human and --json output, and its failure modes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from langchain_core.messages import AIMessage, HumanMessage, messages_from_dict

from langmem_sqlite import ConversationStore, SQLSaver
from langmem_sqlite.chat import open_chat, run_lines
from langmem_sqlite.cli import cli as cli_group
from langmem_sqlite.cli import main


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "langmem_sqlite", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run(*args: str) -> str:
    result = CliRunner().invoke(cli_group, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def populated(db_url: str, prefix: str) -> tuple[str, str]:
    """A chat of user ada (thread, facts, mirrored session) and a plain session of user u."""
    session, _ = open_chat(db_url, user="ada", offline=True, prefix=prefix)
    run_lines(session, ["My name is Ada.", "Hello there"], lambda _: None, show_input=False)
    store = ConversationStore(db_url, table_prefix=prefix)
    store.add_messages("s1", [HumanMessage("héllo"), AIMessage("hi")], user_id="u")
    store.rename_session("s1", "Greeting", user_id="u")
    store.set_summary("s1", "They greeted.", user_id="u")
    return db_url, prefix


def test_sessions_history_users_threads(populated: tuple[str, str]) -> None:
    db, prefix = populated
    common = ["--db", db, "--prefix", prefix]
    rows = json.loads(run("sessions", *common, "--json"))
    assert {(r["user_id"], r["session_id"]) for r in rows} == {("u", "s1"), ("ada", "main")}
    assert "Greeting" in run("sessions", *common)
    doc = json.loads(run("history", "s1", "--user", "u", *common, "--json"))
    assert [m["data"]["content"] for m in doc["messages"]] == ["héllo", "hi"]
    assert doc["summary"] == "They greeted." and all(m["tokens"] > 0 for m in doc["messages"])
    text = run("history", "s1", "--user", "u", *common, "--limit", "1")
    assert "hi" in text and "héllo" not in text and "They greeted." in text
    users = {r["user_id"]: r for r in json.loads(run("users", *common, "--json"))}
    assert users["ada"] == {"user_id": "ada", "sessions": 1, "threads": 1, "facts": 1}
    assert users["u"]["sessions"] == 1 and users["u"]["threads"] == 0
    assert "ada" in run("users", *common)
    (thread,) = json.loads(run("threads", *common, "--user", "ada", "--json"))
    assert thread["thread_id"] == "chat:ada:main" and thread["checkpoint_count"] > 2
    assert json.loads(run("threads", *common, "--user", "nobody", "--json")) == []
    assert "chat:ada:main" in run("threads", *common)
    cps = json.loads(run("checkpoints", "chat:ada:main", *common, "--json", "--limit", "2"))
    assert len(cps) == 2 and cps[0]["messages"] >= cps[1]["messages"]
    assert "input" in run("checkpoints", "chat:ada:main", *common)  # the source column
    (fact,) = json.loads(run("facts", "--user", "ada", *common, "--json"))
    assert fact["fact"] == "The user's name is Ada."
    assert "The user's name is Ada." in run("facts", "--user", "ada", *common)
    assert json.loads(run("facts", "--user", "ada", "--pending", *common, "--json")) == []


def test_stats_export_and_vacuum(populated: tuple[str, str], tmp_path: Path) -> None:
    db, prefix = populated
    common = ["--db", db, "--prefix", prefix]
    doc = json.loads(run("stats", *common, "--json"))
    assert isinstance(doc["database"], str) and "://" in doc["database"]
    stats = {t["table"]: t for t in doc["tables"]}
    assert all(t["bytes"] is None or t["bytes"] > 0 for t in stats.values())
    assert stats[f"{prefix}sessions"]["rows"] == 2
    assert stats[f"{prefix}messages"]["rows"] >= 6
    assert stats[f"{prefix}checkpoints"]["rows"] > 2
    assert f"{prefix}store_items" in stats
    assert "rows" in run("stats", *common)
    doc = json.loads(run("export", "s1", "--user", "u", *common))
    assert [m.text for m in messages_from_dict(doc["messages"])] == ["héllo", "hi"]
    lines = run("export", "s1", "--user", "u", "--format", "jsonl", *common).splitlines()
    assert [json.loads(ln)["data"]["content"] for ln in lines] == ["héllo", "hi"]
    out = tmp_path / "s1.md"
    run("export", "s1", "--user", "u", "--format", "md", "-o", str(out), *common)
    md = out.read_text(encoding="utf-8")
    assert md.startswith("# Session s1") and "They greeted." in md and "**human**: héllo" in md
    thread = json.loads(run("export", "--thread", "chat:ada:main", *common))
    assert thread["messages"][0]["data"]["content"] == "My name is Ada."
    assert len(thread["checkpoints"]) > 2
    report = json.loads(run("vacuum", "--full", *common, "--json"))
    if db.startswith("sqlite"):
        assert 0 < report["bytes_after"] <= report["bytes_before"]
        assert "vacuumed" in run("vacuum", *common)
    else:
        assert report["bytes_before"] is None and "nothing to do" in run("vacuum", *common)


def test_prune_dry_run_then_real(populated: tuple[str, str]) -> None:
    db, prefix = populated
    common = ["--db", db, "--prefix", prefix]
    if db.startswith("sqlite"):  # a thread of many pages, so that pruning it frees some
        import secrets

        from langgraph.checkpoint.base import empty_checkpoint

        saver = SQLSaver(db, table_prefix=prefix)
        ckpt = empty_checkpoint()
        ckpt["channel_values"] = {"bulk": secrets.token_hex(100_000)}
        ckpt["channel_versions"] = {"bulk": saver.get_next_version(None, None)}
        thread = {"configurable": {"thread_id": "chat:ada:main", "checkpoint_ns": ""}}
        saver.put(thread, ckpt, {"source": "update", "step": 9}, ckpt["channel_versions"])
        full = json.loads(run("vacuum", *common, "--json"))["bytes_after"]
    assert (
        json.loads(run("prune", "--older-than", "1", "--dry-run", *common, "--json"))["sessions"]
        == []
    )
    time.sleep(0.05)
    report = json.loads(run("prune", "--older-than", "0", "--dry-run", *common, "--json"))
    assert sorted(report["sessions"]) == ["ada/main", "u/s1"]
    assert report["threads"] == ["chat:ada:main"]
    assert len(json.loads(run("sessions", *common, "--json"))) == 2  # dry run deleted nothing
    assert "would delete 2 sessions and 1 threads" in run(
        "prune", "--older-than", "0", "--dry-run", *common
    )
    run("prune", "--older-than", "0", "--user", "u", *common)
    assert [r["user_id"] for r in json.loads(run("sessions", *common, "--json"))] == ["ada"]
    assert len(SQLSaver(db, table_prefix=prefix).list_threads()) == 1
    assert "deleted 1 sessions and 1 threads" in run("prune", "--older-than", "0", *common)
    assert SQLSaver(db, table_prefix=prefix).list_threads() == []
    if db.startswith("sqlite"):  # the freed pages go back to the OS
        report = json.loads(run("vacuum", "--full", *common, "--json"))
        assert report["bytes_after"] <= report["bytes_before"]
        assert report["bytes_after"] < full - 100_000


def test_migrate(tmp_path: Path) -> None:
    proc = cli("migrate", "--db", str(tmp_path / "m.db"))
    assert proc.returncode == 0, proc.stderr
    assert "schema at version" in proc.stdout
    doc = json.loads(run("migrate", "--db", str(tmp_path / "m.db"), "--json"))
    assert doc["version"] >= 1 and doc["database"].endswith("m.db")


def test_errors_are_one_line_in_a_real_process() -> None:
    for args in (["sessions", "--db", "postgresql://nobody@127.0.0.1:1/none"], ["sessions", "-x"]):
        proc = cli(*args)
        assert proc.returncode != 0, args
        assert "Traceback" not in proc.stderr, args
        assert len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert proc.stderr.startswith("error"), (args, proc.stderr)


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "x.db")
    for args in (
        ["sessions", "--db", "postgresql://nobody@127.0.0.1:1/none"],
        ["stats", "--db", "mariadb://nobody@127.0.0.1:1/none"],
        ["history", "", "--db", db],
        ["history", "nosuch", "--db", db],
        ["sessions", "--bogus"],
        ["sessions", "--db", db, "--prefix", "bad prefix;"],
        ["checkpoints", "nosuch", "--db", db],
        ["facts", "--db", db],
        ["facts", "--user", "", "--db", db],
        ["export", "--db", db],
        ["export", "s", "--thread", "t", "--db", db],
        ["export", "nosuch", "--db", db],
        ["export", "--thread", "nosuch", "--db", db],
        ["export", "s", "--format", "xml", "--db", db],
        ["prune", "--db", db],
        ["prune", "--older-than", "-1", "--db", db],
        ["chat", "--db", db, "--offline", "--base-url", "http://x", "--script", "-"],
        ["chat", "--db", "postgresql://nobody@127.0.0.1:1/none", "--offline", "--script", "-"],
        ["users", "--db", "postgresql://nobody@127.0.0.1:1/none"],
        ["threads", "--db", "mariadb://nobody@127.0.0.1:1/none"],
        ["vacuum", "--db", "postgresql://nobody@127.0.0.1:1/none"],
        ["migrate", "--db", "postgresql://nobody@127.0.0.1:1/none"],
        ["chat", "--db", db, "--max-tokens", "5", "--script", "-"],
        ["chat", "--db", db, "--user", "", "--offline", "--script", "-"],
        ["import", "history", str(tmp_path / "nosuch.db"), "--db", db],
        ["import", "sqlite-saver", str(tmp_path / "nosuch.db"), "--db", db],
        ["import", "postgres-saver", "postgresql://nobody@127.0.0.1:1/none", "--db", db],
    ):
        with pytest.raises(SystemExit) as exited:
            main(args)
        err = capsys.readouterr().err
        assert exited.value.code not in (0, None), args
        assert len(err.strip().splitlines()) == 1, (args, err)
        assert err.startswith("error"), (args, err)
