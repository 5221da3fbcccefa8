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
from support import console

from langmem_sqlite import ConversationStore, SQLSaver
from langmem_sqlite.chat import open_chat, run_lines
from langmem_sqlite.cli import cli as cli_group
from langmem_sqlite.cli import main


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
    assert "would delete 2 sessions and 1 thread\n" in run(
        "prune", "--older-than", "0", "--dry-run", *common
    )
    run("prune", "--older-than", "0", "--user", "u", *common)
    assert [r["user_id"] for r in json.loads(run("sessions", *common, "--json"))] == ["ada"]
    assert len(SQLSaver(db, table_prefix=prefix).list_threads()) == 1
    assert "deleted 1 session and 1 thread\n" in run("prune", "--older-than", "0", *common)
    assert SQLSaver(db, table_prefix=prefix).list_threads() == []
    if db.startswith("sqlite"):  # the freed pages go back to the OS
        report = json.loads(run("vacuum", "--full", *common, "--json"))
        assert report["bytes_after"] <= report["bytes_before"]
        assert report["bytes_after"] < full - 100_000


def test_migrate(tmp_path: Path) -> None:
    proc = console("migrate", "--db", str(tmp_path / "m.db"))
    assert proc.returncode == 0, proc.stderr
    assert "schema at version" in proc.stdout
    doc = json.loads(run("migrate", "--db", str(tmp_path / "m.db"), "--json"))
    assert doc["version"] >= 1 and doc["database"].endswith("m.db")


def test_errors_are_one_line_in_a_real_process() -> None:
    for args in (["sessions", "--db", "postgresql://nobody@127.0.0.1:1/none"], ["sessions", "-x"]):
        proc = console(*args)
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


# -- stored text is printed as it is ------------------------------------------------------------

NASTY = (
    "x = d[key] [/] [bold]b[/bold] [code]print(1)[/code] [link=http://x]y[/link] :smile: "
    "[offline] [red on white]z \x1b[31mred\x1b[0m bell\x07 back\x08 cr\r \u202eevil"
)
"""Rich markup, BBCode, an emoji code, ANSI escapes, other control characters, a bidi override."""

SHOWN = [
    "d[key]",
    "[/]",
    "[bold]b[/bold]",
    "[code]print(1)[/code]",
    "[link=http://x]y[/link]",
    ":smile:",
    "[offline]",
    "[red",
    "\\x1b[31mred\\x1b[0m",
    "bell\\x07",
    "back\\x08",
    "cr\\x0d",
    "\\u202eevil",
]
"""How the pieces of NASTY must appear in human output (control characters spelled out)."""


def _all_shown(text: str, *, facts: bool = False) -> None:
    """Every piece of NASTY in ``text`` (facts are stored with their whitespace collapsed, so
    the carriage return is gone from them)."""
    pieces = [p for p in SHOWN if not (facts and p == "cr\\x0d")]
    missing = [piece for piece in pieces if piece not in text]
    assert not missing, (missing, text)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text


@pytest.fixture
def nasty_db(tmp_path: Path) -> str:
    """A database whose every stored text (ids included) is full of markup and escapes."""
    from langgraph.graph import START, MessagesState, StateGraph

    from langmem_sqlite import SQLStore
    from langmem_sqlite.store import UserFacts

    db = str(tmp_path / "nasty.db")
    store = ConversationStore(db)
    store.add_messages("[/]", [HumanMessage(NASTY), AIMessage(NASTY)], user_id="[bold]u")
    store.rename_session("[/]", NASTY, user_id="[bold]u")
    store.set_summary("[/]", NASTY, user_id="[bold]u")
    facts = UserFacts(SQLStore(db), "[bold]u")
    facts.remember(NASTY)
    facts.propose([NASTY + " pending"])

    def bot(state: MessagesState) -> dict[str, object]:
        return {"messages": [AIMessage(NASTY)]}

    g = StateGraph(MessagesState)
    g.add_node("bot", bot)
    g.add_edge(START, "bot")
    graph = g.compile(checkpointer=SQLSaver(db))
    config = {"configurable": {"thread_id": "[/]t", "user_id": "[bold]u"}}
    graph.invoke({"messages": [HumanMessage(NASTY)]}, config)
    return db


def test_every_command_prints_stored_text_verbatim(nasty_db: str, tmp_path: Path) -> None:
    common = ["--db", nasty_db]
    for args in (["history", "[/]", "--user", "[bold]u"], ["sessions"]):
        _all_shown(run(*args, *common))
    for args in (["facts", "--user", "[bold]u"], ["facts", "--user", "[bold]u", "--pending"]):
        _all_shown(run(*args, *common), facts=True)
    assert "[/]t" in run("threads", *common) and "[bold]u" in run("threads", *common)
    assert "input" in run("checkpoints", "[/]t", *common)
    pruned = run("prune", "--older-than", "0", "--dry-run", *common)
    assert "[bold]u/[/]" in pruned and "[/]t" in pruned
    assert "[bold]u" in run("users", *common)
    # JSON keeps the exact string (control characters as \u escapes)
    doc = json.loads(run("history", "[/]", "--user", "[bold]u", "--json", *common))
    assert doc["summary"] == NASTY and doc["messages"][0]["data"]["content"] == NASTY
    assert "\x1b" not in run("history", "[/]", "--user", "[bold]u", "--json", *common)
    (fact,) = json.loads(run("facts", "--user", "[bold]u", "--json", *common))
    assert fact["fact"] == " ".join(NASTY.split())
    # an export to a file or a pipe is the data itself
    md = run("export", "[/]", "--user", "[bold]u", "--format", "md", *common)
    assert NASTY in md
    thread = json.loads(run("export", "--thread", "[/]t", *common))
    assert thread["messages"][-1]["data"]["content"] == NASTY


def test_errors_and_hints_print_text_verbatim(
    nasty_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for args, shown in (
        (["history", "[/]", "--db", nasty_db], "no session '[/]' without a user"),
        (["history", "[/]", "--db", nasty_db], "user(s) '[bold]u' have one: add --user '[bold]u'"),
        (["history", "[x]", "--user", "[/]", "--db", nasty_db], "no session '[x]' of user '[/]'"),
        (["checkpoints", "[/]nope", "--db", nasty_db], "no thread '[/]nope'"),
        (["sessions", "--db", "postgresql://x@127.0.0.1:1/db", "--prefix", "[/]"], "'[/]'"),
    ):
        with pytest.raises(SystemExit):
            main(args)
        err = capsys.readouterr().err
        assert shown in err and err.startswith("error: "), (args, err)
        assert len(err.strip().splitlines()) == 1


def test_install_hints_keep_their_extras(capsys: pytest.CaptureFixture[str]) -> None:
    from langmem_sqlite.cli.output import err as stderr_output

    stderr_output.line("error: ImportError: pip install 'langmem-sqlite[postgres]'")
    assert "pip install 'langmem-sqlite[postgres]'" in capsys.readouterr().err


def test_chat_prints_stored_text_verbatim(tmp_path: Path) -> None:
    session, _ = open_chat(str(tmp_path / "c.db"), user="ada", offline=True)
    import io

    from langmem_sqlite.cli.output import Output

    buffer = io.StringIO()
    output = Output(file=buffer)
    run_lines(
        session,
        ["/remember I write [/] code", f"/remember {NASTY}", "/facts", "hello [bold]x", "/history"],
        output.line,
        show_input=True,
    )
    text = buffer.getvalue()
    assert "I write [/] code" in text and "[offline]" in text and "you> hello [bold]x" in text
    _all_shown(text, facts=True)
    out = CliRunner().invoke(cli_group, ["facts", "--user", "ada", "--db", str(tmp_path / "c.db")])
    assert out.exit_code == 0 and "I write [/] code" in out.output


# -- read-only commands never create a database ------------------------------------------------


def test_read_only_commands_refuse_a_missing_sqlite_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "typo.db"
    for args in (
        ["users"],
        ["sessions"],
        ["threads"],
        ["history", "s"],
        ["checkpoints", "t"],
        ["facts", "--user", "u"],
        ["stats"],
        ["export", "s"],
        ["export", "--thread", "t"],
        ["prune", "--older-than", "1"],
        ["vacuum"],
    ):
        with pytest.raises(SystemExit) as exited:
            main([*args, "--db", str(db)])
        err = capsys.readouterr().err
        assert exited.value.code == 1, args
        assert (
            err
            == f"error: --db: no SQLite database at {db} (chat, migrate and import create one)\n"
        )
        assert not db.exists() and not Path(f"{db}-wal").exists(), args
    with pytest.raises(SystemExit):
        main(["sessions", "--db", f"sqlite:///{db}"])
    assert "no SQLite database" in capsys.readouterr().err and not db.exists()
    # the commands that write create it
    run("migrate", "--db", str(db))
    assert db.exists()
    assert json.loads(run("sessions", "--db", str(db), "--json")) == []


# -- hints that name what to do ---------------------------------------------------------------


def test_missing_session_names_the_users_who_have_it(populated: tuple[str, str]) -> None:
    db, prefix = populated
    for command in ("history", "export"):
        result = CliRunner().invoke(cli_group, [command, "main", "--db", db, "--prefix", prefix])
        assert result.exit_code == 1
        assert (
            "no session 'main' without a user; user(s) 'ada' have one: add --user ada"
            in result.output
        )
    ConversationStore(db, table_prefix=prefix).add_messages("anon", [HumanMessage("x")])
    result = CliRunner().invoke(
        cli_group, ["history", "anon", "--user", "ada", "--db", db, "--prefix", prefix]
    )
    assert "no session 'anon' of user 'ada'; there is one without a user: leave out --user" in (
        result.output
    )
    result = CliRunner().invoke(cli_group, ["export", "--db", db, "--prefix", prefix])
    assert result.exit_code == 2 and "give a SESSION, or --thread THREAD" in result.output
    assert "not both" not in result.output
    result = CliRunner().invoke(
        cli_group, ["export", "s", "--thread", "t", "--db", db, "--prefix", prefix]
    )
    assert "not both" in result.output


def test_chat_commands_say_what_they_do(tmp_path: Path) -> None:
    session, _ = open_chat(str(tmp_path / "c.db"), user="zoe", offline=True)
    out: list[str] = []
    run_lines(
        session,
        ["hello", "/new other", "/new main", "/forget", "/remember", "/new fresh"],
        out.append,
        show_input=False,
    )
    assert "new session other (facts about zoe stay)" in out
    assert any(line.startswith("switched to session main (continuing, 2 messages)") for line in out)
    assert "usage: /forget ID (/facts lists the ids)" in out
    assert any(line.startswith("usage: /remember TEXT") for line in out)
    assert not any("must not be empty" in line for line in out)
    assert "new session fresh (facts about zoe stay)" in out
    with pytest.raises(TypeError, match="lines"):
        run_lines(session, "hello", out.append, show_input=False)


# -- basics: --version, the bare command, a fast --help ----------------------------------------


def test_version_and_bare_command() -> None:
    from langmem_sqlite import __version__

    proc = console("--version")
    assert proc.returncode == 0 and proc.stdout == f"langmem-sqlite, version {__version__}\n"
    proc = console()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: langmem-sqlite") and "copy" in proc.stdout
    assert proc.stderr == ""


def test_help_and_version_load_no_database_code() -> None:
    """--help and --version import neither SQLAlchemy nor LangChain nor Rich (start-up time)."""
    probe = (
        "import sys\n"
        "from langmem_sqlite.cli import main\n"
        "for args in (['--help'], ['--version'], ['copy', '--help'], ['chat', '--help']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in ('sqlalchemy', 'langchain_core', 'langgraph', 'rich',"
        " 'prompt_toolkit', 'numpy') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY []"


def test_public_names_are_importable() -> None:
    import langmem_sqlite

    for name in langmem_sqlite.__all__:
        assert getattr(langmem_sqlite, name) is not None, name
    assert set(langmem_sqlite.__all__) == set(langmem_sqlite._EXPORTS)
    with pytest.raises(AttributeError):
        _ = langmem_sqlite.nothing_here  # type: ignore[attr-defined]
