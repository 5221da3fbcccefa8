"""Shared helpers for the benchmark scripts: timing, realistic messages, result tables.

Not part of the package; imported by the scripts in this folder (run them from anywhere:
``python benchmarks/bench_chat_history.py``).
"""

from __future__ import annotations

import gc
import json
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

__all__ = [
    "Result",
    "compare_ms",
    "environment",
    "fmt_ms",
    "median_ms",
    "print_table",
    "ratio_result",
    "realistic_messages",
    "time_once_ms",
    "write_json",
]

_VOCABULARY = (
    "the quick brown fox jumps over a lazy dog while planning retrieval augmented "
    "generation pipelines with vector stores token budgets and durable chat memory in sql "
    "databases such as sqlite postgresql and mariadb for many users and sessions"
)
_WORDS = _VOCABULARY.split(" ")


def _text(n_chars: int, offset: int) -> str:
    """About ``n_chars`` of varied English-like text (deterministic per ``offset``)."""
    out: list[str] = []
    size = 0
    i = offset
    while size < n_chars:
        w = _WORDS[(i * 7 + offset) % len(_WORDS)]
        out.append(w)
        size += len(w) + 1
        i += 1
    return " ".join(out)[:n_chars]


def realistic_messages(n: int, start: int = 0) -> list[BaseMessage]:
    """``n`` alternating messages like a real chat: a ~180-char ``HumanMessage`` then a ~300-char
    ``AIMessage`` carrying ``response_metadata``, ``usage_metadata`` and an id (both have ids).

    The serialized row is about 460 bytes on average, like the research measurements.
    """
    msgs: list[BaseMessage] = []
    for i in range(start, start + n):
        if i % 2 == 0:
            msgs.append(HumanMessage(content=_text(180, i), id=str(uuid.UUID(int=i + 1))))
        else:
            msgs.append(
                AIMessage(
                    content=_text(300, i),
                    id=f"run-{uuid.UUID(int=(1 << 64) + i)}-0",
                    response_metadata={
                        "model_name": "gpt-4o-mini-2024-07-18",
                        "finish_reason": "stop",
                        "system_fingerprint": "fp_0ba0d124f1",
                    },
                    usage_metadata={
                        "input_tokens": 40 + i % 50,
                        "output_tokens": 70 + i % 30,
                        "total_tokens": 110 + i % 80,
                    },
                )
            )
    return msgs


def median_ms(
    fn: Callable[[], Any], repeat: int, warmup: int = 1, setup: Callable[[], Any] | None = None
) -> tuple[float, list[float]]:
    """Median wall time of ``fn()`` in milliseconds over ``repeat`` runs (after ``warmup``).

    ``setup()`` (untimed) runs before each call. Returns ``(median, all_times)``.
    """
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    times: list[float] = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), times


def compare_ms(
    ours: Callable[[], Any],
    anchor: Callable[[], Any],
    repeat_ours: int,
    repeat_anchor: int,
    warmup: int = 1,
) -> tuple[float, float, list[float], list[float]]:
    """Median times (ms) of ``ours()`` and ``anchor()``, their runs interleaved so that a change
    in machine load during the measurement hits both sides alike.

    Returns ``(ours_median, anchor_median, ours_times, anchor_times)``.
    """
    for _ in range(warmup):
        ours()
        anchor()
    ours_t: list[float] = []
    anchor_t: list[float] = []
    for i in range(max(repeat_ours, repeat_anchor)):
        if i < repeat_ours:
            ours_t.append(time_once_ms(ours))
        if i < repeat_anchor:
            anchor_t.append(time_once_ms(anchor))
    return statistics.median(ours_t), statistics.median(anchor_t), ours_t, anchor_t


def time_once_ms(fn: Callable[[], Any]) -> float:
    """Wall time of one ``fn()`` call in milliseconds."""
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def fmt_ms(ms: float) -> str:
    """A duration for humans: ``0.042 ms``, ``3.21 ms``, ``412 ms``, ``1.24 s``."""
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 1:
        return f"{ms:.2f} ms"
    return f"{ms:.3f} ms"


@dataclass
class Result:
    """One row of the final table.

    ``ratio`` is ours / anchor (lower is better) unless the row is an absolute target, whose
    ``check`` is then applied to ``ours``. ``passed`` says whether the target was met.
    """

    metric: str
    ours: str
    anchor: str
    ratio: str
    target: str
    passed: bool
    ours_ms: float | None = None
    anchor_ms: float | None = None


def ratio_result(metric: str, ours_ms: float, anchor_ms: float, max_ratio: float) -> Result:
    """A row whose target is ``ours / anchor <= max_ratio`` (times in ms)."""
    r = ours_ms / anchor_ms
    if max_ratio < 1 and float(1 / max_ratio).is_integer() and 1 / max_ratio > 2:
        target = f">= {1 / max_ratio:g}x faster"
    else:
        target = f"<= {max_ratio:g}x"
    return Result(
        metric,
        fmt_ms(ours_ms),
        fmt_ms(anchor_ms),
        f"{r:.4f}x ({anchor_ms / ours_ms:.1f}x faster)",
        target,
        r <= max_ratio,
        ours_ms,
        anchor_ms,
    )


def print_table(results: Iterable[Result]) -> None:
    """Print results as an aligned text table."""
    rows = [("metric", "ours", "anchor", "ratio ours/anchor", "target", "result")]
    rows += [
        (r.metric, r.ours, r.anchor, r.ratio, r.target, "PASS" if r.passed else "FAIL")
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    line = "  ".join("-" * w for w in widths)
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print(line)


def environment() -> dict[str, str]:
    """Versions that matter for the numbers."""
    import sqlite3

    import langchain_core
    import sqlalchemy

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "sqlalchemy": sqlalchemy.__version__,
        "langchain_core": langchain_core.__version__,
    }


def write_json(path: str, results: list[Result], extra: dict[str, Any]) -> None:
    """Write the results (and ``extra`` details) as JSON, for CI artifacts."""
    data = {"environment": environment(), "results": [asdict(r) for r in results], **extra}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
