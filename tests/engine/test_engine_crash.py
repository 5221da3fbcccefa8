"""Crash safety: a process SIGKILLed at a random point of a stream of history writes and graph
steps loses nothing it acknowledged, leaves no partial batch, the SQLite file passes
``PRAGMA integrity_check`` and the next open works.

CI runs a few kills; ``LANGMEM_HARDENING_FULL=1`` runs many (see README, "Hardening").
"""

from __future__ import annotations

import operator
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from support import HARDENING_FULL

from langmem_sqlite import ConversationStore, SQLSaver

RUNS = 40 if HARDENING_FULL else 5
BATCH = 3
HERE = Path(__file__).resolve().parent


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def _step(state: State) -> dict[str, Any]:
    return {"items": [f"done:{state['items'][-1]}"]}


def build_graph(saver: SQLSaver) -> Any:
    graph = StateGraph(State)
    graph.add_node("step", _step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=saver)


def worker(url: str, prefix: str, log: str, run: int) -> None:  # pragma: no cover - a child
    """Write forever; log each write only after it returned (i.e. was acknowledged)."""
    store = ConversationStore(url, table_prefix=prefix)
    app = build_graph(SQLSaver(url, table_prefix=prefix))
    config = {"configurable": {"thread_id": "crash"}}
    with open(log, "a", buffering=1) as out:
        out.write("ready\n")
        for i in range(10**9):
            tag = f"{run}.{i}"
            batch = [HumanMessage(f"{tag}:0"), AIMessage(f"{tag}:1"), HumanMessage(f"{tag}:2")]
            store.add_messages("crash", batch, user_id="u")
            out.write(f"h {tag}\n")
            app.invoke({"items": [tag]}, config)
            out.write(f"g {tag}\n")


def _spawn(url: str, prefix: str, log: Path, run: int) -> subprocess.Popen[bytes]:
    code = (
        f"import sys; sys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]; "
        "import test_engine_crash as t; "
        f"t.worker({url!r}, {prefix!r}, {str(log)!r}, {run})"
    )
    return subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)


def _wait_ready(proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and "ready" in log.read_text():
            return
        if proc.poll() is not None:
            raise AssertionError(f"worker died: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        time.sleep(0.05)
    raise AssertionError("worker did not start")


def _acknowledged(log: Path) -> tuple[list[str], list[str]]:
    lines = [line.split() for line in log.read_text().splitlines() if line.startswith(("h ", "g "))]
    return [t for k, t in lines if k == "h"], [t for k, t in lines if k == "g"]


def _check(url: str, prefix: str, acked_h: list[str], acked_g: list[str]) -> None:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
    store = ConversationStore(url, table_prefix=prefix)
    contents = [m.content for m in store.get_messages("crash", user_id="u")]
    assert len(contents) % BATCH == 0, "a partial batch was written"
    tags = []
    for start in range(0, len(contents), BATCH):
        tag = contents[start].split(":")[0]
        assert contents[start : start + BATCH] == [f"{tag}:{j}" for j in range(BATCH)]
        tags.append(tag)
    assert len(tags) == len(set(tags)), "a batch was written twice"
    assert set(acked_h) <= set(tags), "an acknowledged batch was lost"
    assert store.count_messages("crash", user_id="u") == len(contents)
    app = build_graph(SQLSaver(url, table_prefix=prefix))
    items = app.get_state({"configurable": {"thread_id": "crash"}}).values.get("items", [])
    # each step's result right after its input; a run killed after its input checkpoint and
    # before its step leaves an input without a result (that run was never acknowledged)
    inputs = [x for x in items if not x.startswith("done:")]
    assert len(inputs) == len(set(inputs)), "a graph input was applied twice"
    steps = []
    for i, x in enumerate(items):
        if x.startswith("done:"):
            assert i > 0 and items[i - 1] == x[5:], "inconsistent checkpoint"
            steps.append(x[5:])
    assert set(acked_g) <= set(steps), "an acknowledged graph step was lost"


@pytest.mark.timeout(900 if HARDENING_FULL else 240)
def test_sigkill_at_random_points_loses_nothing_acknowledged(
    db_url: str, prefix: str, tmp_path: Path
) -> None:
    """On SQLite the killed process held the file; on a server, its connections (the server
    rolls back what was not committed)."""
    rng = random.Random(int(os.environ.get("LANGMEM_HARDENING_SEED", "7")))
    acked_h: list[str] = []
    acked_g: list[str] = []
    for run in range(RUNS):
        log = tmp_path / f"run{run}.log"
        proc = _spawn(db_url, prefix, log, run)
        try:
            _wait_ready(proc, log)
            time.sleep(rng.uniform(0.0, 0.6))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the worker must be killed mid-stream"
        h, g = _acknowledged(log)
        acked_h += h
        acked_g += g
        _check(
            db_url, prefix, acked_h, acked_g
        )  # the next open works and holds every acknowledged write
    assert acked_h, "no write was acknowledged before the kills: the test proved nothing"
    # after all the kills, the database still takes writes
    store = ConversationStore(db_url, table_prefix=prefix)
    store.add_messages("after", [HumanMessage("still fine")])
    assert [m.content for m in store.get_messages("after")] == ["still fine"]
