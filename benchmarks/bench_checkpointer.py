"""SQLSaver vs the anchors it replaces: SqliteSaver (SQLite file) and PostgresSaver.

One command: ``python benchmarks/bench_checkpointer.py`` (``--quick`` for a short run).

Scenarios (targets in brackets):

1. Chat graph, 200 turns (one human message per turn, a node appends a ~300-character
   ``AIMessage``; plain ``MessagesState`` / ``add_messages``; ``durability="sync"``), SQLite file:
   footprint on disk, the database file plus its ``-wal`` and ``-shm`` [<= 0.05x], total run
   time [<= 0.7x SqliteSaver, <= 1.15x the same graph on LangGraph's InMemorySaver], ``put``
   latency at turn 200 vs turn 10 [<= 3x], ``get_tuple`` at turn 200, warm and cold
   [<= 1.0x], listing all checkpoints; then the CPU each saver method takes inside a run of
   the graph, and over the same calls replayed alone (where the time goes).
2. A tiny-checkpoint ``put`` on SQLite [<= 1.0x SqliteSaver].
2b. The async API on SQLite vs AsyncSqliteSaver: the chat graph with ``ainvoke``, a tiny
   ``aput`` and ``aget_tuple`` [< 1x].
3. The chat graph on PostgreSQL vs PostgresSaver: total time [<= 0.7x], bytes stored [<= 0.2x],
   the CPU per saver method as in 1.
4. Pooled PostgreSQL throughput, 8 threads vs 1 [>= 0.8x the CPU bound it prints] (PostgresSaver
   with a pool measured too); 4b. the same through a latency proxy [>= 3x].
5. A 1,000-turn thread on SQLite: size and per-turn latency every 100 turns (linear, flat).

Every value a read returns is decoded afresh (nothing is shared with a cache or another call),
so a read costs at least what decoding its values costs: section 1 prints that floor.

PostgreSQL comes from ``LANGMEM_BENCH_POSTGRES_URL`` (default: the local test server); each
saver gets a fresh schema, dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph, add_messages
from typing_extensions import TypedDict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import _text as _common_text

from langmem_sqlite import SQLSaver

PG_URL = os.environ.get("LANGMEM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def text(n: int, seed: int) -> str:
    """About ``n`` characters of English-like text (deterministic per ``seed``)."""
    return _common_text(n, seed)


def chat_graph(saver: BaseCheckpointSaver) -> Any:
    def chat(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=text(300, n))]}

    g = StateGraph(MessagesState)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    return g.compile(checkpointer=saver)


class Timed:
    """Wraps ``saver.put`` to record each call's latency (seconds)."""

    def __init__(self, saver: BaseCheckpointSaver) -> None:
        self.calls: list[float] = []
        inner = saver.put

        def put(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                self.calls.append(time.perf_counter() - t0)

        saver.put = put  # type: ignore[method-assign]


def run_chat(
    saver: BaseCheckpointSaver,
    turns: int,
    thread: str,
    on_turn: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    graph = chat_graph(saver)
    timed = Timed(saver)
    cfg = {"configurable": {"thread_id": thread}}
    per_turn: list[list[float]] = []
    turn_times: list[float] = []
    t0 = time.perf_counter()
    for i in range(turns):
        start = len(timed.calls)
        t1 = time.perf_counter()
        graph.invoke({"messages": [HumanMessage(content=text(180, i))]}, cfg, durability="sync")
        turn_times.append(time.perf_counter() - t1)
        per_turn.append(timed.calls[start:])
        if on_turn:
            on_turn(i + 1)
    total = time.perf_counter() - t0
    return {"total": total, "per_turn": per_turn, "turns": turn_times, "cfg": cfg}


def put_median(per_turn: list[list[float]], lo: int, hi: int) -> float:
    vals = [x for turn in per_turn[lo:hi] for x in turn]
    return statistics.median(vals)


def interleaved(fns: dict[str, Callable[[], Any]], n: int) -> dict[str, float]:
    """Median seconds of each function, called in turn ``n`` times (the machine's load then
    weighs on all alike)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(n):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def median_time(fn: Callable[[], Any], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def footprint(path: str) -> tuple[int, int, int]:
    """The sizes of a SQLite database's files as they are: the database, its ``-wal`` and its
    ``-shm`` (0 for a file that does not exist). What the user's disk holds."""
    return tuple(  # type: ignore[return-value]
        os.path.getsize(p) if os.path.exists(p) else 0 for p in (path, path + "-wal", path + "-shm")
    )


def sqlite_size(path: str) -> int:
    """db + wal + shm (see :func:`footprint`)."""
    return sum(footprint(path))


def pages_in_use(path: str) -> int:
    """Bytes of the database's pages in use, after checkpointing its WAL: how much data it
    holds (for growth curves; :func:`footprint` is what the disk holds)."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = (
        con.execute("PRAGMA page_count").fetchone()[0]
        - con.execute("PRAGMA freelist_count").fetchone()[0]
    )
    size = pages * con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    return int(size)


def _mb(sizes: tuple[int, int, int]) -> str:
    return " + ".join(f"{x / 1e6:.3f}" for x in sizes) + " MB"


def footprint_rows(label: str, ours: str, anchor: str) -> None:
    o, a = footprint(ours), footprint(anchor)
    print(f"  files {label}: ours db + wal + shm {_mb(o)}; anchor {_mb(a)}")
    row(f"footprint {label}", sum(o) / 1e6, sum(a) / 1e6, "MB", "<= 0.05x")


def row(name: str, ours: float, anchor: float, unit: str, target: str) -> None:
    ratio = ours / anchor if anchor else float("inf")
    print(
        f"  {name:<34} ours {ours:12.3f} {unit:<3} anchor {anchor:12.3f} {unit:<3} ratio {ratio:6.3f}x  (target {target})"
    )


REPS = 3
"""Runs of the chat graph per saver for the total-time figures (medians, interleaved)."""


def total_times(
    ours: BaseCheckpointSaver, anchor: BaseCheckpointSaver, first: tuple[float, float], turns: int
) -> list[float]:
    """Print the median total run time of ours and the anchor over :data:`REPS` runs (``first``
    and further threads, interleaved so that machine load hits both alike), and the same graph
    on LangGraph's InMemorySaver, for reference: LangGraph's own work plus an in-memory saver
    (which still serializes every new value and decodes the whole state on each read)."""
    runs: dict[str, list[float]] = {"ours": [first[0]], "anchor": [first[1]], "floor": []}
    floor_turns: list[float] = []
    for r in range(REPS):
        if r:
            runs["ours"].append(run_chat(ours, turns, f"rep{r}")["total"])
            runs["anchor"].append(run_chat(anchor, turns, f"rep{r}")["total"])
        floor = run_chat(InMemorySaver(), turns, "floor")
        runs["floor"].append(floor["total"])
        floor_turns = floor_turns or floor["turns"]
    t_ours, t_anchor, base = (statistics.median(runs[k]) for k in ("ours", "anchor", "floor"))
    row(f"total run time (median of {REPS})", t_ours, t_anchor, "s", TOTAL_TARGET[ours.db.backend])
    row("total vs LangGraph on InMemorySaver", t_ours, base, "s", FLOOR_TARGET[ours.db.backend])
    print(f"  InMemorySaver's total = {base / t_anchor:.3f}x the anchor's")
    row("total - InMemorySaver's total", t_ours - base, t_anchor - base, "s", "-")
    return floor_turns


def turn_times(ours: list[float], anchor: list[float], floor: list[float]) -> None:
    """Median time of one turn early in the thread and late (each run's first ``n`` and last
    ``n`` turns): a saver's fixed cost per call weighs most while the state is small."""
    n = max(1, len(ours) // 5)
    for label, part in (
        (f"1-{n}", slice(0, n)),
        (f"{len(ours) - n + 1}-{len(ours)}", slice(-n, None)),
    ):
        o, a, f = (statistics.median(t[part]) * 1e3 for t in (ours, anchor, floor))
        print(
            f"  one turn, turns {label:9s}    ours {o:8.3f} ms  anchor {a:8.3f} ms  "
            f"ratio {o / a:6.3f}x; InMemorySaver {f:.3f} ms (ours {o / f:.3f}x)"
        )


METHODS = ("put", "put_writes", "get_tuple")


def _plain(config: Any) -> dict[str, Any]:
    """The part of a call's config a saver reads (LangGraph adds callables at run time)."""
    keys = ("thread_id", "checkpoint_ns", "checkpoint_id")
    return {"configurable": {k: v for k, v in config["configurable"].items() if k in keys}}


class _Recorder(InMemorySaver):
    """LangGraph's InMemorySaver that keeps a pickled copy of each call's arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, bytes]] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.calls.append(
            ("put", pickle.dumps((_plain(config), checkpoint, metadata, new_versions)))
        )
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(
            ("put_writes", pickle.dumps((_plain(config), writes, task_id, task_path)))
        )
        super().put_writes(config, writes, task_id, task_path)

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        self.calls.append(("get_tuple", pickle.dumps((_plain(config),))))
        return super().get_tuple(config)


def _in_graph_cpu(saver: BaseCheckpointSaver, turns: int, thread: str) -> dict[str, float]:
    """CPU seconds spent in each saver method (the calling thread's CPU time: LangGraph calls
    ``put`` and ``put_writes`` from its background threads) during one run of the chat graph,
    and the whole process's CPU for the run."""
    cpu = dict.fromkeys(METHODS, 0.0)
    originals = {name: getattr(saver, name) for name in METHODS}

    def timed(name: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                return inner(*a, **k)
            finally:
                cpu[name] += time.thread_time() - t0

        return call

    for name, inner in originals.items():
        setattr(saver, name, timed(name, inner))
    try:
        t0 = time.process_time()
        run_chat(saver, turns, thread)
        cpu["process"] = time.process_time() - t0
    finally:
        for name in METHODS:
            delattr(saver, name)  # the bound method of the class again
    return cpu


def _replayed_cpu(saver: BaseCheckpointSaver, calls: list[tuple[str, bytes]]) -> dict[str, float]:
    """CPU seconds of each method over the same calls made one after another in this thread
    (each call's arguments unpickled before its clock starts)."""
    cpu = dict.fromkeys(METHODS, 0.0)
    for name, blob in calls:
        args = pickle.loads(blob)
        fn = getattr(saver, name)
        t0 = time.thread_time()
        fn(*args)
        cpu[name] += time.thread_time() - t0
    return cpu


def cpu_split(
    ours: BaseCheckpointSaver,
    anchor: BaseCheckpointSaver,
    replay: Callable[[], tuple[BaseCheckpointSaver, BaseCheckpointSaver]],
    turns: int,
) -> None:
    """Where each saver's CPU goes: per method inside a run of the chat graph (ours, the anchor
    and InMemorySaver, one run each), then the same calls replayed alone on fresh savers
    (``replay()`` makes ours and the anchor's; the calls are recorded from an InMemorySaver
    run). Inside the graph a call shares the 2 CPUs and the GIL with LangGraph's own work."""
    rows = {
        "ours": _in_graph_cpu(ours, turns, "cpu"),
        "anchor": _in_graph_cpu(anchor, turns, "cpu"),
        "InMemorySaver": _in_graph_cpu(InMemorySaver(), turns, "cpu"),
    }
    print(
        f"  CPU in the graph run, per method (s, {turns} turns): put / put_writes / get_tuple; process"
    )
    for label, c in rows.items():
        print(
            f"    {label:14s} {c['put']:7.3f} {c['put_writes']:7.3f} {c['get_tuple']:7.3f};"
            f" {c['process']:7.3f}"
        )
    recorder = _Recorder()
    run_chat(recorder, turns, "replay")
    fresh_ours, fresh_anchor = replay()
    alone = {
        "ours": _replayed_cpu(fresh_ours, recorder.calls),
        "anchor": _replayed_cpu(fresh_anchor, recorder.calls),
    }
    print("  the same calls replayed alone, one after another (s): put / put_writes / get_tuple")
    for label, c in alone.items():
        print(f"    {label:14s} {c['put']:7.3f} {c['put_writes']:7.3f} {c['get_tuple']:7.3f}")


TOTAL_TARGET = {"sqlite": "<= 0.7x", "postgresql": "<= 0.7x"}
FLOOR_TARGET = {"sqlite": "<= 1.15x", "postgresql": "-"}


# -- scenarios -----------------------------------------------------------------------------


def sqlite_chat(turns: int, tmp: str) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    print(f"\n== 1. chat graph, {turns} turns, SQLite file (durability=sync) ==")
    ours_path, anchor_path = os.path.join(tmp, "ours.db"), os.path.join(tmp, "anchor.db")
    ours = SQLSaver(ours_path)
    ours.setup()
    a = run_chat(ours, turns, "t1")
    anchor_conn = sqlite3.connect(anchor_path, check_same_thread=False)
    anchor = SqliteSaver(anchor_conn)
    anchor.setup()
    b = run_chat(anchor, turns, "t1")
    lo, hi = min(5, turns // 4), min(15, turns // 2)
    footprint_rows("(savers open)", ours_path, anchor_path)
    ours.db.dispose()  # every connection closed: what the files keep afterwards
    anchor_conn.close()
    footprint_rows("(all closed)", ours_path, anchor_path)
    anchor_conn = sqlite3.connect(anchor_path, check_same_thread=False)
    anchor = SqliteSaver(anchor_conn)
    floor_turns = total_times(ours, anchor, (a["total"], b["total"]), turns)
    turn_times(a["turns"], b["turns"], floor_turns)
    ours_growth = put_median(a["per_turn"], turns - 10, turns) / put_median(a["per_turn"], lo, hi)
    anchor_growth = put_median(b["per_turn"], turns - 10, turns) / put_median(b["per_turn"], lo, hi)
    print(
        f"  put p50 turns {lo}-{hi}: ours {put_median(a['per_turn'], lo, hi) * 1e3:.3f} ms, anchor {put_median(b['per_turn'], lo, hi) * 1e3:.3f} ms"
    )
    print(
        f"  put p50 last 10 turns: ours {put_median(a['per_turn'], turns - 10, turns) * 1e3:.3f} ms, anchor {put_median(b['per_turn'], turns - 10, turns) * 1e3:.3f} ms"
    )
    print(
        f"  put growth (last10 / turn~10):   ours {ours_growth:.2f}x  anchor {anchor_growth:.2f}x  (target ours <= 3x)"
    )
    cfg = a["cfg"]
    fresh = SQLSaver(ours_path, list_cache_size=0)
    # Every stored value goes through the saver's serializer: a read must at least decode the
    # thread's messages with it, as the anchor does.
    messages = ours.get_tuple(cfg).checkpoint["channel_values"]["messages"]  # type: ignore[union-attr]
    blob = ours.serde.dumps_typed(messages)
    ms = interleaved(
        {
            "anchor": lambda: anchor.get_tuple(cfg),
            "warm": lambda: ours.get_tuple(cfg),
            "cold": lambda: fresh.get_tuple(cfg),
            "decode": lambda: ours.serde.loads_typed(blob),
        },
        40,
    )
    t_anchor, decode = ms["anchor"] * 1e3, ms["decode"] * 1e3
    row("get_tuple(latest) p50, warm", ms["warm"] * 1e3, t_anchor, "ms", "<= 1.0x")
    row("get_tuple(latest) p50, cold", ms["cold"] * 1e3, t_anchor, "ms", "<= 1.0x")
    print(
        f"  decoding the {len(messages)} messages alone      {decode:.3f} ms = "
        f"{decode / t_anchor:.3f}x the anchor's get_tuple: the floor of the cold ratio"
    )
    t_ours = median_time(lambda: list(fresh.list(cfg)), 3)
    t_anchor = median_time(lambda: list(anchor.list(cfg)), 1 if turns >= 100 else 3)
    n = len(list(fresh.list(cfg)))
    row(f"list() all {n} checkpoints", t_ours, t_anchor, "s", "-")

    def replay_savers() -> tuple[BaseCheckpointSaver, BaseCheckpointSaver]:
        fresh_ours = SQLSaver(os.path.join(tmp, "replay-ours.db"))
        fresh_ours.setup()
        conn = sqlite3.connect(os.path.join(tmp, "replay-anchor.db"), check_same_thread=False)
        fresh_anchor = SqliteSaver(conn)
        fresh_anchor.setup()
        return fresh_ours, fresh_anchor

    cpu_split(ours, anchor, replay_savers, turns)
    anchor_conn.close()


class ScalarState(TypedDict, total=False):
    """A chat state with scalar channels: five set once, two changed every turn."""

    messages: Annotated[list[AnyMessage], add_messages]
    user_name: str
    lang: str
    tenant: str
    max_steps: int
    debug: bool
    turns: int
    route: str


def scalar_graph(saver: BaseCheckpointSaver) -> Any:
    def chat(state: ScalarState) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [AIMessage(content=text(300, n))],
            "turns": state.get("turns", 0) + 1,
            "route": "tools" if n % 3 else "answer",
        }

    g = StateGraph(ScalarState)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    return g.compile(checkpointer=saver)


def sqlite_scalars(turns: int, tmp: str) -> None:
    """The chat graph with seven scalar channels besides ``messages``: a row per changed
    value and version."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    print(f"\n== 1b. chat graph with 7 scalar channels, {turns} turns, SQLite file ==")
    paths = os.path.join(tmp, "scalars_ours.db"), os.path.join(tmp, "scalars_anchor.db")
    conn = sqlite3.connect(paths[1], check_same_thread=False)
    savers: list[BaseCheckpointSaver] = [SQLSaver(paths[0]), SqliteSaver(conn)]
    totals = []
    for saver in savers:
        saver.setup()
        graph = scalar_graph(saver)
        cfg = {"configurable": {"thread_id": "s1"}}
        t0 = time.perf_counter()
        for i in range(turns):
            first = {"user_name": "Ada Lovelace", "lang": "en", "tenant": "acme-corp"}
            first.update(max_steps=10, debug=False)  # type: ignore[arg-type]
            inp: dict[str, Any] = {"messages": [HumanMessage(content=text(180, i))]}
            graph.invoke({**inp, **first} if i == 0 else inp, cfg, durability="sync")
        totals.append(time.perf_counter() - t0)
    sizes = sqlite_size(paths[0]) / 1e6, sqlite_size(paths[1]) / 1e6
    row("footprint db + wal + shm", *sizes, "MB", "-")
    row("total run time", totals[0], totals[1], "s", "-")
    conn.close()


def tiny_checkpoints(saver: BaseCheckpointSaver, n: int) -> Iterator[tuple[Any, Any, Any]]:
    """``n`` tiny checkpoints of one thread, one integer channel each: ``(checkpoint, metadata,
    new_versions)`` for ``put``, made before its timing starts."""
    version = None
    for i in range(n):
        version = saver.get_next_version(version, None)
        ckpt = empty_checkpoint()
        ckpt["channel_values"] = {"x": i}
        ckpt["channel_versions"] = {"x": version}
        yield ckpt, {"source": "loop", "step": i}, {"x": version}


def tiny_put(n: int, tmp: str) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    print(f"\n== 2. tiny-checkpoint put, SQLite file, {n} puts ==")

    def bench(saver: BaseCheckpointSaver) -> float:
        cfg = {"configurable": {"thread_id": "tiny", "checkpoint_ns": ""}}
        times = []
        for ckpt, metadata, versions in tiny_checkpoints(saver, n):
            t0 = time.perf_counter()
            cfg = saver.put(cfg, ckpt, metadata, versions)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    ours = SQLSaver(os.path.join(tmp, "tiny_ours.db"))
    ours.setup()
    anchor = SqliteSaver(
        sqlite3.connect(os.path.join(tmp, "tiny_anchor.db"), check_same_thread=False)
    )
    anchor.setup()
    bench(ours)  # warm-up (statement caches)
    bench(anchor)
    row("put p50", bench(ours) * 1e6, bench(anchor) * 1e6, "us", "<= 1.0x")


def sqlite_async(turns: int, n: int, tmp: str) -> None:
    """The async API on a SQLite file (what ``ainvoke`` and an async server use) against
    AsyncSqliteSaver: the chat graph with ``ainvoke``, then a tiny ``aput`` and ``aget_tuple``."""
    import asyncio

    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    print(
        f"\n== 2b. async API, SQLite file: chat graph with ainvoke ({turns} turns), "
        f"tiny aput / aget_tuple ({n} each) =="
    )

    async def chat(saver: BaseCheckpointSaver, thread: str) -> float:
        graph = chat_graph(saver)
        cfg = {"configurable": {"thread_id": thread}}
        t0 = time.perf_counter()
        for i in range(turns):
            message = HumanMessage(content=text(180, i))
            await graph.ainvoke({"messages": [message]}, cfg, durability="sync")
        return time.perf_counter() - t0

    async def tiny(saver: BaseCheckpointSaver) -> tuple[float, float]:
        cfg: Any = {"configurable": {"thread_id": "tiny", "checkpoint_ns": ""}}
        puts, gets = [], []
        for ckpt, metadata, versions in tiny_checkpoints(saver, n):
            t0 = time.perf_counter()
            cfg = await saver.aput(cfg, ckpt, metadata, versions)
            t1 = time.perf_counter()
            await saver.aget_tuple(cfg)
            puts.append(t1 - t0)
            gets.append(time.perf_counter() - t1)
        return statistics.median(puts), statistics.median(gets)

    async def main() -> None:
        ours = SQLSaver(os.path.join(tmp, "async_ours.db"))
        await ours.asetup()
        async with aiosqlite.connect(os.path.join(tmp, "async_anchor.db")) as conn:
            anchor = AsyncSqliteSaver(conn)
            await anchor.setup()
            totals: dict[str, list[float]] = {"ours": [], "anchor": []}
            for r in range(REPS):  # interleaved, so that machine load hits both alike
                totals["ours"].append(await chat(ours, f"a{r}"))
                totals["anchor"].append(await chat(anchor, f"a{r}"))
            t_ours, t_anchor = (statistics.median(totals[k]) for k in ("ours", "anchor"))
            row(f"ainvoke total (median of {REPS})", t_ours, t_anchor, "s", "< 1x")
            await tiny(ours)  # warm-up (statement caches, worker threads)
            await tiny(anchor)
            (o_put, o_get), (a_put, a_get) = await tiny(ours), await tiny(anchor)
            row("tiny aput p50", o_put * 1e6, a_put * 1e6, "us", "< 1x")
            row("tiny aget_tuple p50", o_get * 1e6, a_get * 1e6, "us", "< 1x")

    asyncio.run(main())


def _pg_schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


def _pg_size(schema: str) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r' "
            "AND c.relname LIKE '%%checkpoint%%'",  # the saver's tables (not the package's others)
            (schema,),
        ).fetchall()
    disk = sum(r[1] for r in rows)
    return disk, len(rows)


def _pg_raw_bytes(schema: str) -> int:
    import psycopg

    total = 0
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s "
                "AND tablename LIKE '%%checkpoint%%'",
                (schema,),
            ).fetchall()
        ]
        for t in tables:
            q = f'SELECT coalesce(sum(pg_column_size(x.*)), 0) FROM "{schema}"."{t}" x'
            total += int(conn.execute(q).fetchone()[0])
    return total


@contextmanager
def pg_schemas(n: int) -> Iterator[list[str]]:
    """``n`` fresh PostgreSQL schemas, dropped afterwards."""
    import psycopg

    names = [f"bench_{uuid.uuid4().hex[:8]}" for _ in range(n)]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for name in names:
            conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield names
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def pg_chat(turns: int) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    print(f"\n== 3. chat graph, {turns} turns, PostgreSQL (durability=sync) ==")
    with pg_schemas(4) as (s_ours, s_anchor, r_ours, r_anchor):
        ours = SQLSaver(PG_URL, schema=s_ours)
        ours.setup()
        a = run_chat(ours, turns, "t1")
        url = _pg_schema_url(s_anchor)
        with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
            anchor = PostgresSaver(conn)
            anchor.setup()
            b = run_chat(anchor, turns, "t1")
            cfg = a["cfg"]
            fresh = SQLSaver(PG_URL, schema=s_ours, list_cache_size=0)
            ms = interleaved(
                {
                    "anchor": lambda: anchor.get_tuple(cfg),
                    "warm": lambda: ours.get_tuple(cfg),
                    "cold": lambda: fresh.get_tuple(cfg),
                },
                40,
            )
            # sizes of the one 200-turn thread, before the further runs below
            disk = (_pg_size(s_ours)[0] / 1e6, _pg_size(s_anchor)[0] / 1e6)
            raw = (_pg_raw_bytes(s_ours) / 1e6, _pg_raw_bytes(s_anchor) / 1e6)
            floor_turns = total_times(ours, anchor, (a["total"], b["total"]), turns)
            turn_times(a["turns"], b["turns"], floor_turns)
        t_anchor = ms["anchor"] * 1e3
        row("get_tuple(latest) p50, warm", ms["warm"] * 1e3, t_anchor, "ms", "-")
        row("get_tuple(latest) p50, cold", ms["cold"] * 1e3, t_anchor, "ms", "-")
        row("bytes stored (on disk, MB)", *disk, "MB", "<= 0.2x")
        row("bytes stored (raw rows, MB)", *raw, "MB", "<= 0.2x")
        with (
            psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn,
            psycopg.connect(_pg_schema_url(r_anchor), autocommit=True, prepare_threshold=0) as rc,
        ):

            def replay_savers() -> tuple[BaseCheckpointSaver, BaseCheckpointSaver]:
                fresh_ours = SQLSaver(PG_URL, schema=r_ours)
                fresh_ours.setup()
                fresh_anchor = PostgresSaver(rc)
                fresh_anchor.setup()
                return fresh_ours, fresh_anchor

            cpu_split(ours, PostgresSaver(conn), replay_savers, turns)


def _server_cpu() -> float | None:
    """CPU seconds used so far by the local PostgreSQL server's processes (``None`` when none
    is visible in ``/proc``: another machine, or another OS)."""
    total, seen = 0, False
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name, _, rest = stat.partition("(")[2].rpartition(")")
        if name != "postgres":
            continue
        fields = rest.split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (stat fields 14 and 15)
        seen = True
    return total / os.sysconf("SC_CLK_TCK") if seen else None


class Rate:
    """Puts per second, with the CPU each put cost the client process and the local server."""

    def __init__(self, n: int, wall: float, client: float, server: float | None) -> None:
        self.per_s = n / wall
        self.wall_us = wall / n * 1e6
        self.client_us = client / n * 1e6
        self.server_us = None if server is None else server / n * 1e6

    def ceiling(self, cpus: int, threads: int) -> float | None:
        """The most ``threads`` threads can gain over this single-thread rate on ``cpus`` CPUs
        if each put keeps costing the same client and server CPU."""
        if self.server_us is None:
            return None
        return min(threads, cpus * self.wall_us / (self.client_us + self.server_us))


def _throughput(saver: BaseCheckpointSaver, workers: int, n: int) -> Rate:
    texts = [text(300, i) for i in range(64)]  # made once: the harness's CPU is not the saver's

    def one(i: int) -> None:
        cfg = {
            "configurable": {"thread_id": f"w{i % 64}-{uuid.uuid4().hex[:6]}", "checkpoint_ns": ""}
        }
        ckpt = empty_checkpoint()
        v = saver.get_next_version(None, None)
        ckpt["channel_values"] = {"messages": [texts[i % 64]] * 20}
        ckpt["channel_versions"] = {"messages": v}
        saver.put(cfg, ckpt, {"source": "loop", "step": i}, {"messages": v})

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(min(n, 50))))  # warm the pool
        s0, c0, t0 = _server_cpu(), time.process_time(), time.perf_counter()
        list(pool.map(one, range(n)))
        wall, client, s1 = time.perf_counter() - t0, time.process_time() - c0, _server_cpu()
    return Rate(n, wall, client, None if s0 is None or s1 is None else s1 - s0)


def _scaling(name: str, one: Rate, eight: Rate, target: str, bound_target: str = "") -> None:
    print(
        f"  {name}1 thread {one.per_s:8.0f}/s   8 threads {eight.per_s:8.0f}/s   "
        f"scaling {eight.per_s / one.per_s:.2f}x  {target}".rstrip()
    )
    cpus = os.cpu_count() or 1
    cap = one.ceiling(cpus, 8)
    if cap is not None and one.server_us is not None and eight.server_us is not None:
        print(
            f"          CPU per put, client + server: 1 thread {one.client_us:.0f} + "
            f"{one.server_us:.0f} us in {one.wall_us:.0f} us; 8 threads {eight.client_us:.0f} + "
            f"{eight.server_us:.0f} us. At that cost {cpus} CPUs allow at most {cap:.2f}x"
        )
        if bound_target:
            got = eight.per_s / one.per_s / cap
            print(f"          scaling / that bound: {got:.2f}x  (target {bound_target})")
    else:
        print(
            f"          CPU per put, client: 1 thread {one.client_us:.0f} us in {one.wall_us:.0f} us"
        )


def pg_pool(n: int) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg_pool import ConnectionPool

    print(f"\n== 4. pooled PostgreSQL puts/s, 1 vs 8 threads ({n} puts, {os.cpu_count()} CPUs) ==")
    with pg_schemas(2) as (s_ours, s_anchor):
        ours = SQLSaver(PG_URL, schema=s_ours)
        ours.setup()
        o1, o8 = _throughput(ours, 1, n), _throughput(ours, 8, n)
        kwargs = {"autocommit": True, "prepare_threshold": 0}
        url = _pg_schema_url(s_anchor)
        with ConnectionPool(url, min_size=8, max_size=8, kwargs=kwargs, open=True) as pool:
            anchor = PostgresSaver(pool)
            anchor.setup()
            a1, a8 = _throughput(anchor, 1, n), _throughput(anchor, 8, n)
    _scaling("ours:   ", o1, o8, "", ">= 0.8x")
    _scaling("anchor: ", a1, a8, "")
    print(f"  ours / anchor at 8 threads: {o8.per_s / a8.per_s:.2f}x")


@contextmanager
def remote_postgres(delay_ms: float) -> Iterator[str]:
    """``PG_URL`` through a proxy process that delays each chunk by ``delay_ms`` each way, as a
    database on another machine would (see ``_latency_proxy.py``)."""
    import socket
    import subprocess

    from sqlalchemy.engine import make_url

    url = make_url(PG_URL)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_latency_proxy.py")
    args = [str(port), url.host or "127.0.0.1", str(url.port or 5432), str(delay_ms)]
    proc = subprocess.Popen([sys.executable, script, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield url.set(host="127.0.0.1", port=port).render_as_string(hide_password=False)
    finally:
        proc.terminate()
        proc.wait()


def pg_pool_remote(n: int, delay_ms: float = 1.0) -> None:
    """Section 4 with the database "on another machine": each thread then waits on the network
    for most of a put, and what limits the scaling is the saver's own locking (the anchor holds
    an instance lock around each operation) rather than these 2 CPUs."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg_pool import ConnectionPool

    print(
        f"\n== 4b. as 4, through a proxy adding {delay_ms:g} ms each way "
        f"(a database on another machine; {n} puts) =="
    )
    with pg_schemas(2) as (s_ours, s_anchor), remote_postgres(delay_ms) as remote:
        import psycopg

        rtt = []
        for target in (PG_URL, remote):
            with psycopg.connect(target, autocommit=True) as conn:
                rtt.append(median_time(lambda c=conn: c.execute("SELECT 1").fetchone(), 50))
        print(
            f"  SELECT 1 round trip: {rtt[1] * 1e3:.2f} ms through the proxy, {rtt[0] * 1e3:.2f} direct"
        )
        ours = SQLSaver(remote, schema=s_ours)
        ours.setup()
        o1, o8 = _throughput(ours, 1, n), _throughput(ours, 8, n)
        kwargs = {"autocommit": True, "prepare_threshold": 0}
        sep = "&" if "?" in remote else "?"
        url = f"{remote}{sep}options=-csearch_path%3D{s_anchor}"
        with ConnectionPool(url, min_size=8, max_size=8, kwargs=kwargs, open=True) as pool:
            anchor = PostgresSaver(pool)
            anchor.setup()
            a1, a8 = _throughput(anchor, 1, n), _throughput(anchor, 8, n)
        ours.db.dispose()
    _scaling("ours:   ", o1, o8, "(>= 3x)")
    _scaling("anchor: ", a1, a8, "")
    print(f"  ours / anchor at 8 threads: {o8.per_s / a8.per_s:.2f}x")


class ByReference(BaseCheckpointSaver):
    """LangGraph's own share of a turn: a saver that keeps the graph's objects as they are (no
    serialization, no copies but the lists' spines), for one thread in one namespace. A turn on
    it is LangGraph's work plus almost nothing, so its growth over a long thread is LangGraph's
    own (``add_messages`` indexes every message of the state on each call). It keeps only the
    latest checkpoint: all of them would be a heap of millions of references by turn 1,000,
    and the collector's passes over it would slow the other graph too."""

    def __init__(self) -> None:
        super().__init__()
        self.latest: tuple[str, Any, Any, str | None] | None = None
        self.writes: dict[str, list[tuple[str, str, Any]]] = {}

    def _config(self, thread: str, checkpoint_id: str) -> Any:
        return {
            "configurable": {
                "thread_id": thread,
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint_id,
            }
        }

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        if self.latest is None:
            return None
        cid, checkpoint, metadata, parent = self.latest
        thread = config["configurable"]["thread_id"]
        return CheckpointTuple(
            self._config(thread, cid),
            checkpoint,
            metadata,
            self._config(thread, parent) if parent else None,
            self.writes.get(cid, []),
        )

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        values = {
            k: list(v) if isinstance(v, list) else v
            for k, v in checkpoint["channel_values"].items()
        }
        kept = {**checkpoint, "channel_values": values}
        parent = config["configurable"].get("checkpoint_id")
        self.latest = (checkpoint["id"], kept, metadata, parent)
        self.writes = {cid: w for cid, w in self.writes.items() if cid == checkpoint["id"]}
        return self._config(config["configurable"]["thread_id"], checkpoint["id"])

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        cid = config["configurable"]["checkpoint_id"]
        self.writes.setdefault(cid, []).extend((task_id, c, v) for c, v in writes)

    def get_next_version(self, current: Any, channel: Any) -> int:
        return (current or 0) + 1


def long_thread(turns: int, tmp: str) -> None:
    print(f"\n== 5. one {turns}-turn thread, SQLite file: growth every {turns // 10} turns ==")
    path = os.path.join(tmp, "long.db")
    saver = SQLSaver(path)
    saver.setup()
    ours, alone = chat_graph(saver), chat_graph(ByReference())
    timed = Timed(saver)
    cfg = {"configurable": {"thread_id": "long"}}
    step = turns // 10
    marks: list[tuple[int, int]] = []
    per_turn: list[list[float]] = []
    turn_ms: list[tuple[float, float]] = []
    for i in range(turns):  # the two graphs turn by turn: the machine's noise hits both alike
        msg = {"messages": [HumanMessage(content=text(180, i))]}
        start = len(timed.calls)
        t0 = time.perf_counter()
        ours.invoke(msg, cfg, durability="sync")
        t1 = time.perf_counter()
        alone.invoke(msg, cfg, durability="sync")
        turn_ms.append(((t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3))
        per_turn.append(timed.calls[start:])
        if (i + 1) % step == 0:
            marks.append((i + 1, pages_in_use(path)))
    prev = 0
    print(
        f"  {'turns':>6} {'size MB':>9} {'+MB/block':>10} {'put p50 ms':>11} {'turn ms':>8}"
        f" {'LangGraph alone':>16} {'ratio':>6}"
    )
    blocks: list[tuple[float, float, float, float]] = []
    for i, size in marks:
        put = statistics.median(x for t in per_turn[i - step : i] for x in t)
        mine = statistics.median(t[0] for t in turn_ms[i - step : i])
        own = statistics.median(t[1] for t in turn_ms[i - step : i])
        # per turn, as the two ran back to back: a slower minute of the machine cancels out
        ratio = statistics.median(t[0] / t[1] for t in turn_ms[i - step : i])
        blocks.append((put, mine, own, ratio))
        print(
            f"  {i:>6} {size / 1e6:9.3f} {(size - prev) / 1e6:10.3f} {put * 1e3:11.3f}"
            f" {mine:8.2f} {own:16.2f} {ratio:6.2f}"
        )
        prev = size
    first = marks[1][1] - marks[0][1]
    last = marks[-1][1] - marks[-2][1]
    print(f"  size added by the last block / the second block: {last / first:.2f}x (linear: ~1x)")
    growth = [b[-1] / b[1] for b in zip(*blocks, strict=True)]
    print(f"  put p50 last block / second block: {growth[0]:.2f}x (flat: ~1x)")
    print(
        f"  turn p50 last block / second block: {growth[1]:.2f}x, LangGraph alone {growth[2]:.2f}x"
        f" (the machine's speed drifts too); turn / LangGraph alone, same turn:"
        f" {growth[3]:.2f}x (flat: ~1x)"
    )
    half = dict(marks)[turns // 2]
    print(
        f"  size at {turns} turns / at {turns // 2}: {marks[-1][1] / half:.2f}x (linear: 2x, quadratic: 4x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick", action="store_true", help="short run (50 turns, 200-turn long thread)"
    )
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL scenarios")
    ap.add_argument(
        "--sections",
        default="1,1b,2,2b,3,4,4b,5",
        help="comma-separated sections to run (default: all)",
    )
    args = ap.parse_args()
    only = set(args.sections.split(","))
    turns = 50 if args.quick else 200
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; turns={turns}")
    n = 300 if args.quick else 2000
    with tempfile.TemporaryDirectory() as tmp:
        for name, run, pg in (
            ("1", lambda: sqlite_chat(turns, tmp), False),
            ("1b", lambda: sqlite_scalars(turns, tmp), False),
            ("2", lambda: tiny_put(n, tmp), False),
            ("2b", lambda: sqlite_async(turns, n, tmp), False),
            ("3", lambda: pg_chat(turns), True),
            ("4", lambda: pg_pool(400 if args.quick else 2000), True),
            ("4b", lambda: pg_pool_remote(200 if args.quick else 1000), True),
            ("5", lambda: long_thread(200 if args.quick else 1000, tmp), False),
        ):
            if name in only and not (pg and args.no_postgres):
                run()


if __name__ == "__main__":
    main()
