"""Many concurrent async calls: SQLStore runs a few of them at once (a semaphore around the
pool, see ``store/store.py``), so that a burst of ``asyncio.gather`` calls completes with
correct results and never exhausts the pool, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, PutOp

from langmem_sqlite import SQLStore

USERS = 100
PRELOADED = 1000


def _value(i: int) -> dict[str, Any]:
    return {"n": i, "tag": f"t{i % 7}", "nested": {"i": i}}


async def _preload(store: BaseStore) -> None:
    for start in range(0, PRELOADED, 250):
        await store.abatch(
            [
                PutOp(("burst", f"u{i % USERS}"), f"k{i}", _value(i))
                for i in range(start, start + 250)
            ]
        )


def _slot(i: int) -> int:
    return (i // 3) % 4000


async def _burst(store: BaseStore, n: int) -> tuple[float, list[Any]]:
    """``n`` concurrent calls, a third each of aget (preloaded keys), aput (new keys in other
    namespaces) and asearch (the preloaded namespaces, which no put of the burst touches)."""
    calls = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            calls.append(store.aget(("burst", f"u{i % USERS}"), f"k{i % PRELOADED}"))
        elif kind == 1:
            # keys written several times (AsyncPostgresStore fails a batch of more than 16,383
            # distinct puts: one statement of 4 parameters per put, at most 65,535)
            calls.append(store.aput(("written", f"w{i % 50}"), f"p{_slot(i)}", {"i": i}))
        else:
            calls.append(store.asearch(("burst", f"u{i % USERS}"), limit=10))
    t0 = time.perf_counter()
    results = await asyncio.gather(*calls)
    return time.perf_counter() - t0, results


async def _check(store: BaseStore, n: int, results: list[Any]) -> None:
    expected_search = {
        u: [(i.key, i.value) for i in await store.asearch(("burst", f"u{u}"), limit=10)]
        for u in range(USERS)
    }
    for i, result in enumerate(results):
        kind = i % 3
        if kind == 0:
            assert result is not None and result.key == f"k{i % PRELOADED}"
            assert result.namespace == ("burst", f"u{i % USERS}")
            assert result.value == _value(i % PRELOADED)
        elif kind == 1:
            assert result is None
        else:
            assert [(r.key, r.value) for r in result] == expected_search[i % USERS]
    keys = {(f"w{i % 50}", f"p{_slot(i)}") for i in range(1, n, 3)}
    written = 0
    for w in range(50):
        found = await store.asearch(("written", f"w{w}"), limit=n)
        for item in found:  # one of the values written to it (concurrent: any of them)
            i = item.value["i"]
            assert i % 3 == 1 and (f"w{i % 50}", f"p{_slot(i)}") == (f"w{w}", item.key)
        written += len(found)
    assert written == len(keys)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_60000_concurrent_calls_complete_correctly(
    db_url: str, prefix: str, backend: str
) -> None:
    """60,000 gathered calls: every result correct, no pool timeout."""
    n = 60_000
    store = SQLStore(db_url, table_prefix=prefix)
    await store.asetup()
    await _preload(store)
    _, results = await _burst(store, n)
    await _check(store, n, results)


async def test_burst_on_mariadb(db_url: str, prefix: str, backend: str) -> None:
    if backend != "mariadb":
        pytest.skip("the 60,000-call burst runs on SQLite and PostgreSQL")
    store = SQLStore(db_url, table_prefix=prefix)
    await store.asetup()
    await _preload(store)
    _, results = await _burst(store, 12_000)
    await _check(store, 12_000, results)


async def test_equal_reads_of_a_batch_are_each_callers_own(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    await store.asetup()
    await store.aput(("a",), "k", {"list": [1, {"x": 1}], "d": {"e": "f"}})
    searches = await asyncio.gather(*[store.asearch(("a",)) for _ in range(300)])
    gets = await asyncio.gather(*[store.aget(("a",), "k") for _ in range(300)])
    values = [s[0].value for s in searches] + [g.value for g in gets]  # type: ignore[union-attr]
    assert len({id(v) for v in values}) == len(values)
    values[0]["list"][1]["x"] = 99
    values[-1]["d"]["e"] = "changed"
    assert all(v == {"list": [1, {"x": 1}], "d": {"e": "f"}} for v in values[1:-1])
    item = await store.aget(("a",), "k")
    assert item is not None and item.value == {"list": [1, {"x": 1}], "d": {"e": "f"}}


class FailingEmbedding(Embeddings):
    """Embeds by length; fails for texts holding "boom"."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if any("boom" in t for t in texts):
            raise RuntimeError("embedding service refused 'boom'")
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [float(len(text)), 1.0]


async def test_a_failing_call_fails_alone(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix, index={"dims": 2, "embed": FailingEmbedding()})
    await store.asetup()
    texts = [f"text {i}" for i in range(400)]
    texts[123] = "boom"
    results = await asyncio.gather(
        *[store.aput(("e",), f"k{i}", {"text": t}) for i, t in enumerate(texts)],
        return_exceptions=True,
    )
    failed = [i for i, r in enumerate(results) if isinstance(r, Exception)]
    assert failed == [123], [repr(results[i]) for i in failed]
    assert "boom" in str(results[123])
    stored = await store.asearch(("e",), limit=1000)
    assert len(stored) == 399


async def test_cancelled_queued_calls_do_not_run(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    await store.asetup()
    tasks = [asyncio.ensure_future(store.aput(("c",), f"k{i}", {"i": i})) for i in range(400)]
    await asyncio.sleep(0)  # every call started: a few running, the rest queued
    for task in tasks[200:]:
        task.cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(r is None for r in done[:200])
    assert all(isinstance(r, asyncio.CancelledError) for r in done[200:])
    await asyncio.sleep(0.2)
    keys = {i.key for i in await store.asearch(("c",), limit=1000)}
    assert {f"k{i}" for i in range(200)} <= keys
    assert len(keys) < 400  # the cancelled calls still queued never ran
