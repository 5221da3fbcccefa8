"""SQLStore's numeric parameters on SQLite, PostgreSQL, MariaDB and PgBouncer: every value out
of range (huge, negative, NaN, an infinity, a bool) is a ValueError naming the parameter and
its range, raised before anything is written; the edges of each range work."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import Embeddings
from langgraph.store.base import ListNamespacesOp, PutOp, SearchOp

from langmem_sqlite import SQLStore
from langmem_sqlite.store.checks import PAGE_MAX, SWEEP_MAX_MINUTES, TTL_MAX_MINUTES
from langmem_sqlite.validation import INT64_MAX


class Ones(Embeddings):
    """Two-dimensional vectors, alike for every text."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, float(len(t) % 3)] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


NS = ("numbers", "u1")


def _bad_ints(low: int, high: int) -> st.SearchStrategy[Any]:
    """Values an int parameter from ``low`` to ``high`` refuses (every float is refused)."""
    return st.one_of(
        st.integers(max_value=low - 1),
        st.integers(min_value=high + 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([high + 1, 2**63, 2**64, 10**30, -(2**63) - 1, 1e15, math.nan, math.inf]),
        st.booleans(),
    )


def _bad_minutes(high: int) -> st.SearchStrategy[Any]:
    """Values a number of minutes above 0 and at most ``high`` refuses."""
    return st.one_of(
        st.integers(max_value=0),
        st.integers(min_value=high + 1),
        st.floats(max_value=0.0),
        st.floats(min_value=high, exclude_min=True),
        st.sampled_from([math.nan, math.inf, -math.inf, 1e15 * high, 2**64]),
        st.booleans(),
    )


def _bad_seconds() -> st.SearchStrategy[Any]:
    high = threading.TIMEOUT_MAX
    return st.one_of(
        st.floats(max_value=-1e-9),
        st.integers(max_value=-1),
        st.floats(min_value=high * 2),
        st.sampled_from([math.nan, math.inf, -math.inf, 10**30]),
        st.booleans(),
    )


Call = Callable[[SQLStore, Any], Any]


def _sync_and_async(sync: Call, async_: Callable[[SQLStore, Any], Awaitable[Any]]) -> list[Call]:
    return [sync, lambda store, v: asyncio.run(async_(store, v))]


# (parameter named in the error, values it refuses, calls passing it)
CASES: list[tuple[str, st.SearchStrategy[Any], list[Call]]] = [
    (
        "ttl",
        _bad_minutes(TTL_MAX_MINUTES),
        [
            *_sync_and_async(
                lambda s, v: s.put(NS, "new", {"v": 1}, ttl=v),
                lambda s, v: s.aput(NS, "new", {"v": 1}, ttl=v),
            ),
            *_sync_and_async(
                lambda s, v: s.batch([PutOp(NS, "ok", {"v": 2}), PutOp(NS, "new", {}, ttl=v)]),
                lambda s, v: s.abatch([PutOp(NS, "ok", {"v": 2}), PutOp(NS, "new", {}, ttl=v)]),
            ),
        ],
    ),
    (
        "limit",
        _bad_ints(0, PAGE_MAX),
        [
            *_sync_and_async(
                lambda s, v: s.search(NS, limit=v), lambda s, v: s.asearch(NS, limit=v)
            ),
            *_sync_and_async(
                lambda s, v: s.search(NS, query="q", filter={"v": 1}, limit=v),
                lambda s, v: s.asearch(NS, query="q", filter={"v": 1}, limit=v),
            ),
            *_sync_and_async(
                lambda s, v: s.list_namespaces(limit=v), lambda s, v: s.alist_namespaces(limit=v)
            ),
            *_sync_and_async(
                lambda s, v: s.batch([PutOp(NS, "new", {}), SearchOp(NS, limit=v)]),
                lambda s, v: s.abatch([PutOp(NS, "new", {}), SearchOp(NS, limit=v)]),
            ),
            *_sync_and_async(
                lambda s, v: s.batch([PutOp(NS, "new", {}), ListNamespacesOp(limit=v)]),
                lambda s, v: s.abatch([PutOp(NS, "new", {}), ListNamespacesOp(limit=v)]),
            ),
        ],
    ),
    (
        "offset",
        _bad_ints(0, PAGE_MAX),
        [
            *_sync_and_async(
                lambda s, v: s.search(NS, offset=v), lambda s, v: s.asearch(NS, offset=v)
            ),
            *_sync_and_async(
                lambda s, v: s.list_namespaces(offset=v),
                lambda s, v: s.alist_namespaces(offset=v),
            ),
            *_sync_and_async(
                lambda s, v: s.batch([PutOp(NS, "new", {}), SearchOp(NS, offset=v)]),
                lambda s, v: s.abatch([PutOp(NS, "new", {}), SearchOp(NS, offset=v)]),
            ),
            *_sync_and_async(
                lambda s, v: s.batch([PutOp(NS, "new", {}), ListNamespacesOp(offset=v)]),
                lambda s, v: s.abatch([PutOp(NS, "new", {}), ListNamespacesOp(offset=v)]),
            ),
        ],
    ),
    (
        "max_depth",
        _bad_ints(1, INT64_MAX),
        [
            *_sync_and_async(
                lambda s, v: s.list_namespaces(max_depth=v),
                lambda s, v: s.alist_namespaces(max_depth=v),
            ),
            *_sync_and_async(
                lambda s, v: s.batch([PutOp(NS, "new", {}), ListNamespacesOp(max_depth=v)]),
                lambda s, v: s.abatch([PutOp(NS, "new", {}), ListNamespacesOp(max_depth=v)]),
            ),
        ],
    ),
    (
        "sweep_interval_minutes",
        _bad_minutes(SWEEP_MAX_MINUTES),
        _sync_and_async(lambda s, v: s.start_ttl_sweeper(v), lambda s, v: s.astart_ttl_sweeper(v)),
    ),
    (
        "timeout",
        _bad_seconds(),
        _sync_and_async(
            lambda s, v: s.stop_ttl_sweeper(timeout=v),
            lambda s, v: s.astop_ttl_sweeper(timeout=v),
        ),
    ),
    (
        "ttl['default_ttl']",
        _bad_minutes(TTL_MAX_MINUTES),
        [lambda s, v: SQLStore(s.db, table_prefix=s.tables.prefix, ttl={"default_ttl": v})],
    ),
    (
        "ttl['sweep_interval_minutes']",
        _bad_minutes(SWEEP_MAX_MINUTES),
        [
            lambda s, v: SQLStore(
                s.db, table_prefix=s.tables.prefix, ttl={"sweep_interval_minutes": v}
            )
        ],
    ),
    (
        "index: 'dims'",
        _bad_ints(1, INT64_MAX),
        [
            lambda s, v: SQLStore(
                s.db, table_prefix=s.tables.prefix, index={"embed": Ones(), "dims": v}
            )
        ],
    ),
    *(
        (
            f"index: 'ann_index_config' {name}",
            _bad_ints(low, high),
            [
                lambda s, v, name=name, kind=kind: SQLStore(  # type: ignore[misc]
                    s.db,
                    table_prefix=s.tables.prefix,
                    index={
                        "embed": Ones(),
                        "dims": 2,
                        "ann_index_config": {"kind": kind, name: v},  # type: ignore[typeddict-item]
                    },
                )
            ],
        )
        for kind, name, low, high in [
            ("hnsw", "m", 2, 100),
            ("hnsw", "ef_construction", 4, 1000),
            ("hnsw", "ef_search", 1, 1000),
            ("ivfflat", "lists", 1, 32768),
            ("ivfflat", "probes", 1, 32768),
        ]
    ),
]


def _rows(store: SQLStore) -> list[tuple[Any, ...]]:
    items = store.tables.store_items
    with store.db.sync_engine.connect() as c:
        return [tuple(r) for r in c.execute(sa.select(items).order_by(items.c.id)).all()]


@pytest.fixture
def store(db_url: str, prefix: str) -> SQLStore:
    s = SQLStore(db_url, table_prefix=prefix, index={"embed": Ones(), "dims": 2})
    s.put(NS, "kept", {"v": 1}, ttl=5)
    return s


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_out_of_range_numbers_are_refused_before_any_write(store: SQLStore, case: int) -> None:
    name, values, calls = CASES[case]
    before = _rows(store)

    @settings(
        max_examples=12,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(value=values, which=st.sampled_from(range(len(calls))))
    def check(value: Any, which: int) -> None:
        with pytest.raises(ValueError) as caught:
            calls[which](store, value)
        assert str(caught.value).startswith(f"{name}:"), caught.value
        assert (
            "from " in str(caught.value)
            or "at most" in str(caught.value)
            or ".." in str(caught.value)
        ), caught.value
        assert _rows(store) == before

    check()
    assert store.stop_ttl_sweeper(timeout=10)


def test_a_namespace_given_as_a_str_is_refused(store: SQLStore) -> None:
    """LangGraph's own stores take ``"abc"`` apart as ``("a", "b", "c")``; here it is an
    error naming the parameter."""
    before = _rows(store)
    calls: list[Callable[[], Any]] = [
        lambda: store.put("numbers", "k", {"v": 1}),  # type: ignore[arg-type]
        lambda: store.get("numbers", "kept"),  # type: ignore[arg-type]
        lambda: store.delete("numbers", "kept"),  # type: ignore[arg-type]
        lambda: store.search("numbers"),  # type: ignore[arg-type]
        lambda: store.list_namespaces(prefix="numbers"),  # type: ignore[arg-type]
        lambda: store.list_namespaces(suffix="u1"),  # type: ignore[arg-type]
        lambda: store.batch([SearchOp("numbers")]),  # type: ignore[arg-type]
        lambda: store.batch([PutOp("numbers", "k", {"v": 1})]),  # type: ignore[arg-type]
        lambda: asyncio.run(store.aput("numbers", "k", {"v": 1})),  # type: ignore[arg-type]
        lambda: asyncio.run(store.aget("numbers", "kept")),  # type: ignore[arg-type]
        lambda: asyncio.run(store.asearch("numbers")),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(TypeError, match=r"(namespace|prefix|suffix).*expected a tuple"):
            call()
    assert _rows(store) == before


def test_the_edges_of_each_range_work(store: SQLStore) -> None:
    store.put(NS, "forever", {"v": 2}, ttl=None)
    store.put(NS, "longest", {"v": 3}, ttl=TTL_MAX_MINUTES)
    store.put(NS, "shortest", {"v": 4}, ttl=1e-12)  # one microsecond
    items = store.tables.store_items
    with store.db.sync_engine.connect() as c:
        ttl = dict(c.execute(sa.select(items.c.key, items.c.ttl_us)).all())
        longest = c.execute(sa.select(items.c.expires_at).where(items.c.key == "longest"))
        assert longest.scalar_one() <= INT64_MAX
    assert ttl["forever"] is None and ttl["shortest"] == 1
    assert ttl["longest"] == TTL_MAX_MINUTES * 60_000_000
    got = store.get(NS, "longest")  # refreshes its TTL: still within 64 bits
    assert got is not None and got.value == {"v": 3}
    assert store.search(NS, limit=0) == []
    assert {i.key for i in store.search(NS, offset=0, limit=PAGE_MAX)} == {
        "kept",
        "forever",
        "longest",
    }
    assert store.search(NS, offset=PAGE_MAX, limit=PAGE_MAX) == []
    assert store.search(NS, filter={"v": 3}, offset=0, limit=PAGE_MAX)[0].key == "longest"
    assert len(store.search(NS, query="q", limit=PAGE_MAX)) == 3
    assert store.search(NS, query="q", limit=PAGE_MAX, offset=PAGE_MAX) == []
    assert store.list_namespaces(limit=0) == []
    assert store.list_namespaces(limit=PAGE_MAX, offset=0, max_depth=INT64_MAX) == [NS]
    assert store.list_namespaces(max_depth=1, offset=PAGE_MAX) == []
    assert store.list_namespaces(max_depth=1) == [NS[:1]]
    store.start_ttl_sweeper(SWEEP_MAX_MINUTES)
    assert store.stop_ttl_sweeper(timeout=threading.TIMEOUT_MAX)
    store.start_ttl_sweeper(1e-9)
    assert store.stop_ttl_sweeper(timeout=10)
    assert store.stop_ttl_sweeper(timeout=0)
    SQLStore(
        store.db,
        table_prefix=store.tables.prefix,
        ttl={"default_ttl": TTL_MAX_MINUTES, "sweep_interval_minutes": SWEEP_MAX_MINUTES},
        index={"embed": Ones(), "dims": INT64_MAX},
    )


async def test_the_edges_of_each_range_work_async(store: SQLStore) -> None:
    await store.aput(NS, "longest", {"v": 3}, ttl=TTL_MAX_MINUTES)
    assert await store.asearch(NS, limit=0) == []
    assert len(await store.asearch(NS, limit=PAGE_MAX, offset=0)) == 2
    assert await store.asearch(NS, query="q", limit=PAGE_MAX, offset=PAGE_MAX) == []
    assert await store.alist_namespaces(limit=PAGE_MAX, max_depth=INT64_MAX) == [NS]
    await store.astart_ttl_sweeper(SWEEP_MAX_MINUTES)
    assert await store.astop_ttl_sweeper(timeout=threading.TIMEOUT_MAX)
