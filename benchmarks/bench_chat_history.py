"""Chat history: langmem-sqlite against langchain-community's ``SQLChatMessageHistory``.

Both run in the same process, on SQLite files in one temporary directory, with the same
realistic messages (alternating ~180-char human and ~300-char AI messages with metadata and
ids). Each figure is a median of several repetitions; the final table prints every target with
PASS/FAIL.

    python benchmarks/bench_chat_history.py           # full run (a few minutes)
    python benchmarks/bench_chat_history.py --quick   # shorter run for CI (table up to 30k rows)

The anchor is used as its users use it: ``SQLChatMessageHistory(session_id, connection=engine)``
on a shared ``create_engine("sqlite:///...")`` (default SQLAlchemy/pysqlite settings). Ours is
used through its public API: ``SQLChatMessageHistory(session_id, connection=url)`` and
``session_history_factory(url, window=20)``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    Result,
    compare_ms,
    environment,
    fmt_ms,
    median_ms,
    print_table,
    ratio_result,
    realistic_messages,
    time_once_ms,
    write_json,
)
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, message_to_dict
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from langmem_sqlite import SQLChatMessageHistory, get_database, session_history_factory

# After the imports: langchain-core installs its own filter for its deprecation warnings.
warnings.filterwarnings("ignore", category=DeprecationWarning)  # RunnableWithMessageHistory

with warnings.catch_warnings():  # langchain-community prints a sunset notice on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.chat_message_histories import (
        SQLChatMessageHistory as AnchorHistory,
    )

SESSION_SIZE = 10_000
BATCH = 100
WINDOW = 20
SECTIONS = ("writes", "reads", "growth", "rwmh", "async")


class Bench:
    """Holds the temp directory, the run's settings and the collected results."""

    def __init__(self, root: Path, quick: bool) -> None:
        self.root = root
        self.quick = quick
        self.results: list[Result] = []
        self.details: dict[str, Any] = {}
        self.anchor_engines: list[Engine] = []
        self.our_urls: list[str] = []
        self.messages = realistic_messages(SESSION_SIZE)

    # -- databases ---------------------------------------------------------------------------

    def our_url(self, name: str) -> str:
        url = f"sqlite:///{self.root / f'ours_{name}.db'}"
        self.our_urls.append(url)
        return url

    def anchor_engine(self, name: str, tuned: bool = False) -> Engine:
        """The anchor's engine as its users create it; ``tuned`` adds the SQLite settings this
        package applies (WAL, ``synchronous=NORMAL``), to separate code from settings."""
        engine = create_engine(f"sqlite:///{self.root / f'anchor_{name}.db'}")
        if tuned:
            event.listen(engine, "connect", _wal_normal)
        self.anchor_engines.append(engine)
        return engine

    def close(self) -> None:
        for url in self.our_urls:
            get_database(url).dispose()
        for engine in self.anchor_engines:
            engine.dispose()

    def reps(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def add(self, result: Result) -> None:
        self.results.append(result)
        print(
            f"  -> {result.metric}: ours {result.ours}, anchor {result.anchor}, "
            f"{result.ratio}, target {result.target}: {'PASS' if result.passed else 'FAIL'}",
            flush=True,
        )


def _wal_normal(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.execute("PRAGMA journal_mode = WAL")
    dbapi_conn.execute("PRAGMA synchronous = NORMAL")


def _batches(msgs: list[BaseMessage], size: int) -> list[list[BaseMessage]]:
    return [msgs[i : i + size] for i in range(0, len(msgs), size)]


# -- writes ------------------------------------------------------------------------------------


def bench_batch_add(b: Bench) -> tuple[str, Engine]:
    """Add 10,000 messages in batches of 100, into a fresh database per repetition.

    Returns the URL and engine of the first repetition: its 10,000-message session ``big`` is
    what the read benchmarks use.
    """
    print(f"\n[writes] add {SESSION_SIZE:,} messages in batches of {BATCH}", flush=True)
    batches = _batches(b.messages, BATCH)
    ours_t, anchor_t, tuned_t = [], [], []
    first: tuple[str, Engine] | None = None
    for rep in range(b.reps(5, 3)):
        url, engine = b.our_url(f"w{rep}"), b.anchor_engine(f"w{rep}")
        ours = SQLChatMessageHistory("big", connection=url)
        ours.store.count_messages("warm-up")  # creates the schema outside the timing
        anchor = AnchorHistory(session_id="big", connection=engine)  # creates its table
        tuned = AnchorHistory(session_id="big", connection=b.anchor_engine(f"wt{rep}", True))

        def run(h: Any) -> None:
            for batch in batches:
                h.add_messages(batch)

        ours_t.append(time_once_ms(lambda h=ours: run(h)))
        anchor_t.append(time_once_ms(lambda h=anchor: run(h)))
        tuned_t.append(time_once_ms(lambda h=tuned: run(h)))
        print(
            f"  rep {rep}: ours {fmt_ms(ours_t[-1])}, anchor {fmt_ms(anchor_t[-1])} "
            f"(ratio {ours_t[-1] / anchor_t[-1]:.2f}); anchor with WAL+NORMAL "
            f"{fmt_ms(tuned_t[-1])} (ratio {ours_t[-1] / tuned_t[-1]:.2f})",
            flush=True,
        )
        if first is None:
            first = (url, engine)
    assert first is not None
    ours_ms, anchor_ms = statistics.median(ours_t), statistics.median(anchor_t)
    b.details["batch_add_ms"] = {"ours": ours_t, "anchor": anchor_t, "anchor_wal": tuned_t}
    _info_tuned(ours_ms, statistics.median(tuned_t))
    b.add(ratio_result(f"add {SESSION_SIZE:,} msgs, batches of {BATCH}", ours_ms, anchor_ms, 0.6))
    return first


def _info_tuned(ours_ms: float, tuned_ms: float) -> None:
    print(
        f"  (for information, code path only: ours / anchor given WAL+synchronous=NORMAL = "
        f"{fmt_ms(ours_ms)} / {fmt_ms(tuned_ms)} = {ours_ms / tuned_ms:.2f}x)"
    )


def bench_single_add(b: Bench) -> None:
    """``add_message`` one message per transaction, per-message time."""
    n = b.reps(500, 100)
    print(f"\n[writes] add_message x {n} (one transaction each)", flush=True)
    url, engine = b.our_url("single"), b.anchor_engine("single")
    msgs = b.messages[:n]
    tuned_engine = b.anchor_engine("single_t", True)
    ours_t, anchor_t, tuned_t = [], [], []
    for rep in range(-1, b.reps(5, 3)):  # rep -1 warms up (schema, pools, caches)
        ours = SQLChatMessageHistory(f"single{rep}", connection=url)
        anchor = AnchorHistory(session_id=f"single{rep}", connection=engine)
        tuned = AnchorHistory(session_id=f"single{rep}", connection=tuned_engine)

        def run(h: Any) -> None:
            for m in msgs:
                h.add_message(m)

        o = time_once_ms(lambda h=ours: run(h)) / n
        a = time_once_ms(lambda h=anchor: run(h)) / n
        at = time_once_ms(lambda h=tuned: run(h)) / n
        if rep >= 0:
            ours_t.append(o)
            anchor_t.append(a)
            tuned_t.append(at)
            print(
                f"  rep {rep}: ours {fmt_ms(o)}/msg, anchor {fmt_ms(a)}/msg, "
                f"anchor with WAL+NORMAL {fmt_ms(at)}/msg",
                flush=True,
            )
    ours_ms, anchor_ms = statistics.median(ours_t), statistics.median(anchor_t)
    b.details["single_add_ms_per_msg"] = {"ours": ours_t, "anchor": anchor_t, "anchor_wal": tuned_t}
    _info_tuned(ours_ms, statistics.median(tuned_t))
    b.add(ratio_result("add_message, per message", ours_ms, anchor_ms, 0.5))


# -- reads -------------------------------------------------------------------------------------


def _same(ours: list[BaseMessage], anchor: list[BaseMessage]) -> None:
    """Both sides must return the same messages (otherwise the timings mean nothing)."""
    if [message_to_dict(m) for m in ours] != [message_to_dict(m) for m in anchor]:
        raise AssertionError("ours and the anchor returned different messages")


def bench_reads(b: Bench, url: str, engine: Engine) -> None:
    """Last 20 and full read of the 10,000-message session ``big``."""
    print(f"\n[reads] session of {SESSION_SIZE:,} messages", flush=True)
    anchor = AnchorHistory(session_id="big", connection=engine)
    all_anchor = anchor.messages
    assert len(all_anchor) == SESSION_SIZE
    _same(SQLChatMessageHistory("big", connection=url).get_messages(), all_anchor)
    _same(SQLChatMessageHistory("big", connection=url).get_messages(limit=WINDOW), all_anchor[-20:])

    def ours_last() -> list[BaseMessage]:
        return SQLChatMessageHistory("big", connection=url).get_messages(limit=WINDOW)

    ours_ms, anchor_ms, ot, at = compare_ms(
        ours_last, lambda: anchor.messages[-WINDOW:], b.reps(50, 20), b.reps(7, 3)
    )
    b.details["last20_ms"] = {"ours": ot, "anchor": at}
    store = SQLChatMessageHistory("big", connection=url).store
    store_ms, _ = median_ms(lambda: store.get_messages("big", limit=WINDOW), b.reps(50, 20), 3)
    b.details["last20_store_ms"] = store_ms
    print(f"  (ConversationStore.get_messages(limit=20): {fmt_ms(store_ms)})")
    b.add(ratio_result(f"last {WINDOW} of {SESSION_SIZE:,}", ours_ms, anchor_ms, 0.01))

    ours_ms, anchor_ms, ot, at = compare_ms(
        lambda: SQLChatMessageHistory("big", connection=url).get_messages(),
        lambda: anchor.messages,
        b.reps(9, 3),
        b.reps(9, 3),
    )
    b.details["full_read_ms"] = {"ours": ot, "anchor": at}
    b.add(ratio_result(f"full read of {SESSION_SIZE:,}", ours_ms, anchor_ms, 0.5))


def _fill_anchor(engine: Engine, rows: list[tuple[str, str]]) -> None:
    """Bulk-insert rows in the anchor's own format straight into its table."""
    path = engine.url.database
    assert path is not None
    con = sqlite3.connect(path)
    with con:
        con.executemany("INSERT INTO message_store (session_id, message) VALUES (?, ?)", rows)
    con.close()


def bench_table_growth(b: Bench) -> None:
    """A 100-message session read while the table grows around it (other sessions)."""
    levels = [1_000, 10_000, 30_000] if b.quick else [1_000, 10_000, 100_000, 300_000]
    filler_size = 1_000
    print(f"\n[table growth] 100-message session, table of {levels} rows", flush=True)
    url, engine = b.our_url("scale"), b.anchor_engine("scale")
    ours_h = SQLChatMessageHistory("target", connection=url)
    ours_h.add_messages(b.messages[:100])
    anchor_h = AnchorHistory(session_id="target", connection=engine)
    anchor_h.add_messages(b.messages[:100])
    filler = b.messages[:filler_size]
    anchor_bodies = [json.dumps(message_to_dict(m)) for m in filler]
    store = ours_h.store
    rows, k = 100, 0
    per_level: dict[int, dict[str, float]] = {}
    for level in levels:
        t0 = time.perf_counter()
        while rows < level:
            n = min(filler_size, level - rows)
            store.add_messages(f"filler{k}", filler[:n])
            _fill_anchor(engine, [(f"filler{k}", body) for body in anchor_bodies[:n]])
            rows += n
            k += 1
        fill_s = time.perf_counter() - t0
        expected = b.messages[:100]
        _same(SQLChatMessageHistory("target", connection=url).get_messages(), expected)
        _same(anchor_h.messages, expected)
        ours_ms, anchor_ms, _, _ = compare_ms(
            lambda: SQLChatMessageHistory("target", connection=url).get_messages(),
            lambda: anchor_h.messages,
            b.reps(30, 15),
            b.reps(7, 5),
        )
        per_level[level] = {"ours": ours_ms, "anchor": anchor_ms}
        print(
            f"  {level:>7,} rows: ours {fmt_ms(ours_ms)}, anchor {fmt_ms(anchor_ms)} "
            f"(filled in {fill_s:.1f} s)",
            flush=True,
        )
    b.details["table_growth_ms"] = per_level
    top, low = levels[-1], levels[0]
    ours_ms, anchor_ms = per_level[top]["ours"], per_level[top]["anchor"]
    row = ratio_result(f"100-msg read, {top:,}-row table", ours_ms, anchor_ms, 1e9)
    row.target, row.passed = "<= 5 ms", ours_ms <= 5.0
    b.add(row)
    growth_ours = ours_ms / per_level[low]["ours"]
    growth_anchor = anchor_ms / per_level[low]["anchor"]
    b.add(
        Result(
            f"  growth {low:,} -> {top:,} rows",
            f"{growth_ours:.2f}x",
            f"{growth_anchor:.2f}x",
            "-",
            "<= 1.5x (flat)",
            growth_ours <= 1.5,
        )
    )


# -- RunnableWithMessageHistory -----------------------------------------------------------------


def _reply() -> AIMessage:
    return AIMessage(
        content=realistic_messages(2)[1].content,
        response_metadata={"model_name": "fake", "finish_reason": "stop"},
        usage_metadata={"input_tokens": 50, "output_tokens": 80, "total_tokens": 130},
    )


def bench_rwmh(b: Bench, url: str, engine: Engine) -> None:
    """Per-turn overhead of RunnableWithMessageHistory at 10,000 stored messages.

    Overhead = median turn time through RWMH minus the median time of the same model/chain
    called without history. Ours reads a last-20 window in SQL; the anchor reads everything.
    """
    print(f"\n[RunnableWithMessageHistory] session of {SESSION_SIZE:,}+ messages", flush=True)
    ours_factory = session_history_factory(url, window=WINDOW)

    def anchor_factory(session_id: str) -> AnchorHistory:
        return AnchorHistory(session_id=session_id, connection=engine)

    model = FakeMessagesListChatModel(responses=[_reply()])
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = prompt | model
    question = realistic_messages(1)[0].content
    cfg = {"configurable": {"session_id": "big"}}
    modes: dict[str, tuple[Callable[[Any], Any], Callable[[], Any]]] = {
        "list input": (
            lambda f: RunnableWithMessageHistory(model, f),
            lambda: [HumanMessage(question)],
        ),
        "dict input": (
            lambda f: RunnableWithMessageHistory(
                chain, f, input_messages_key="question", history_messages_key="history"
            ),
            lambda: {"question": question},
        ),
    }
    baselines = {
        "list input": lambda: model.invoke([HumanMessage(question)]),
        "dict input": lambda: chain.invoke({"question": question, "history": []}),
    }
    for mode, (wrap, make_input) in modes.items():
        new_input: Callable[[], Any] = make_input
        base_ms, _ = median_ms(baselines[mode], 30, warmup=5)
        ours_r, anchor_r = wrap(ours_factory), wrap(anchor_factory)
        before = (
            SQLChatMessageHistory("big", connection=url).store.count_messages("big"),
            len(anchor_factory("big").messages),
        )
        n_ours, n_anchor = b.reps(30, 10), b.reps(5, 2)
        ours_ms, anchor_ms, _, _ = compare_ms(
            lambda r=ours_r, i=new_input: r.invoke(i(), cfg),
            lambda r=anchor_r, i=new_input: r.invoke(i(), cfg),
            n_ours,
            n_anchor,
        )
        after = (
            SQLChatMessageHistory("big", connection=url).store.count_messages("big"),
            len(anchor_factory("big").messages),
        )
        if after != (before[0] + 2 * (n_ours + 1), before[1] + 2 * (n_anchor + 1)):
            raise AssertionError(f"RWMH {mode}: turns were not stored: {before} -> {after}")
        print(
            f"  {mode}: turn ours {fmt_ms(ours_ms)}, anchor {fmt_ms(anchor_ms)}, "
            f"model alone {fmt_ms(base_ms)}",
            flush=True,
        )
        b.details[f"rwmh_{mode}_turn_ms"] = {"ours": ours_ms, "anchor": anchor_ms, "base": base_ms}
        ours_over, anchor_over = max(ours_ms - base_ms, 1e-6), anchor_ms - base_ms
        b.add(
            ratio_result(
                f"RWMH overhead/turn, {mode} (window {WINDOW})", ours_over, anchor_over, 1 / 30
            )
        )


# -- async -------------------------------------------------------------------------------------


def bench_async(b: Bench) -> None:
    """The async methods: ``aadd_messages`` one message per call, then ``aget_messages`` of the
    whole session. The anchor in its async mode, on an aiosqlite ``AsyncEngine`` as its
    documentation shows; ours given the file's URL, as in the other sections."""
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    n = b.reps(400, 100)
    print(f"\n[async] aadd_messages x {n} (one message each), then aget_messages", flush=True)
    url = b.our_url("async")
    msgs = b.messages[:n]

    async def run() -> None:
        engine = create_async_engine(f"sqlite+aiosqlite:///{b.root / 'anchor_async.db'}")
        try:
            adds: dict[str, list[float]] = {"ours": [], "anchor": []}
            reads: dict[str, list[float]] = {"ours": [], "anchor": []}
            for rep in range(-1, b.reps(5, 3)):  # rep -1 warms up (schema, pools, threads)
                histories = {
                    "ours": SQLChatMessageHistory(f"async{rep}", connection=url),
                    "anchor": AnchorHistory(
                        session_id=f"async{rep}", connection=engine, async_mode=True
                    ),
                }
                for side, h in histories.items():  # one side after the other, per repetition
                    t0 = time.perf_counter()
                    for m in msgs:
                        await h.aadd_messages([m])
                    t1 = time.perf_counter()
                    got = await h.aget_messages()
                    t2 = time.perf_counter()
                    if len(got) != n:
                        raise AssertionError(f"{side}: {len(got)} messages read, {n} added")
                    if rep >= 0:
                        adds[side].append((t1 - t0) * 1000 / n)
                        reads[side].append((t2 - t1) * 1000)
            b.details["async_add_ms_per_msg"] = adds
            b.details["async_read_ms"] = reads
            add = {k: statistics.median(v) for k, v in adds.items()}
            read = {k: statistics.median(v) for k, v in reads.items()}
            b.add(ratio_result("aadd_messages, per message", add["ours"], add["anchor"], 0.5))
            b.add(ratio_result(f"aget_messages of {n}", read["ours"], read["anchor"], 0.5))
        finally:
            await engine.dispose()

    asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, smaller table")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary databases")
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 if a target fails"
    )
    parser.add_argument(
        "--only",
        metavar="SECTIONS",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)",
    )
    args = parser.parse_args(argv)
    sections = set(args.only.split(","))
    if not sections <= set(SECTIONS):
        parser.error(f"--only: unknown section(s) {sorted(sections - set(SECTIONS))}")

    env = environment()
    print("langmem-sqlite chat history vs langchain-community SQLChatMessageHistory (SQLite)")
    print("  " + ", ".join(f"{k} {v}" for k, v in env.items()))
    root = Path(tempfile.mkdtemp(prefix="langmem_bench_"))
    print(f"  databases in {root}{' (kept)' if args.keep else ''}")
    b = Bench(root, args.quick)
    t0 = time.perf_counter()
    try:
        url, engine = bench_batch_add(b)  # also builds the 10,000-message session
        if "writes" in sections:
            bench_single_add(b)
        else:  # the batch-add figure was only needed as setup
            b.results.clear()
        if "reads" in sections:
            bench_reads(b, url, engine)
        if "growth" in sections:
            bench_table_growth(b)
        if "rwmh" in sections:
            bench_rwmh(b, url, engine)
        if "async" in sections:
            bench_async(b)
    finally:
        b.close()
        if not args.keep:
            for p in root.iterdir():
                p.unlink()
            os.rmdir(root)
    print(f"\nResults ({'quick' if args.quick else 'full'} run, {time.perf_counter() - t0:.0f} s)")
    print_table(b.results)
    if args.json:
        write_json(args.json, b.results, {"details": b.details, "quick": args.quick})
    failed = [r.metric.strip() for r in b.results if not r.passed]
    print(f"\n{len(b.results) - len(failed)}/{len(b.results)} targets met")
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
