"""`langmem-sqlite chat`, driven by --script in separate processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import http.server
import io
import json
import re
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from support import CONSOLE_SCRIPT, NO_KEY, console

from langmem_sqlite import ConversationStore
from langmem_sqlite.chat import ChatSession, OfflineChatModel, choose_model, open_chat, run_lines
from langmem_sqlite.chat.offline import respond

SMALL = ["--max-tokens", "800", "--trigger-tokens", "300", "--offline"]
chat_backends = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def run_chat(
    *args: str, script: str = "", env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``langmem-sqlite chat ARGS``, ``script`` on stdin."""
    return console("chat", *args, input=script, env=env, cwd=cwd)


def chat(db: str, prefix: str, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    proc = run_chat("--db", db, "--prefix", prefix, *SMALL, *args, "--script", "-", script=script)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


@chat_backends
def test_memory_survives_restart_and_facts_reach_new_sessions(db_url: str, prefix: str) -> None:
    first = chat(db_url, prefix, "Hi, my name is Ada.\nI live in Lyon.\n", "--user", "ada")
    assert "NOT an LLM" in first.stdout
    assert "remember_fact" in first.stdout
    # a new process continues the latest session of that user
    second = chat(db_url, prefix, "What is my name?\n/history\n", "--user", "ada")
    assert "session main (continuing, 8 messages)" in second.stdout
    assert "Your name is Ada (found in" in second.stdout
    assert "Hi, my name is Ada." in second.stdout  # /history shows the first process' turns
    # another session of the same user: only long-term facts carry over
    third = chat(db_url, prefix, "Where do I live?\n/facts\n", "--user", "ada", "--session", "s2")
    assert "session s2 (new)" in third.stdout
    assert "You live in Lyon (found in long-term facts)" in third.stdout
    assert "The user lives in Lyon." in third.stdout
    # another user knows nothing of Ada
    other = chat(db_url, prefix, "Where do I live?\n/facts\n", "--user", "bob")
    assert "I don't know" in other.stdout
    assert "no facts remembered about bob" in other.stdout
    # the turns are mirrored into the conversation tables (sessions/history commands)
    store = ConversationStore(db_url, table_prefix=prefix)
    assert {s.session_id for s in store.list_sessions("ada")} == {"main", "s2"}
    assert store.count_messages("main", user_id="ada") >= 8  # 2 statements (4 msgs each) + 2


@chat_backends
def test_summary_appears_once_the_trigger_is_passed(db_url: str, prefix: str) -> None:
    early = chat(db_url, prefix, "I am planning a trip.\n/summary\n", "--user", "u")
    assert "no summary yet" in early.stdout
    turns = "".join(f"Note number {i}: the weather in the mountains matters.\n" for i in range(8))
    late = chat(db_url, prefix, turns + "/summary\n", "--user", "u")
    assert "summary of " in late.stdout
    # past its cap (75 tokens here) the summary keeps its newest statements, not its oldest
    assert "The user said: Note number" in late.stdout
    stored = ConversationStore(db_url, table_prefix=prefix).get_summary("main", user_id="u")
    assert stored and "The user said: Note number" in stored
    # after a restart the summary is still there, and a question is answered from it
    again = chat(db_url, prefix, "/summary\n", "--user", "u")
    assert "summary of " in again.stdout


def test_commands_new_remember_forget_and_errors(tmp_path: Path) -> None:
    session, chosen = open_chat(str(tmp_path / "c.db"), user="zoe", offline=True)
    assert chosen.offline
    out: list[str] = []
    run_lines(
        session,
        [
            "/remember The user is vegetarian",
            "/facts",
            "/history x",
            "/bogus",
            "/new n2",
            "/session",
        ],
        out.append,
        show_input=False,
    )
    text = "\n".join(out)
    assert "The user is vegetarian" in text
    assert "error: /history: expected a positive number" in text
    assert "unknown command '/bogus'" in text
    assert "session n2" in text and session.session == "n2"
    (fact,) = session.facts()
    out.clear()
    run_lines(
        session,
        [f"/forget {fact.key}", "/forget nope", "/quit", "never sent"],
        out.append,
        show_input=False,
    )
    assert out == ["forgotten", "no fact with id 'nope'"]
    assert session.messages() == []
    with pytest.raises(ValueError, match="text"):
        session.send("  ")
    # a restart continues the session used last, not the first one
    session.send("hello in n2")
    session.new("n3")
    session.send("hello in n3")
    restarted = ChatSession(session.memory, session.graph, "zoe")
    assert restarted.session == "n3"
    assert restarted.messages()[0].text == "hello in n3"


def test_script_file_missing_is_one_line_error(tmp_path: Path) -> None:
    proc = run_chat("--db", str(tmp_path / "x.db"), "--script", str(tmp_path / "none.txt"))
    assert proc.returncode != 0
    assert proc.stderr.startswith("error") and len(proc.stderr.strip().splitlines()) == 1


def test_tour_runs_offline_on_a_fresh_file(tmp_path: Path) -> None:
    proc = run_chat("--tour", "--db", str(tmp_path / "t.db"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "process 2: after a restart" in proc.stdout
    assert "You like green tea (found in long-term facts)" in proc.stdout
    # the hint opens the user who has the facts
    hint = proc.stdout.strip().splitlines()[-1]
    assert hint.endswith(f"Chat yourself: langmem-sqlite chat --db {tmp_path / 't.db'} --user ada")


def _refused(proc: subprocess.CompletedProcess[str], *named: str) -> None:
    """`proc` stopped before doing anything, with one plain line naming `named`."""
    assert proc.returncode != 0 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ") and all(n in line for n in named), line
    assert not re.search(r"\w+(Error|Exception)\b", line)


def test_tour_never_writes_to_a_file_it_did_not_create(tmp_path: Path) -> None:
    precious = tmp_path / "precious.db"
    run_chat("--db", str(precious), "--offline", "--script", "-", script="I live in Oslo.\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for db in (str(precious), f"sqlite:///{precious}"):
        _refused(run_chat("--tour", "--db", db), str(precious), "exists already")
    _refused(run_chat("--tour", "--db", ":memory:"), ":memory:")
    _refused(run_chat("--tour", "--prefix", "bad-", cwd=tmp_path), "'bad-'")
    nowhere = tmp_path / "no-such-dir" / "t.db"
    _refused(run_chat("--tour", "--db", str(nowhere)), f"cannot create {nowhere}")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_tour_without_db_takes_a_new_file_and_keeps_what_was_added(tmp_path: Path) -> None:
    first = run_chat("--tour", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.startswith(f"Memory file: {tmp_path / 'langmem-tour.db'}\n")
    assert first.stdout.rstrip().endswith("chat --db langmem-tour.db --user ada")
    # the user goes on chatting in the tour's file, as its last line invites
    added = run_chat(
        *("--db", "langmem-tour.db", "--user", "ada", "--offline", "--script", "-"),
        script="I like skiing.\n",
        cwd=tmp_path,
    )
    assert "The user likes skiing." in added.stdout
    kept = (tmp_path / "langmem-tour.db").read_bytes()
    second = run_chat("--tour", cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.startswith(f"Memory file: {tmp_path / 'langmem-tour-2.db'}\n")
    assert second.stdout.rstrip().endswith("chat --db langmem-tour-2.db --user ada")
    assert (tmp_path / "langmem-tour.db").read_bytes() == kept


def test_tour_takes_a_sqlite_url(tmp_path: Path) -> None:
    proc = run_chat("--tour", "--db", "sqlite:///url.db", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"Memory file: {tmp_path / 'url.db'}\n")
    assert proc.stdout.rstrip().endswith("chat --db sqlite:///url.db --user ada")


@pytest.mark.parametrize("backend", ["postgres", "mariadb"], indirect=True)
def test_tour_on_a_server_database_and_never_over_data(db_url: str, prefix: str) -> None:
    proc = run_chat("--tour", "--db", db_url, "--prefix", prefix)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"Memory database: {db_url}\n")
    assert "You like green tea (found in long-term facts)" in proc.stdout
    assert proc.stdout.rstrip().endswith(f"chat --db {db_url} --prefix {prefix} --user ada")
    store = ConversationStore(db_url, table_prefix=prefix)
    held = [(s.session_id, s.message_count) for s in store.list_sessions("ada")]
    assert len(held) == 2
    # the tables now hold the tour's chats (and whatever the user adds): a new tour is refused
    _refused(run_chat("--tour", "--db", db_url, "--prefix", prefix), db_url, prefix)
    assert [(s.session_id, s.message_count) for s in store.list_sessions("ada")] == held


def test_model_choice() -> None:
    assert choose_model(env={}).why == "no OPENAI_API_KEY and no --base-url"
    assert choose_model(env={}, offline=True).why == "--offline"
    assert choose_model(env={"OPENAI_API_KEY": "sk-test"}, offline=True).offline
    real = choose_model("gpt-4o", env={"OPENAI_API_KEY": "sk-test"})
    assert not real.offline and type(real.model).__name__ == "ChatOpenAI"
    assert real.model.model_name == "gpt-4o"
    local = choose_model("llama3", base_url="http://127.0.0.1:11434/v1", env={})
    assert not local.offline and "127.0.0.1:11434" in local.label
    assert str(local.model.openai_api_base).startswith("http://127.0.0.1:11434")
    with pytest.raises(ValueError, match="base_url"):
        choose_model(base_url="http://x", offline=True, env={})


def test_offline_model_only_answers_from_its_input() -> None:
    model = OfflineChatModel()
    reply = model.invoke([HumanMessage("What is my name?")])
    assert reply.text.startswith("[offline]") and "don't know" in reply.text
    system = SystemMessage("<user_facts>\n- The user's name is Ada. (id: k)\n</user_facts>")
    assert (
        "Ada (found in long-term facts)" in model.invoke([system, HumanMessage("Who am I?")]).text
    )
    said = [HumanMessage("my name is Bo"), AIMessage("ok"), HumanMessage("what's my name?")]
    assert "Bo (found in the recent messages)" in respond(said).text
    # without the tool bound it never emits tool calls
    assert not respond([HumanMessage("I live in Oslo.")]).tool_calls
    calls = respond([HumanMessage("I live in New York and I like tea.")], can_remember=True)
    assert [c["args"]["fact"] for c in calls.tool_calls] == [
        "The user lives in New York.",
        "The user likes tea.",
    ]
    assert not respond([HumanMessage("Do I like tea?")], can_remember=True).tool_calls
    # as a summarizer: the user's statements, questions left out, the previous summary kept
    prompt = [
        SystemMessage("You maintain the running summary of a conversation"),
        HumanMessage(
            "<previous_summary>\n- The user said: hi\n</previous_summary>\n\n<new_messages>\n"
            '<message type="human">I live in Oslo.</message>\n'
            '<message type="human">Where do I live?</message>\n</new_messages>'
        ),
    ]
    assert model.invoke(prompt).text == "- The user said: hi\n- The user said: I live in Oslo."


def test_offline_model_reads_any_script_and_counts_in_words() -> None:
    said = {
        "I live in Kyoto 京都.": "The user lives in Kyoto 京都.",
        "I live in 京都.": "The user lives in 京都.",
        "I live in São Paulo.": "The user lives in São Paulo.",
        "My name is 太郎.": "The user's name is 太郎.",
        "I like 抹茶。": "The user likes 抹茶.",
    }
    for text, fact in said.items():
        calls = respond([HumanMessage(text)], can_remember=True).tool_calls
        assert [c["args"]["fact"] for c in calls] == [fact], text
    facts = SystemMessage("<user_facts>\n- The user lives in Kyoto 京都. (id: k)\n</user_facts>")
    asked = respond([facts, HumanMessage("Where do I live?")]).text
    assert "You live in Kyoto 京都 (found in long-term facts)" in asked
    assert (
        "Kyoto 京都"
        in respond([HumanMessage("I live in Kyoto 京都."), HumanMessage("Where do I live?")]).text
    )
    assert "I was sent 1 message." in respond([HumanMessage("hello")]).text
    assert "1 remembered fact." in respond([facts, HumanMessage("hello")]).text


class _Compatible(http.server.BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible server: replies with how many messages it was sent."""

    def answer(self, body: dict[str, Any]) -> str:
        return f"server saw {len(body['messages'])} messages"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = self.answer(body)
        reply = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_openai_compatible_server_via_base_url(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Compatible)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        outputs = []
        for _ in range(2):
            proc = run_chat(
                *("--db", str(tmp_path / "c.db"), "--base-url", base, "--model", "local-test"),
                *("--script", "-"),
                script="hello\n",
            )
            assert proc.returncode == 0, proc.stderr
            outputs.append(proc.stdout)
    finally:
        server.shutdown()
    assert f"model: local-test at {base}" in outputs[0] and "OFFLINE" not in outputs[0]
    assert "bot> server saw 2 messages" in outputs[0]  # system + the question
    assert "bot> server saw 4 messages" in outputs[1]  # the restart sent the earlier turn too


def _closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_failing_model_costs_one_line_and_keeps_the_question(tmp_path: Path) -> None:
    """A real ChatOpenAI on an unreachable endpoint: each failed turn prints one line, the
    script goes on, and the thread, `sessions` and `history` all hold the failed questions."""
    db = str(tmp_path / "c.db")
    unreachable = ["--base-url", f"http://127.0.0.1:{_closed_port()}/v1", "--script", "-"]
    key = {"OPENAI_API_KEY": "sk-test"}
    first = run_chat("--db", db, *unreachable, script="hello\n/history\n", env=key)
    assert first.returncode == 0, first.stderr
    (failed,) = [ln for ln in first.stdout.splitlines() if ln.startswith("error")]
    assert failed == "error: no reply: Connection error. (your message is kept)"
    assert "session main: 1 message\n" in first.stdout  # the next line was processed
    assert "Traceback" not in first.stderr and not re.search(r"\w+(Error|Exception)\b", failed)
    # the restart sees the question; a second failed turn is kept as well
    second = run_chat("--db", db, *unreachable, script="and now?\n", env=key)
    assert "session main (continuing, 1 message);" in second.stdout
    assert second.stdout.count("error: no reply") == 1
    session, _ = open_chat(db, user="me", offline=True)
    thread = [m.text for m in session.messages()]
    assert thread == ["hello", "and now?"]
    assert [m.text for m in ConversationStore(db).get_messages("main", user_id="me")] == thread
    listed = console("sessions", "--db", db, "--json")
    assert [(s["session_id"], s["message_count"]) for s in json.loads(listed.stdout)] == [
        ("main", 2)
    ]
    shown = console("history", "--db", db, "--user", "me", "main").stdout
    assert "hello" in shown and "and now?" in shown
    # with a working model the conversation goes on after the unanswered questions
    third = run_chat("--db", db, "--offline", "--script", "-", script="I live in Oslo.\n")
    assert "Saved to long-term memory: The user lives in Oslo." in third.stdout
    assert len(ConversationStore(db).get_messages("main", user_id="me")) == 6


def test_openai_base_url_in_the_environment_is_named_and_used(tmp_path: Path) -> None:
    """`OPENAI_BASE_URL` sends the chat to another OpenAI-compatible server: the banner names
    it, and the context budget is the one of such a server (not a known OpenAI model's)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Compatible)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": base}
    try:
        proc = run_chat(
            *("--db", str(tmp_path / "c.db"), "--model", "llama3", "--script", "-"),
            script="hello\n",
            env=env,
        )
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert f"model: llama3 at {base}\n" in proc.stdout
    assert "bot> server saw 2 messages" in proc.stdout


def test_turns_are_mirrored_to_the_conversation_tables(db_url: str, prefix: str) -> None:
    session, _ = open_chat(db_url, user="m", offline=True, prefix=prefix)
    run_lines(session, ["My name is Mo.", "Hello"], lambda _: None, show_input=False)
    store = session.memory.conversations
    assert store.get_messages("main", user_id="m") == session.messages()
    store.clear("main", user_id="m")  # a gap (e.g. a crash between the two writes) is refilled
    session.send("Who am I?")
    assert store.get_messages("main", user_id="m") == session.messages()


def test_a_str_where_a_list_is_expected_is_refused(tmp_path: Path) -> None:
    """``propose("Paris")`` once stored five facts: P, a, r, i, s."""
    from langmem_sqlite import SQLStore
    from langmem_sqlite.store import UserFacts

    facts = UserFacts(SQLStore(str(tmp_path / "f.db")), "u")
    with pytest.raises(TypeError, match=r"candidates: expected a list, got str \(for a single"):
        facts.propose("Paris")  # type: ignore[arg-type]
    assert facts.list_facts(pending=True) == []
    assert len(facts.propose(["Paris"])) == 1
    assert len(facts.propose(("Lyon", "Oslo"))) == 2
    session, _ = open_chat(str(tmp_path / "c.db"), user="u", offline=True)
    with pytest.raises(TypeError, match="lines"):
        run_lines(session, "hello", lambda _: None, show_input=False)


# -- the interactive chat, in a real pseudo-terminal --------------------------------------------


def _spawn(db: str, state: Path, *args: str) -> object:
    import pexpect

    env = {
        **NO_KEY,
        "XDG_STATE_HOME": str(state),
        "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect answers no cursor-position requests
        "TERM": "xterm",
        "COLUMNS": "200",
        "LINES": "50",
    }
    child = pexpect.spawn(
        CONSOLE_SCRIPT,
        ["chat", "--db", db, *args],
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 200),
    )
    child.logfile_read = io.StringIO()  # everything the terminal was sent
    child.expect_exact("you>")
    return child


def test_interactive_ctrl_c_cancels_the_line_and_history_survives(tmp_path: Path) -> None:
    import pexpect

    db, state = str(tmp_path / "c.db"), tmp_path / "state"
    stored, _ = open_chat(db, user="ada", offline=True)
    stored.remember("\x1b[31mred [/] [bold]b")  # escapes in a fact never reach the terminal raw
    child: Any = _spawn(db, state, "--user", "ada", "--offline")
    child.sendline("My name is Ada")
    child.expect_exact("Saved to long-term memory")
    child.expect_exact("you>")
    child.send("half typed, never sent")
    child.sendcontrol("c")  # cancels the line: the chat goes on
    child.expect_exact("you>")
    child.sendline("/remember I write [/] code")
    child.expect_exact("remembered")
    child.expect_exact("you>")
    child.sendline("/facts")
    child.expect_exact("I write [/] code")
    child.expect_exact("\\x1b[31mred [/] [bold]b")
    child.expect_exact("you>")
    assert "\x1b[31mred" not in child.logfile_read.getvalue()
    child.sendcontrol("d")  # Ctrl-D on an empty line leaves
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    store = ConversationStore(db)
    texts = [m.text for m in store.get_messages("main", user_id="ada")]
    assert texts[0] == "My name is Ada" and not any("half typed" in t for t in texts)
    (history,) = (state / "langmem-sqlite" / "history").iterdir()
    assert "My name is Ada" in history.read_text(encoding="utf-8")
    # a new process: Up recalls the lines typed before on this database
    child = _spawn(db, state, "--user", "ada", "--offline")
    child.send("\x1b[A")  # Up: the last line, /facts
    child.send("\x1b[A")  # the one before
    child.sendline("")
    child.expect_exact("remembered")
    child.expect_exact("you>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    # another database has its own history
    other: Any = _spawn(str(tmp_path / "other.db"), state, "--offline")
    other.sendline("/quit")
    other.expect(pexpect.EOF)
    assert len(list((state / "langmem-sqlite" / "history").iterdir())) == 2


class _Slow(_Compatible):
    """An OpenAI-compatible server whose reply to "slow" takes until released."""

    started = threading.Event()
    release = threading.Event()

    def answer(self, body: dict[str, Any]) -> str:
        if body["messages"][-1]["content"] == "slow question":
            type(self).started.set()
            type(self).release.wait(30)
        return super().answer(body)


def test_interactive_ctrl_c_stops_a_long_reply_and_keeps_the_conversation(tmp_path: Path) -> None:
    import pexpect

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    db, state = str(tmp_path / "c.db"), tmp_path / "state"
    try:
        child: Any = _spawn(db, state, "--base-url", base, "--model", "m")
        child.sendline("hello")
        child.expect_exact("bot> server saw 2 messages")
        child.expect_exact("you>")
        child.sendline("slow question")
        assert _Slow.started.wait(30)
        child.sendcontrol("c")  # the reply is cut short, the chat goes on
        child.expect_exact("(reply interrupted; the conversation so far is kept)")
        child.expect_exact("you>")
        child.sendline("after the interruption")
        child.expect_exact("bot> server saw")
        child.expect_exact("you>")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
    finally:
        _Slow.release.set()
        server.shutdown()
    texts = [m.text for m in ConversationStore(db).get_messages("main", user_id="me")]
    assert texts[:2] == ["hello", "server saw 2 messages"]
    assert "after the interruption" in texts and texts[-1].startswith("server saw")
    # a restart continues the same conversation
    session, _ = open_chat(db, user="me", offline=True)
    assert [m.text for m in session.messages()][:2] == ["hello", "server saw 2 messages"]


def test_facts_are_inside_the_model_input_budget(tmp_path: Path, monkeypatch: Any) -> None:
    """The chat's facts are a budgeted part of the policy's input: with many long facts and a
    small budget, every model call stays within ``max_tokens``, facts included."""
    from langmem_sqlite import count_tokens

    seen: list[list[Any]] = []
    # LangChain's hook a chat model implements: every model input of the chat passes through it
    original = OfflineChatModel._generate

    def recorded(self: OfflineChatModel, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        seen.append(list(messages))
        return original(self, messages, *args, **kwargs)

    monkeypatch.setattr(OfflineChatModel, "_generate", recorded)
    session, _ = open_chat(str(tmp_path / "f.db"), user="ada", offline=True, max_tokens=800)
    for i in range(60):
        session.remember(f"The user keeps fact number {i} about a long topic in mind " * 3)
    session.send("Which facts do you know about me?")
    assert seen
    for messages in seen:
        assert count_tokens(messages, "approximate") <= 800
    system = seen[0][0]
    assert isinstance(system, SystemMessage) and "fact number" in system.text
