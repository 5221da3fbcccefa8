"""Importers: fixtures written by the real anchor packages, imported, read back, re-run."""

from __future__ import annotations

import json
import sqlite3
import uuid
import warnings
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from support import server_url

from langmem_sqlite import ConversationStore, SQLSaver
from langmem_sqlite.cli import cli
from langmem_sqlite.operations.importers import (
    ImportMismatchError,
    import_chat_history,
    import_checkpoints,
    open_postgres_saver,
    open_sqlite_saver,
    source_thread_ids,
)

MESSAGES = [
    HumanMessage("héllo", id="h1"),
    AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}]),
    ToolMessage("42", tool_call_id="c1"),
    AIMessage("done", response_metadata={"model": "m"}),
]


def _community_history(url: str, session: str, table: str = "message_store") -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # langchain-community announces its sunset
        from langchain_community.chat_message_histories import SQLChatMessageHistory

        return SQLChatMessageHistory(session_id=session, connection=url, table_name=table)


def test_chat_history_round_trip_idempotent_resumable(
    db_url: str, prefix: str, tmp_path: Path
) -> None:
    source = f"sqlite:///{tmp_path}/community.db"
    for session in ("a", "b"):
        _community_history(source, session).add_messages(MESSAGES)  # type: ignore[attr-defined]
    original = (tmp_path / "community.db").read_bytes()
    target = ConversationStore(db_url, table_prefix=prefix)
    # an interrupted earlier run: the first 2 messages of session a are already there
    target.add_messages("a", MESSAGES[:2], user_id="imp")
    report = import_chat_history(source, target, user_id="imp", batch_size=3)
    assert (report.containers, report.imported, report.skipped, report.verified) == (2, 6, 2, True)
    for session in ("a", "b"):
        assert target.get_messages(session, user_id="imp") == MESSAGES
    again = import_chat_history(source, target, user_id="imp")
    assert (again.imported, again.skipped) == (0, 8)
    # a target session holding something else is refused, not overwritten
    target.add_messages("a", [HumanMessage("different")], user_id="other")
    with pytest.raises(ImportMismatchError, match="'a'"):
        import_chat_history(source, target, user_id="other")
    with pytest.raises(ValueError, match="no table"):
        import_chat_history(source, target, table="nope")
    assert (tmp_path / "community.db").read_bytes() == original  # read-only, even the journal mode


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
def test_chat_history_from_a_server_via_cli(server: str, tmp_path: Path) -> None:
    url = server_url(server)
    if server == "mariadb":
        url = url.replace("mariadb://", "mysql+pymysql://")  # as langchain-community users write it
    table = f"community_{uuid.uuid4().hex[:8]}"
    history = _community_history(url, "s1", table)
    history.add_messages(MESSAGES)  # type: ignore[attr-defined]
    db = str(tmp_path / "t.db")
    try:
        out = CliRunner().invoke(
            cli, ["import", "history", url, "--table", table, "--db", db, "--json"]
        )
        assert out.exit_code == 0, out.output
        assert json.loads(out.output)["verified"] is True
        assert ConversationStore(db).get_messages("s1") == MESSAGES
    finally:
        with sa.create_engine(url).begin() as conn:
            sa.Table(table, sa.MetaData()).drop(conn)


def _graph(checkpointer: object) -> object:
    def bot(state: MessagesState) -> dict[str, object]:
        return {"messages": [AIMessage(f"echo {state['messages'][-1].text}")]}

    g = StateGraph(MessagesState)
    g.add_node("bot", bot)
    g.add_edge(START, "bot")
    return g.compile(checkpointer=checkpointer)  # type: ignore[arg-type]


def _fill(saver: object, threads: list[str]) -> None:
    graph = _graph(saver)
    for t in threads:
        for text in ("one", "two"):
            graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": t}})  # type: ignore[attr-defined]


def _check_same(source: object, target: SQLSaver, threads: list[str]) -> None:
    for t in threads:
        config = {"configurable": {"thread_id": t}}
        src = list(source.list(config))  # type: ignore[attr-defined]
        got = list(target.list(config))
        assert [c.checkpoint["id"] for c in got] == [c.checkpoint["id"] for c in src]
        assert got[0].checkpoint["channel_values"] == src[0].checkpoint["channel_values"]
        # the graph resumes on the imported thread
        out = _graph(target).invoke({"messages": [HumanMessage("three")]}, config)  # type: ignore[attr-defined]
        assert [m.text for m in out["messages"]][-4:] == ["two", "echo two", "three", "echo three"]


def test_sqlite_saver_file(db_url: str, prefix: str, tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "anchor.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    _fill(SqliteSaver(conn), ["t1", "t2"])
    conn.close()
    target = SQLSaver(db_url, table_prefix=prefix)
    assert source_thread_ids(str(path)) == ["t1", "t2"]
    with open_sqlite_saver(path) as source:
        report = import_checkpoints(source, target, ["t1"])
        assert report.verified and report.imported > 2 and report.skipped == 0
        full = import_checkpoints(source, target, ["t1", "t2"])  # resumes: t1 is skipped
        assert full.skipped == report.imported and full.imported == report.imported
        _check_same(source, target, ["t1", "t2"])
    out = CliRunner().invoke(
        cli, ["import", "sqlite-saver", str(path), "--db", db_url, "--prefix", prefix, "--json"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["imported"] == 0
    with open_sqlite_saver(path) as source, pytest.raises(LookupError, match="nope"):
        import_checkpoints(source, target, ["nope"])
    with pytest.raises(FileNotFoundError), open_sqlite_saver(tmp_path / "none.db"):
        pass


def test_postgres_saver_database(tmp_path: Path) -> None:
    url = server_url("postgres")
    from langgraph.checkpoint.postgres import PostgresSaver

    thread = f"pg-{tmp_path.name}"
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        saver.delete_thread(thread)
        _fill(saver, [thread])
    assert thread in source_thread_ids(url)
    target = SQLSaver(str(tmp_path / "t.db"))
    with open_postgres_saver(url) as source:
        report = import_checkpoints(source, target, [thread], progress=True)
        assert report.verified and report.imported > 2
        _check_same(source, target, [thread])
        out = CliRunner().invoke(
            cli,
            [
                "import",
                "postgres-saver",
                url,
                "--thread",
                thread,
                "--db",
                str(tmp_path / "cli.db"),
                "--json",
            ],
        )
        assert out.exit_code == 0, out.output
        doc = json.loads(out.output)
        assert doc["verified"] and doc["imported"] == report.imported
        assert SQLSaver(str(tmp_path / "cli.db")).get_tuple({"configurable": {"thread_id": thread}})
        source.delete_thread(thread)


def test_subgraph_namespaces_and_pending_interrupts_survive(
    db_url: str, prefix: str, tmp_path: Path
) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.types import Command, interrupt

    def ask(state: MessagesState) -> dict[str, object]:
        return {"messages": [AIMessage(f"inner {interrupt('ok?')}")]}

    sub = StateGraph(MessagesState)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")
    outer = StateGraph(MessagesState)
    outer.add_node("sub", sub.compile())
    outer.add_edge(START, "sub")
    config = {"configurable": {"thread_id": "t"}}
    conn = sqlite3.connect(tmp_path / "anchor.db", check_same_thread=False)
    outer.compile(checkpointer=SqliteSaver(conn)).invoke({"messages": [HumanMessage("hi")]}, config)
    conn.close()
    target = SQLSaver(db_url, table_prefix=prefix)
    with open_sqlite_saver(tmp_path / "anchor.db") as source:
        report = import_checkpoints(source, target, ["t"])
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in target.list(config)}
    assert len(namespaces) == 2 and report.writes > 0
    graph = outer.compile(checkpointer=target)
    (task,) = graph.get_state(config).tasks
    assert task.interrupts[0].value == "ok?"
    out = graph.invoke(Command(resume="yes"), config)
    assert [m.text for m in out["messages"]] == ["hi", "inner yes"]


def _anchor_file(tmp_path: Path, threads: list[str], **metadata: object) -> Path:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "anchor.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    graph = _graph(SqliteSaver(conn))
    for t in threads:
        config = {"configurable": {"thread_id": t, **metadata.get(t, {})}}  # type: ignore[dict-item]
        graph.invoke({"messages": [HumanMessage("one")]}, config)  # type: ignore[attr-defined]
    conn.close()
    return path


def test_no_progress_bar_before_an_error(tmp_path: Path) -> None:
    """An unreachable target or a missing thread fails before any progress line is drawn."""
    import subprocess
    import sys

    path = _anchor_file(tmp_path, ["t1"])
    community = f"sqlite:///{tmp_path}/community.db"
    _community_history(community, "s").add_messages(MESSAGES)  # type: ignore[attr-defined]
    unreachable = "postgresql://nobody@127.0.0.1:1/none"
    for args in (
        ["sqlite-saver", str(path), "--db", unreachable],
        ["sqlite-saver", str(path), "--thread", "nosuch", "--db", str(tmp_path / "t.db")],
        ["history", community, "--db", unreachable],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "langmem_sqlite", "import", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 1, (args, proc.stderr)
        assert "%" not in proc.stderr and "-:--:--" not in proc.stderr, (args, proc.stderr)
        assert proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "t.db").exists() or not SQLSaver(str(tmp_path / "t.db")).list_threads()


def test_report_names_what_it_counts(tmp_path: Path) -> None:
    path = _anchor_file(tmp_path, ["t1", "t2"])
    db = str(tmp_path / "t.db")
    out = CliRunner().invoke(cli, ["import", "sqlite-saver", str(path), "--db", db])
    assert out.exit_code == 0, out.output
    assert "checkpoints: 2 threads found, 6 checkpoints imported, 0 already there" in out.output
    community = f"sqlite:///{tmp_path}/community.db"
    _community_history(community, "s").add_messages(MESSAGES)  # type: ignore[attr-defined]
    out = CliRunner().invoke(cli, ["import", "history", community, "--db", db])
    assert "chat_history: 1 session found, 4 messages imported, 0 already there" in out.output


def test_checkpoint_imports_get_a_user(tmp_path: Path) -> None:
    path = _anchor_file(tmp_path, ["t1", "t2", "t3"], t1={"customer": "ada"}, t2={"customer": 7})
    runner = CliRunner()
    db = str(tmp_path / "as.db")
    out = runner.invoke(cli, ["import", "sqlite-saver", str(path), "--as-user", "zoe", "--db", db])
    assert out.exit_code == 0, out.output
    users = json.loads(runner.invoke(cli, ["users", "--db", db, "--json"]).output)
    assert users == [{"user_id": "zoe", "sessions": 0, "threads": 3, "facts": 0}]
    threads = SQLSaver(db).list_threads(metadata={"user_id": "zoe"})
    assert len(threads) == 3
    # each checkpoint carries the user, as a graph run with configurable.user_id writes it
    assert all(c.metadata["user_id"] == "zoe" for c in SQLSaver(db).list(None))
    db = str(tmp_path / "key.db")
    out = runner.invoke(
        cli, ["import", "sqlite-saver", str(path), "--user-key", "customer", "--db", db]
    )
    assert out.exit_code == 0, out.output
    assert "1 thread without a user in the metadata: imported without one" in out.output
    users = json.loads(runner.invoke(cli, ["users", "--db", db, "--json"]).output)
    assert [(u["user_id"], u["threads"]) for u in users] == [("7", 1), ("ada", 1)]
    both = runner.invoke(
        cli, ["import", "sqlite-saver", str(path), "--as-user", "a", "--user-key", "k"]
    )
    assert both.exit_code != 0 and "not both" in both.output
    with open_sqlite_saver(path) as source, pytest.raises(TypeError, match="thread_ids"):
        import_checkpoints(source, SQLSaver(db), "t1")  # a str, not a list of threads
