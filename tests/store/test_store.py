"""SQLStore: the BaseStore contract on edge cases, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timezone
from typing import Any

import pytest
import sqlalchemy as sa
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from langmem_sqlite import SQLStore
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables

# -- namespaces ---------------------------------------------------------------------------------


def test_labels_with_dots_unicode_and_separators_are_distinct(store: SQLStore) -> None:
    spaces = [
        ("a.b",),
        ("a", "b"),
        ("a", "b.c"),
        ("a.b", "c"),
        ("用户", "ünï", "😀"),
        ("x\x01y",),
        ("x", "y"),
        ("x\x02",),
        ("x\x01",),
        ("a b", "%_"),
        ("a",),
    ]
    store.batch([PutOp(ns, "k", {"ns": list(ns)}) for ns in spaces])
    for ns in spaces:
        item = store.batch([GetOp(ns, "k")])[0]
        assert item is not None and item.value == {"ns": list(ns)} and item.namespace == ns
    assert store.list_namespaces(limit=100) == sorted(spaces)
    found = store.search(("a",))
    assert {tuple(i.namespace) for i in found} == {("a", "b"), ("a", "b.c"), ("a",)}
    # "%" and "_" are literal, not LIKE wildcards.
    assert [i.namespace for i in store.search(("a b", "%_"))] == [("a b", "%_")]
    assert store.search(("a b", "%%")) == []


def test_public_methods_reject_dots_like_inmemorystore(store: SQLStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"v": 1})


@pytest.mark.parametrize(
    "namespace, error",
    [
        ((), ValueError),
        (("",), ValueError),
        (("a", ""), ValueError),
        (("a\x00",), ValueError),
        (("a", 3), TypeError),
        ("ab", TypeError),
        (("\ud800",), ValueError),
        (("x" * 1100,), ValueError),
    ],
)
def test_bad_namespaces_are_rejected(store: SQLStore, namespace: Any, error: type) -> None:
    with pytest.raises(error, match="namespace"):
        store.batch([PutOp(namespace, "k", {"v": 1})])
    assert store.search(()) == []


def test_remembered_namespaces_are_still_checked(store: SQLStore) -> None:
    """Namespaces seen before skip their checks (store.namespaces.encoded); others do not."""
    store.put(("a",), "k", {"v": 1})
    for _ in range(2):  # the second time from the remembered namespaces
        assert store.get(("a",), "k").value == {"v": 1}  # type: ignore[union-attr]
        assert store.get(["a"], "k").value == {"v": 1}  # type: ignore[arg-type, union-attr]
        with pytest.raises(InvalidNamespaceError, match="period"):
            store.get(("a.b",), "k")
        with pytest.raises(ValueError, match="namespace"):
            store.get(("a", ""), "k")
        with pytest.raises(TypeError, match="namespace"):
            store.get(("a", 3), "k")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="namespace"):
            store.batch([PutOp((), "k", {"v": 1})])  # () is remembered by get's allow_empty
        assert store.get((), "k") is None


def test_list_namespaces_prefix_suffix_depth_paging(store: SQLStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"),
               ("a", "c", "f"), ("b", "a", "f")]:  # fmt: skip
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(max_depth=1) == [("a",), ("b",)]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    store.delete(("b", "a", "f"), "k")
    assert store.list_namespaces(prefix=("b",)) == []
    with pytest.raises(ValueError, match="max_depth"):
        store.batch([ListNamespacesOp(max_depth=0)])
    with pytest.raises(ValueError, match="match_type"):
        store.batch([ListNamespacesOp(match_conditions=(MatchCondition("infix", ("a",)),))])  # type: ignore[arg-type]


# -- keys and values ----------------------------------------------------------------------------


def test_keys_are_byte_exact(store: SQLStore) -> None:
    keys = ["k", "K", "k ", " k", "é", "e\u0301", "ß", "ss", "", "a.b", "x" * 255]
    for i, key in enumerate(keys):
        store.put(("ns",), key, {"i": i})
    for i, key in enumerate(keys):
        item = store.get(("ns",), key)
        assert item is not None and item.key == key and item.value == {"i": i}
    assert len(store.search(("ns",), limit=50)) == len(keys)
    with pytest.raises(ValueError, match="key"):
        store.batch([PutOp(("ns",), "x" * 256, {"v": 1})])
    with pytest.raises(TypeError, match="key"):
        store.batch([PutOp(("ns",), 5, {"v": 1})])  # type: ignore[arg-type]


def test_values_round_trip_and_bad_values_are_rejected(store: SQLStore) -> None:
    value = {
        "text": "素食者 'quoted' \"double\" \\ back",
        "big": 2**62,
        "neg": -3.25,
        "tiny": 1e-300,
        "nested": {"list": [1, "two", None, True, {"deep": []}]},
        "empty": {},
    }
    store.put(("v",), "k", value)
    assert store.get(("v",), "k").value == value  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="value"):
        store.put(("v",), "k", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value"):
        store.put(("v",), "k", {"when": object()})
    with pytest.raises(ValueError, match="value"):
        store.put(("v",), "k", {"x": float("nan")})
    assert store.get(("v",), "k").value == value  # type: ignore[union-attr]


def test_timestamps(store: SQLStore) -> None:
    store.put(("t",), "k", {"v": 1})
    first = store.get(("t",), "k")
    store.put(("t",), "k", {"v": 2})
    second = store.get(("t",), "k")
    assert first is not None and second is not None
    assert first.created_at.tzinfo == timezone.utc
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at


def test_batch_reads_see_state_before_writes_and_last_write_wins(store: SQLStore) -> None:
    store.put(("b",), "k", {"v": 0})
    results = store.batch(
        [
            PutOp(("b",), "k", {"v": 1}),
            GetOp(("b",), "k"),
            PutOp(("b",), "k", {"v": 2}),
            SearchOp(("b",)),
            PutOp(("b",), "gone", None),
            ListNamespacesOp(),
        ]
    )
    assert results[0] is None and results[2] is None and results[4] is None
    assert results[1].value == {"v": 0}
    assert [i.value for i in results[3]] == [{"v": 0}]
    assert results[5] == [("b",)]
    assert store.get(("b",), "k").value == {"v": 2}  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="ops"):
        store.batch(["not an op"])  # type: ignore[list-item]


def test_batches_of_many_keys(db_url: str, prefix: str) -> None:
    """Gets, deletes and vector replacement for many (namespace, key) pairs in one batch,
    across chunks, with labels and keys that need quoting."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    store = SQLStore(
        db_url,
        table_prefix=prefix,
        index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8), "fields": ["t", "u"]},
    )
    spaces = [("a",), ("a", "b"), ('q"x', "ünï"), ("x\\y", "[1]")]
    keys = [f"k{i}" for i in range(300)] + ['"', "'", "ключ", "a b", "k0 "]
    pairs = [(ns, k) for ns in spaces for k in keys]  # 1,220 pairs: three chunks
    store.batch([PutOp(ns, k, {"t": f"{ns} {k}", "u": k}) for ns, k in pairs])
    missing = [(("a",), "nope"), (("zz",), "k1"), (("a", "b", "c"), "k1")]
    asked = pairs[::-1] + missing
    got = store.batch([GetOp(ns, k) for ns, k in asked])
    assert [None if i is None else (i.namespace, i.key) for i in got] == [
        *((tuple(ns), k) for ns, k in pairs[::-1]),
        None,
        None,
        None,
    ]
    assert all(i.value == {"t": f"{i.namespace} {i.key}", "u": i.key} for i in got if i)

    def vectors() -> int:
        with get_database(db_url).sync_engine.connect() as c:
            t = get_tables(prefix).store_vectors
            return int(c.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())

    assert vectors() == 2 * len(pairs)
    # re-put half with one field: their vectors are replaced, the others' kept
    store.batch([PutOp(ns, k, {"t": "new"}) for ns, k in pairs[::2]])
    assert vectors() == len(pairs[::2]) + 2 * len(pairs[1::2])
    store.batch([PutOp(ns, k, None) for ns, k in pairs[1::2] + missing])
    assert vectors() == len(pairs[::2])
    left = store.batch([GetOp(ns, k) for ns, k in pairs])
    assert [i is not None for i in left] == [i % 2 == 0 for i in range(len(pairs))]
    assert all(i.value == {"t": "new"} for i in left if i)


def test_delete_missing_is_a_no_op(store: SQLStore) -> None:
    store.delete(("d",), "missing")
    assert store.get(("d",), "missing") is None
    assert store.get(("never", "read"), "x") is None
    assert store.list_namespaces() == []


# -- search ------------------------------------------------------------------------------------


def _fill(store: SQLStore, n: int = 30) -> None:
    for i in range(n):
        store.put(
            ("s", f"g{i % 3}"),
            f"k{i:02d}",
            {
                "i": i,
                "even": i % 2 == 0,
                "name": f"n{i:02d}",
                "tags": {"c": "red" if i % 5 else "x"},
            },
        )


def test_search_orders_by_most_recent_and_pages_consistently(store: SQLStore) -> None:
    _fill(store)
    full = [i.key for i in store.search(("s",), limit=100)]
    assert full == [f"k{i:02d}" for i in reversed(range(30))]
    for flt in (None, {"even": True}, {"i": {"$gte": 7}}):
        whole = [i.key for i in store.search(("s",), filter=flt, limit=100)]
        pages = [
            i.key
            for off in range(0, 40, 4)
            for i in store.search(("s",), filter=flt, limit=4, offset=off)
        ]
        assert pages == whole
    store.put(("s", "g0"), "k00", {"i": 0, "even": True, "name": "n00", "tags": {"c": "x"}})
    assert store.search(("s",), limit=1)[0].key == "k00"
    assert store.search(("s",), limit=0) == []


def test_search_matches_batch(store: SQLStore) -> None:
    """``search`` gives the results of a SearchOp through ``batch``, and refuses what
    BaseStore.search refuses."""
    _fill(store)
    cases: list[dict[str, Any]] = [
        {},
        {"filter": {"even": True}, "limit": 4, "offset": 2},
        {"filter": {"i": {"$ne": 3}, "tags": {"c": "red"}}, "limit": 7, "offset": 5},
        {"filter": {"name": {"$gte": "n1"}, "i": {"$lt": 25}}, "limit": 100},
        {"filter": {"tags": {"c": {"$eq": "x"}}}, "query": "ignored without an index"},
        {"limit": 0},
    ]
    for prefix in [(), ("s",), ("s", "g1"), ["s", "g2"], ("t",)]:
        for case in cases:
            op = SearchOp(
                tuple(prefix),
                case.get("filter"),
                case.get("limit", 10),
                case.get("offset", 0),
                case.get("query"),
            )
            want = [(i.namespace, i.key, i.value) for i in store.batch([op])[0]]
            got = [(i.namespace, i.key, i.value) for i in store.search(prefix, **case)]
            assert got == want, (prefix, case)
    assert len(store.search(("s",), filter={"i": {"$ne": 3}}, limit=100)) == 29
    with pytest.raises(InvalidNamespaceError, match="period"):
        store.search(("s.g1",))
    with pytest.raises(ValueError, match="namespace"):
        store.search(("s", ""))
    with pytest.raises(TypeError, match="namespace"):
        store.search("s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="filter"):
        store.search(("s",), filter={"i": {"$regex": "x"}})
    with pytest.raises(ValueError, match="limit"):
        store.search(("s",), limit=-1)
    with pytest.raises(TypeError, match="offset"):
        store.search(("s",), offset="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="query"):
        store.search(("s",), query=3)  # type: ignore[arg-type]


def test_put_checks_as_basestore(db_url: str, prefix: str) -> None:
    """``put``: the same checks as BaseStore.put, the TTL config's default, and the item
    written."""
    store = SQLStore(db_url, table_prefix=prefix, ttl={"default_ttl": 5})
    store.put(("p",), "first", {"v": 0})
    store.put(("p", "q"), 7, {"v": 1})  # type: ignore[arg-type]
    store.put(("p", "q"), "forever", {"v": 2}, ttl=None)
    store.put(("p", "q"), "7", {"v": 3}, index=False)  # last write wins
    got = {i.key: i.value for i in store.search(("p", "q"))}
    assert got == {"7": {"v": 3}, "forever": {"v": 2}}
    items = get_tables(prefix).store_items
    with get_database(db_url).sync_engine.connect() as c:
        ttl = dict(c.execute(sa.select(items.c.key, items.c.ttl_us)).all())
    assert ttl == {"first": 300_000_000, "7": 300_000_000, "forever": None}
    with pytest.raises(InvalidNamespaceError, match="langgraph"):
        store.put(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="period"):
        store.put(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"v": 1})
    with pytest.raises(TypeError, match="value"):
        store.put(("p",), "k", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ttl"):
        store.put(("p",), "k", {"v": 1}, ttl=-1)
    assert {i.key for i in store.search(("p",), limit=100)} == {"first", "7", "forever"}


def test_search_merges_a_namespace_and_its_sub_namespaces_newest_first(store: SQLStore) -> None:
    """A prefix search returns the items of the prefix's own namespace and of its
    sub-namespaces in one newest-first order."""
    spaces = [("u",), ("u", "x"), ("u", "x", "y"), ("u", "z"), ("v",), ("u0",)]
    for i in range(48):
        store.put(spaces[i % len(spaces)], f"k{i:02d}", {"i": i, "even": i % 2 == 0})
        time.sleep(0.001)  # distinct update times
    store.put(("u",), "k00", {"i": 0, "even": True})  # now the newest
    for prefix, flt in [(("u",), None), (("u",), {"even": True}), (("u", "x"), None)]:
        want = [
            it.key
            for it in sorted(
                (
                    store.get(ns, f"k{i:02d}")
                    for i in range(48)
                    for ns in [spaces[i % len(spaces)]]
                    if ns[: len(prefix)] == prefix and (flt is None or i % 2 == 0)
                ),
                key=lambda it: it.updated_at,  # type: ignore[union-attr]
                reverse=True,
            )
        ]
        assert [it.key for it in store.search(prefix, filter=flt, limit=100)] == want
        for size in (1, 3, 5):
            pages = [
                it.key
                for off in range(0, len(want) + size, size)
                for it in store.search(prefix, filter=flt, limit=size, offset=off)
            ]
            assert pages == want, (prefix, flt, size)
    assert store.search(("u",), limit=1)[0].key == "k00"


def test_filter_operators(store: SQLStore) -> None:
    _fill(store)

    def keys(flt: dict[str, Any]) -> set[int]:
        return {i.value["i"] for i in store.search(("s",), filter=flt, limit=100)}

    assert keys({"i": {"$gt": 27}}) == {28, 29}
    assert keys({"i": {"$gte": 27, "$lt": 29}}) == {27, 28}
    assert keys({"i": {"$lte": 1}}) == {0, 1}
    assert keys({"i": {"$ne": 0, "$lt": 3}}) == {1, 2}
    assert keys({"i": 3.0}) == {3}
    assert keys({"name": {"$gt": "n27"}}) == {28, 29}
    assert keys({"name": {"$lte": "n01"}}) == {0, 1}
    assert keys({"even": False, "i": {"$lt": 4}}) == {1, 3}
    assert keys({"even": 1}) == set()  # booleans only equal booleans
    assert keys({"tags": {"c": "x"}}) == {0, 5, 10, 15, 20, 25}
    assert keys({"tags": {"c": {"$ne": "red"}}, "i": {"$gt": 12}}) == {15, 20, 25}
    assert keys({"missing": {"$gt": 1}}) == set()
    assert keys({"missing": None, "i": 4}) == {4}
    assert keys({"i": {"$eq": 5}, "name": "n05"}) == {5}
    # Field names are data, never SQL.
    assert keys({"a'); DROP TABLE x; --": 1, "i": 1}) == set()
    assert len(store.search(("s",), limit=100)) == 30


def test_equality_is_json_equality_at_the_path(store: SQLStore) -> None:
    """Equality on a scalar is JSON equality of the value found by walking objects (PostgreSQL
    tests it as containment, which must not unwrap arrays or take digits as indexes)."""
    values = {
        "list": {"a": ["x"], "n": [1]},
        "str": {"a": "x", "n": "1"},
        "digit key": {"a": {"0": "x"}},
        "nested": {"a": {"b": 2.0, "c": 1}},
        "list of objects": {"a": [{"b": 2}]},
        "float": {"n": 1.0},
        "int": {"n": 1},
        "bool": {"n": True},
        "big": {"n": 2**70},
        "quote": {"a": 'x"}, "n": 1'},
    }
    for key, value in values.items():
        store.put(("eq",), key, value)

    def found(flt: dict[str, Any]) -> set[str]:
        return {i.key for i in store.search(("eq",), filter=flt, limit=100)}

    assert found({"a": "x"}) == {"str"}
    assert found({"a": {"$eq": "x"}}) == {"str"}
    assert found({"a": {"0": "x"}}) == {"digit key"}
    assert found({"a": {"b": 2}}) == {"nested"}
    assert found({"a": {"b": {"$eq": 2}}, "a.c": 1}) == {"nested"}  # a dotted name goes down
    assert found({"a": {"b": {"$eq": 2}}, "a.c": 2}) == set()
    assert found({"n": 1}) == {"float", "int"}
    assert found({"n": 1.0, "a": {"$ne": "x"}}) == {"float", "int"}
    assert found({"n": True}) == {"bool"}
    assert found({"n": "1"}) == {"str"}
    assert found({"n": 2**70}) == {"big"}
    assert found({"n": 2**70 + 1}) == set()  # one float for both on SQLite: re-checked
    assert found({"n": {"$gt": 2**69}}) == {"big"}
    assert found({"n": {"$lt": -(2**70)}}) == set()
    assert found({"a": 'x"}, "n": 1'}) == {"quote"}
    assert found({"a": ["x"]}) == {"list"}


@pytest.mark.parametrize(
    "flt, error",
    [
        ({"i": {"$in": [1]}}, ValueError),
        ({"i": {"$gt": [1]}}, ValueError),
        ({"i": {"$gt": 1, "x": 2}}, ValueError),
        ("i=1", TypeError),
        ({1: 2}, TypeError),
    ],
)
def test_bad_filters_are_rejected(store: SQLStore, flt: Any, error: type) -> None:
    with pytest.raises(error, match="filter"):
        store.search(("s",), filter=flt)


@pytest.mark.parametrize("field, value", [("limit", -1), ("offset", -2), ("limit", "3")])
def test_bad_limits(store: SQLStore, field: str, value: Any) -> None:
    with pytest.raises((ValueError, TypeError), match=field):
        store.search(("s",), **{field: value})


def test_query_without_index_is_a_plain_search(store: SQLStore) -> None:
    _fill(store, 5)
    found = store.search(("s",), query="anything", limit=10)
    assert [i.key for i in found] == ["k04", "k03", "k02", "k01", "k00"]
    assert all(i.score is None for i in found)


# -- sync/async, concurrency --------------------------------------------------------------------


async def test_sync_and_async_share_data(store: SQLStore) -> None:
    store.put(("m",), "a", {"v": 1})
    await store.aput(("m",), "b", {"v": 2})
    assert (await store.aget(("m",), "a")).value == {"v": 1}  # type: ignore[union-attr]
    assert store.get(("m",), "b").value == {"v": 2}  # type: ignore[union-attr]
    assert [i.key for i in await store.asearch(("m",), filter={"v": {"$gt": 1}})] == ["b"]
    assert await store.alist_namespaces() == [("m",)]
    await store.adelete(("m",), "a")
    assert store.get(("m",), "a") is None


async def test_concurrent_async_writers(store: SQLStore) -> None:
    async def writer(w: int) -> None:
        for i in range(10):
            await store.aput(("c", f"w{w}"), f"k{i}", {"w": w, "i": i})
            await store.aput(("c", "shared"), "same", {"w": w, "i": i})

    await asyncio.gather(*(writer(w) for w in range(6)))
    assert len(await store.asearch(("c",), limit=1000)) == 61
    shared = await store.aget(("c", "shared"), "same")
    assert shared is not None and shared.value["i"] == 9


def test_concurrent_thread_writers(db_url: str, prefix: str) -> None:
    stores = [SQLStore(db_url, table_prefix=prefix) for _ in range(2)]
    stores[0].setup()
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            s = stores[w % 2]
            for i in range(15):
                s.put(("c", f"w{w}"), f"k{i}", {"w": w, "i": i})
                s.put(("c", "shared"), "same", {"w": w, "i": i})
                s.search(("c",), filter={"w": w}, limit=5)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(stores[1].search(("c",), limit=1000)) == 91
    # Exactly one row per (namespace, key), even under contention.
    t = get_tables(prefix)
    with get_database(db_url).sync_engine.connect() as conn:
        n = conn.execute(sa.select(sa.func.count()).select_from(t.store_items)).scalar()
    assert n == 91


def test_string_filters_never_match_arrays_or_objects(store: SQLStore) -> None:
    store.put(("j",), "arr", {"f": ["a"], "g": {"x": 1}})
    store.put(("j",), "str", {"f": '["a"]', "g": '{"x": 1}'})
    store.put(("j",), "plain", {"f": "a", "g": 1})
    for flt, keys in [
        ({"f": '["a"]'}, {"str"}),
        ({"g": '{"x": 1}'}, {"str"}),
        ({"f": "a"}, {"plain"}),
        ({"f": {"$gte": "["}}, {"str", "plain"}),  # not the array
        ({"g": {"$gte": 1}}, {"plain"}),
        ({"f": ["a"]}, {"arr"}),
    ]:
        assert {i.key for i in store.search(("j",), filter=flt)} == keys, flt


def test_library_code_never_touches_the_garbage_collector(db_url: str, prefix: str) -> None:
    """Bulk batches and long reads leave the process's collector as the application set it:
    enabled stays enabled, disabled stays disabled, during the call and after it."""
    import gc

    seen: list[bool] = []

    def embed(texts: list[str]) -> list[list[float]]:  # called inside the batch
        seen.append(gc.isenabled())
        return [[1.0, 0.0] for _ in texts]

    index = {"embed": embed, "dims": 2, "fields": ["t"]}
    store = SQLStore(db_url, table_prefix=prefix, index=index)  # type: ignore[arg-type]
    assert gc.isenabled()
    store.batch([PutOp(("g",), f"k{i}", {"t": f"{i}"}) for i in range(100)])
    assert seen == [True] and gc.isenabled()
    gc.disable()
    try:
        store.batch([PutOp(("g",), f"j{i}", {"t": f"{i}"}) for i in range(100)])
        assert seen == [True, False] and not gc.isenabled()
    finally:
        gc.enable()
    assert len(store.search(("g",), limit=1000)) == 200


def test_prefix_search_pages_newest_first(db_url: str, prefix: str) -> None:
    """A prefix's own namespace and its sub-namespaces give one newest-first order: pages
    with filters, offsets and lapsed items, sync and batch alike."""
    from langmem_sqlite.store.filters import matches

    store = SQLStore(db_url, table_prefix=prefix)
    ops: list[Any] = []
    for i in range(300):
        ns = ("org",) if i % 10 == 0 else ("org", f"u{i % 7}", *(["deep"] if i % 3 else []))
        ops.append(
            PutOp(
                ns, f"k{i}", {"n": i % 13, "tag": f"t{i % 4}"}, ttl=0.001 if i % 11 == 0 else None
            )
        )
    ops.append(PutOp(("orgx",), "outside", {"n": 1, "tag": "t1"}))
    store.batch(ops)
    time.sleep(0.1)  # the items with a TTL have lapsed
    searches = [
        {"filter": None, "limit": 10, "offset": 0},
        {"filter": {"tag": "t1"}, "limit": 7, "offset": 3},
        {"filter": {"n": {"$gte": 9}, "tag": "t2"}, "limit": 50, "offset": 0},
        {"filter": {"n": 99}, "limit": 10, "offset": 0},
    ]
    newest = [op for op in reversed(ops) if op.ttl is None]  # one batch: newest = last written
    for p in [("org",), ("org", "u3"), ("org", "u3", "deep")]:
        for kw in searches:
            found = store.search(p, **kw)
            batched = store.batch([SearchOp(p, kw["filter"], kw["limit"], kw["offset"])])[0]
            assert [i.key for i in found] == [i.key for i in batched]
            want = [
                op.key
                for op in newest
                if op.namespace[: len(p)] == p and matches(op.value, kw["filter"])
            ]
            assert [i.key for i in found] == want[kw["offset"] : kw["offset"] + kw["limit"]]
