"""SQLSaver and SQLStore as the LangGraph API server's checkpointer and store: a real
``langgraph dev`` server (its development mode refuses blocking calls on the event loop) started
from the README's own ``langgraph.json``, driven through ``langgraph_sdk``, with the rows read
back from the SQLite file."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if sys.version_info < (3, 11) and importlib.util.find_spec("langgraph_api") is None:
    pytest.skip(
        "langgraph dev needs langgraph-api, which needs Python 3.11 "
        "(langgraph-cli[inmem] leaves it out on 3.10)",
        allow_module_level=True,
    )

from langgraph_sdk import get_sync_client

from langmem_sqlite import SQLSaver, SQLStore

AGENT = """
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph


def reply(state: MessagesState) -> dict:
    return {"messages": [AIMessage(f"heard {len(state['messages'])} message(s)")]}


builder = StateGraph(MessagesState)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
graph = builder.compile()
"""


def _readme_langgraph_json() -> str:
    """The ``langgraph.json`` shown in README.md, as written."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", readme, re.S)
    (config,) = [b for b in blocks if '"checkpointer"' in b]
    return config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``langgraph dev`` on a free port, its checkpointer and store in ``agent.db``."""
    config = _readme_langgraph_json()
    assert json.loads(config)["env"]["LANGMEM_SQLITE_URL"] == "sqlite:///agent.db"
    db = tmp_path / "agent.db"  # the README's relative URL, from the server's directory
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "langgraph.json").write_text(config)
    port = _free_port()
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}
    log = (tmp_path / "server.log").open("w")
    cmd = [sys.executable, "-c", "from langgraph_cli.cli import cli; cli()", "dev"]
    cmd += ["--no-browser", "--no-reload", "--port", str(port)]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"langgraph dev did not start:\n{_tail(tmp_path)}")
            time.sleep(0.3)
        yield url, db
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def _tail(tmp_path: Path) -> str:
    return (tmp_path / "server.log").read_text()[-4000:]


def test_langgraph_dev_keeps_threads_and_store_items_in_the_database(
    server: tuple[str, Path], tmp_path: Path
) -> None:
    url, db = server
    client: Any = get_sync_client(url=url)  # its TypedDicts do not fit literal inputs
    thread = client.threads.create(metadata={"user_id": "u1"})
    tid = thread["thread_id"]
    for text in ("hi", "again"):
        out = client.runs.wait(
            tid, "agent", input={"messages": [{"role": "human", "content": text}]}
        )
        assert isinstance(out, dict), _tail(tmp_path)
    assert out["messages"][-1]["content"] == "heard 3 message(s)", _tail(tmp_path)
    assert len(client.threads.get_state(tid)["values"]["messages"]) == 4
    assert len(client.threads.get_history(tid, limit=50)) == 6
    client.store.put_item(["users", "u1"], "color", {"v": "blue"})
    assert client.store.get_item(["users", "u1"], "color")["value"] == {"v": "blue"}

    # the server's state is in the file, for any other process to read
    saver = SQLSaver(db)
    latest = saver.get_tuple({"configurable": {"thread_id": tid}})
    assert latest is not None
    messages = latest.checkpoint["channel_values"]["messages"]
    assert [m.content for m in messages] == [
        "hi",
        "heard 1 message(s)",
        "again",
        "heard 3 message(s)",
    ]
    assert [(t.thread_id, t.checkpoint_count) for t in saver.list_threads()] == [(tid, 6)]
    item = SQLStore(db).get(("users", "u1"), "color")
    assert item is not None and item.value == {"v": "blue"}

    # time travel through the server: a run from the first turn's checkpoint forks the thread
    first = [
        h
        for h in client.threads.get_history(tid, limit=50)
        if len(h["values"].get("messages", [])) == 2 and not h["next"]  # turn 1's end
    ]
    assert len(first) == 1
    fork = client.runs.wait(
        tid,
        "agent",
        input={"messages": [{"role": "human", "content": "instead"}]},
        checkpoint_id=first[0]["checkpoint"]["checkpoint_id"],
    )
    assert isinstance(fork, dict) and fork["messages"][-1]["content"] == "heard 3 message(s)"
    latest = saver.get_tuple({"configurable": {"thread_id": tid}})
    assert latest is not None
    assert [m.content for m in latest.checkpoint["channel_values"]["messages"]][2] == "instead"

    client.threads.delete(tid)
    deadline = time.monotonic() + 10
    while saver.list_threads() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert saver.list_threads() == []
    assert "Blocking" not in (tmp_path / "server.log").read_text()
