"""SQLStore TTL: expiry, refresh on read, sweeping (on demand and in the background).

The package's clock (``langmem_sqlite.clock.now_us``) is moved forward by the tests; the
databases are real.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

import langmem_sqlite.clock as package_clock
from langmem_sqlite import SQLStore
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables

MINUTE = 60_000_000


class Clock:
    def __init__(self) -> None:
        self.now = time.time_ns() // 1000

    def __call__(self) -> int:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += int(minutes * MINUTE)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(package_clock, "now_us", c)
    return c


def _count(db_url: str, prefix: str, table: str) -> int:
    t = getattr(get_tables(prefix), table)
    with get_database(db_url).sync_engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())


def test_items_expire_and_reads_refresh_them(db_url: str, prefix: str, clock: Clock) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    store.put(("t",), "short", {"v": 1}, ttl=10)
    store.put(("t",), "forever", {"v": 2})
    clock.advance(8)
    assert store.get(("t",), "short") is not None  # refreshed: now lives until minute 18
    clock.advance(8)
    assert store.get(("t",), "short", refresh_ttl=False) is not None
    clock.advance(3)  # minute 19: lapsed
    assert store.get(("t",), "short") is None
    assert [i.key for i in store.search(("t",))] == ["forever"]
    assert store.list_namespaces() == [("t",)]
    assert _count(db_url, prefix, "store_items") == 2  # not swept yet
    assert store.sweep_ttl() == 1
    assert _count(db_url, prefix, "store_items") == 1
    clock.advance(10_000)
    assert store.get(("t",), "forever") is not None


def test_search_refreshes_and_refresh_can_be_disabled(
    db_url: str, prefix: str, clock: Clock
) -> None:
    store = SQLStore(db_url, table_prefix=prefix, ttl={"refresh_on_read": False})
    store.put(("t",), "a", {"v": 1}, ttl=10)
    store.put(("t",), "b", {"v": 2}, ttl=10)
    clock.advance(6)
    assert len(store.search(("t",), filter={"v": 1})) == 1  # default: no refresh
    assert len(store.search(("t",), filter={"v": 2}, refresh_ttl=True)) == 1
    clock.advance(6)
    assert [i.key for i in store.search(("t",))] == ["b"]


def test_default_ttl_and_namespaces_of_expired_items(
    db_url: str, prefix: str, clock: Clock
) -> None:
    store = SQLStore(db_url, table_prefix=prefix, ttl={"default_ttl": 1})
    store.put(("gone",), "k", {"v": 1})
    store.put(("kept",), "k", {"v": 1}, ttl=None)
    clock.advance(2)
    assert store.list_namespaces() == [("kept",)]
    visible = SQLStore(db_url, table_prefix=prefix, ttl={"omit_expired": False})
    assert visible.get(("gone",), "k") is not None  # still stored until swept


async def test_async_ttl_and_sweep_removes_vectors(db_url: str, prefix: str, clock: Clock) -> None:
    store = SQLStore(
        db_url, table_prefix=prefix, index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8)}
    )
    await store.aput(("t",), "k", {"text": "hello"}, ttl=1)
    await store.aput(("t",), "j", {"text": "world"})
    assert _count(db_url, prefix, "store_vectors") == 2
    clock.advance(2)
    assert await store.aget(("t",), "k") is None
    assert [i.key for i in await store.asearch(("t",), query="hello")] == ["j"]
    assert await store.asweep_ttl() == 1
    assert _count(db_url, prefix, "store_vectors") == 1


def test_background_sweeper(db_url: str, prefix: str, clock: Clock) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    store.put(("t",), "k", {"v": 1}, ttl=1)
    clock.advance(2)
    store.start_ttl_sweeper(sweep_interval_minutes=0.001)  # every 60 ms
    deadline = time.monotonic() + 20
    while _count(db_url, prefix, "store_items") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.stop_ttl_sweeper(timeout=10)
    assert _count(db_url, prefix, "store_items") == 0


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"ttl": {"default_ttl": -1}}, ValueError),
        ({"ttl": {"default_tll": 1}}, ValueError),
        ({"ttl": {"refresh_on_read": "yes"}}, TypeError),
        ({"ttl": 5}, TypeError),
        ({"pgvector": "auto"}, TypeError),
    ],
)
def test_bad_configs(db_url: str, kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        SQLStore(db_url, **kwargs)


def test_bad_ttls(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    for bad, error in ((0, ValueError), (float("inf"), ValueError), ("1", TypeError)):
        with pytest.raises(error, match="ttl"):
            store.batch([PutOp(("t",), "k", {"v": 1}, ttl=bad)])  # type: ignore[arg-type]
    assert store.batch([GetOp(("t",), "k")]) == [None]


async def test_async_calls_match_abatch(db_url: str, prefix: str, clock: Clock) -> None:
    """aget, aput and asearch: same answers as SearchOp/GetOp through abatch, same refusals,
    TTLs refreshed."""
    store = SQLStore(db_url, table_prefix=prefix, ttl={"default_ttl": 10})
    await store.abatch([PutOp(("a",), "seed", {"i": -1})])
    for i in range(12):
        await store.aput(("a", f"g{i % 2}"), f"k{i}", {"i": i, "even": i % 2 == 0})
    for prefix_, flt in [(("a",), None), (("a", "g1"), {"i": {"$gt": 4}}), ((), {"even": True})]:
        want = (await store.abatch([SearchOp(prefix_, flt, 5, 1)]))[0]
        got = await store.asearch(prefix_, filter=flt, limit=5, offset=1)
        assert [(i.key, i.value) for i in got] == [(i.key, i.value) for i in want]
    assert (await store.aget(("a", "g0"), "k4")).value == {"i": 4, "even": True}  # type: ignore[union-attr]
    assert await store.aget(("a", "g0"), "k5") is None
    clock.advance(8)
    assert await store.aget(("a", "g0"), "k0") is not None  # refreshed: 10 more minutes
    assert len(await store.asearch(("a", "g1"), limit=100)) == 6  # refreshed too
    clock.advance(8)
    assert await store.aget(("a", "g0"), "k0") is not None
    assert await store.aget(("a", "g0"), "k2") is None  # lapsed
    assert len(await store.asearch(("a", "g1"), limit=100)) == 6
    with pytest.raises(InvalidNamespaceError, match="langgraph"):
        await store.aput(("langgraph",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="period"):
        await store.aget(("a.b",), "k")
    with pytest.raises(ValueError, match="limit"):
        await store.asearch(("a",), limit=-1)
