"""Soak benchmark: N simulated chat users on loopback for a bounded time, SQLite and PostgreSQL.

Each user is a thread running chat turns back to back: read the last 20 messages of one of its
sessions, then append a human message and an AI reply. The same load runs against this package
and against the anchor it replaces (langchain-community's ``SQLChatMessageHistory``, reading the
session and keeping the last 20), one after the other on the same database server, and the
script prints turns per second, p50/p99 turn latency, error counts and the ratios.

    python benchmarks/bench_soak.py                 # 60 s per system and database (~4 min)
    python benchmarks/bench_soak.py --quick         # CI size: 5 s each
    python benchmarks/bench_soak.py --users 50 --seconds 120 --backends postgres
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, realistic_messages

from langmem_sqlite import ConversationStore, get_database
from langmem_sqlite.engine.schema import get_tables

with warnings.catch_warnings():  # langchain-community prints a sunset notice on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.chat_message_histories import (
        SQLChatMessageHistory as AnchorHistory,
    )

POSTGRES_URL = os.environ.get(
    "LANGMEM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
WINDOW = 20
SESSIONS_PER_USER = 3
# What the load is allowed to cost us relative to the anchor (reported, not enforced).
TARGET_RATIO = 1.0


@dataclass
class Stats:
    """Per-run figures: every turn's latency and every error's type."""

    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, ms: float | None, error: BaseException | None = None) -> None:
        with self.lock:
            if error is not None:
                name = type(error).__name__
                self.errors[name] = self.errors.get(name, 0) + 1
                self.first_error.setdefault(name, str(error).splitlines()[0][:300])
            elif ms is not None:
                self.latencies.append(ms)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)
        n = len(lat)
        pct = (lambda q: lat[min(n - 1, int(q * n))]) if n else (lambda q: float("nan"))
        return {
            "turns": n,
            "turns_per_s": n / self.seconds if self.seconds else 0.0,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "mean_ms": statistics.fmean(lat) if lat else float("nan"),
            "errors": sum(self.errors.values()),
            "error_types": dict(self.errors),
            "first_errors": dict(self.first_error),
            "max_ms": lat[-1] if lat else float("nan"),
        }


Turn = Callable[[str, int], None]


def _ours(url: str, prefix: str, pool: int | None) -> tuple[Turn, Callable[[], None]]:
    engine_args = None if pool is None else {"pool_size": pool, "max_overflow": pool}
    store = ConversationStore(url, table_prefix=prefix, engine_args=engine_args)
    store.count_messages("warmup")

    def turn(session: str, i: int) -> None:
        store.load_window(session, limit=WINDOW)
        store.add_messages(session, realistic_messages(2, start=i))

    def cleanup() -> None:
        get_tables(prefix).metadata.drop_all(store.db.sync_engine)

    return turn, cleanup


def _anchor(url: str, prefix: str, pool: int | None) -> tuple[Turn, Callable[[], None]]:
    engine = sa.create_engine(get_database(url).url, pool_size=pool or 5, max_overflow=pool or 10)
    table = f"{prefix}anchor"
    AnchorHistory(session_id="warmup", connection=engine, table_name=table).messages  # noqa: B018

    def turn(session: str, i: int) -> None:
        history = AnchorHistory(session_id=session, connection=engine, table_name=table)
        _ = history.messages[-WINDOW:]
        history.add_messages(realistic_messages(2, start=i))

    def cleanup() -> None:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()

    return turn, cleanup


def soak(turn: Turn, users: int, seconds: float) -> Stats:
    """Run ``users`` threads doing turns for ``seconds``; return the figures."""
    stats = Stats()
    stop = threading.Event()

    def user(u: int) -> None:
        i = 0
        while not stop.is_set():
            session = f"user{u}-s{i % SESSIONS_PER_USER}"
            start = time.perf_counter()
            try:
                turn(session, i)
            except Exception as e:  # counted, and the user carries on
                stats.record(None, e)
            else:
                stats.record((time.perf_counter() - start) * 1000)
            i += 2

    threads = [threading.Thread(target=user, args=(u,), daemon=True) for u in range(users)]
    begin = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(60)
    stats.seconds = time.perf_counter() - begin
    return stats


def _url(backend: str, root: Path, side: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{root}/{side}.db"
    return POSTGRES_URL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 s per run (CI size)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per run (60)")
    parser.add_argument("--users", type=int, default=20, help="simulated users (20)")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite,postgres")
    parser.add_argument("--no-anchor", action="store_true", help="only this package")
    parser.add_argument(
        "--pool-size",
        type=int,
        default=None,
        help="pool_size and max_overflow of both sides (default: each side's own default)",
    )
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (5.0 if args.quick else 60.0)
    print(f"# soak: {args.users} users, {seconds:.0f} s per run; {environment()}")
    header = (
        f"{'database':<10} {'system':<10} {'turns/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}"
    )
    print(header)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for backend in args.backends.split(","):
            rows: dict[str, dict[str, Any]] = {}
            sides = [("ours", _ours)] + ([] if args.no_anchor else [("anchor", _anchor)])
            for side, make in sides:
                prefix = f"soak{uuid.uuid4().hex[:6]}_"
                turn, cleanup = make(_url(backend, root, side), prefix, args.pool_size)
                try:
                    s = soak(turn, args.users, seconds).summary()
                finally:
                    cleanup()
                rows[side] = s
                errs = f"{s['errors']}" + (f" {s['error_types']}" if s["errors"] else "")
                print(
                    f"{backend:<10} {side:<10} {s['turns_per_s']:>9.1f} {s['p50_ms']:>8.2f} "
                    f"{s['p99_ms']:>8.2f} {errs:>7}",
                    flush=True,
                )
                for name, text in s["first_errors"].items():
                    print(f"    first {name}: {text}")
                failed |= side == "ours" and (s["errors"] > 0 or s["turns"] == 0)
            if "anchor" in rows:
                ours, anchor = rows["ours"], rows["anchor"]
                print(
                    f"{backend:<10} {'ratio':<10} throughput {ours['turns_per_s'] / max(anchor['turns_per_s'], 1e-9):.2f}x, "
                    f"p50 {ours['p50_ms'] / anchor['p50_ms']:.2f}x, "
                    f"p99 {ours['p99_ms'] / anchor['p99_ms']:.2f}x (ours / anchor; latency < {TARGET_RATIO} is better)"
                )
    if failed:
        print("FAILED: errors reached the simulated users, or no turn completed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
