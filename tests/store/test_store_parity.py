"""SQLStore behaves like LangGraph's InMemoryStore: the same operations on both, same results.

Runs on a SQLite file, PostgreSQL and MariaDB, through the sync API and the async API, without
and with a (deterministic) embedding index.

Known, deliberate differences (tested elsewhere, kept out of these scenarios):
* a search without a query returns the most recently updated items first (InMemoryStore: insertion
  order), so pages are compared as sets only when they hold every match;
* InMemoryStore lists namespaces whose items were all deleted (or that were only read); SQLStore
  lists namespaces that hold items. The reference below drops empty namespaces before listing;
* booleans never equal numbers in filters (InMemoryStore: ``True == 1``); range operators on a
  missing field do not match (InMemoryStore raises).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import BaseStore, Item
from langgraph.store.memory import InMemoryStore

from langmem_sqlite import SQLStore


class ReferenceStore(InMemoryStore):
    """InMemoryStore, minus its listing of namespaces that hold no item."""

    def _handle_list_namespaces(self, op: Any) -> list[tuple[str, ...]]:
        for ns in [ns for ns, items in self._data.items() if not items]:
            del self._data[ns]
        return super()._handle_list_namespaces(op)


NAMESPACES = [
    ("users", "u1", "facts"),
    ("users", "u1", "prefs"),
    ("users", "u2", "facts"),
    ("users", "u2"),
    ("docs",),
    ("docs", "ünï", "中文"),
    ("a",),
    ("a", "b"),
    ("ab",),
    ("a-", "x"),
]
WORDS = ["apple", "banana", "cherry", "dates", "elder", "fig", "grape"]


def _value(rng: random.Random) -> dict[str, Any]:
    return {
        "text": " ".join(rng.choice(WORDS) for _ in range(3)) + f" {rng.random():.6f}",
        "note": f"note {rng.random():.6f}",
        "n": rng.randint(0, 20),
        "score": rng.choice([0.5, 1.5, 2.0, 7.25]),
        "tag": rng.choice(["red", "green", "blue"]),
        "flag": rng.choice([True, False]),
        "meta": {"lang": rng.choice(["en", "zh"]), "level": rng.randint(1, 3)},
        "list": [rng.randint(0, 2), "x"],
    }


FILTERS: list[dict[str, Any] | None] = [
    None,
    {"tag": "red"},
    {"tag": {"$eq": "blue"}},
    {"tag": {"$ne": "blue"}},
    {"n": {"$gt": 10}},
    {"n": {"$gte": 10, "$lte": 15}},
    {"n": {"$lt": 5}},
    {"score": {"$gte": 1.5}},
    {"score": 2},
    {"flag": True},
    {"flag": {"$ne": True}},
    {"meta": {"lang": "zh"}},
    {"meta": {"level": {"$gt": 1}}},
    {"tag": "green", "n": {"$lte": 12}},
    {"list": [1, "x"]},
    {"missing": None},
    {"tag": "nope"},
]


def _norm(result: Any) -> Any:
    """Comparable form: items without timestamps (scores rounded: float32 storage)."""
    if result is None:
        return None
    if isinstance(result, Item):
        score = getattr(result, "score", None)
        return (
            tuple(result.namespace),
            result.key,
            result.value,
            None if score is None else round(score, 4),
        )
    if isinstance(result, list):
        return [_norm(r) for r in result]
    return result


def _scenario(seed: int) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """A deterministic sequence of store calls: (method, args, kwargs)."""
    rng = random.Random(seed)
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    keys = [f"k{i}" for i in range(6)] + ["K0", "k0 ", "ключ", "a.b"]
    for _ in range(140):
        ns = rng.choice(NAMESPACES)
        roll = rng.random()
        if roll < 0.45:
            calls.append(("put", (ns, rng.choice(keys), _value(rng)), {}))
        elif roll < 0.55:
            calls.append(("delete", (ns, rng.choice(keys)), {}))
        elif roll < 0.7:
            calls.append(("get", (ns, rng.choice(keys)), {}))
        elif roll < 0.9:
            prefix = ns[: rng.randint(0, len(ns))]
            calls.append(("search", (prefix,), {"filter": rng.choice(FILTERS), "limit": 1000}))
        else:
            kwargs: dict[str, Any] = {"limit": 1000}
            if rng.random() < 0.5:
                kwargs["prefix"] = ns[: rng.randint(1, len(ns))]
            if rng.random() < 0.3:
                kwargs["suffix"] = ns[-1:]
            if rng.random() < 0.4:
                kwargs["max_depth"] = rng.randint(1, 3)
            if rng.random() < 0.2:
                kwargs["offset"], kwargs["limit"] = 1, 2
            calls.append(("list_namespaces", (), kwargs))
    # Everything at the end, in every form.
    for flt in FILTERS:
        calls.append(("search", ((),), {"filter": flt, "limit": 1000}))
    calls.append(("list_namespaces", (), {}))
    calls.append(("list_namespaces", (), {"prefix": ("users", "*", "facts")}))
    calls.append(("list_namespaces", (), {"suffix": ("*", "facts")}))
    return calls


def _check_same(calls: list[Any], ours: list[Any], theirs: list[Any]) -> None:
    for (method, args, kwargs), mine, ref in zip(calls, ours, theirs, strict=True):
        a, b = _norm(mine), _norm(ref)
        if method == "search":
            a, b = sorted(a, key=repr), sorted(b, key=repr)
        assert a == b, f"{method}{args} {kwargs}: SQLStore {a!r} != InMemoryStore {b!r}"


def _run(store: BaseStore, calls: list[Any]) -> list[Any]:
    return [getattr(store, method)(*args, **kwargs) for method, args, kwargs in calls]


async def _arun(store: BaseStore, calls: list[Any]) -> list[Any]:
    return [await getattr(store, "a" + method)(*args, **kwargs) for method, args, kwargs in calls]


def _safe(calls: list[Any]) -> list[Any]:
    # Public BaseStore methods reject labels with dots; both stores raise the same error.
    return [c for c in calls if not any("." in label for label in (c[1][0] if c[1] else ()))]


@pytest.mark.parametrize("seed", [1, 2])
def test_same_results_as_inmemorystore_sync(db_url: str, prefix: str, seed: int) -> None:
    calls = _safe(_scenario(seed))
    ours = _run(SQLStore(db_url, table_prefix=prefix), calls)
    theirs = _run(ReferenceStore(), calls)
    _check_same(calls, ours, theirs)
    assert any(r for r in theirs if isinstance(r, list) and r), "scenario found nothing"


async def test_same_results_as_inmemorystore_async(db_url: str, prefix: str) -> None:
    calls = _safe(_scenario(3))
    ours = await _arun(SQLStore(db_url, table_prefix=prefix), calls)
    theirs = await _arun(ReferenceStore(), calls)
    _check_same(calls, ours, theirs)


def _vector_calls(seed: int) -> list[Any]:
    rng = random.Random(seed)
    calls: list[Any] = []
    for i in range(40):
        ns = rng.choice(NAMESPACES[:6])
        calls.append(("put", (ns, f"doc{i % 25}", _value(rng)), {}))
    for _ in range(25):
        ns = rng.choice(NAMESPACES[:6])
        prefix = ns[: rng.randint(0, len(ns))]
        calls.append(
            (
                "search",
                (prefix,),
                {
                    "query": " ".join(rng.choice(WORDS) for _ in range(2)),
                    "filter": rng.choice(FILTERS[:8]),
                    "limit": rng.choice([1, 3, 10]),
                    "offset": rng.choice([0, 0, 2]),
                },
            )
        )
    return calls


def _check_ranked(calls: list[Any], ours: list[Any], theirs: list[Any]) -> None:
    for (method, args, kwargs), mine, ref in zip(calls, ours, theirs, strict=True):
        if method != "search":
            continue
        a, b = _norm(mine), _norm(ref)
        assert [x[:2] for x in a] == [x[:2] for x in b], f"{args} {kwargs}"
        for x, y in zip(a, b, strict=True):
            assert x[3] == pytest.approx(y[3], abs=1e-3)


@pytest.mark.parametrize("fields", [None, ["text"], ["text", "note"]])
def test_vector_search_ranks_like_inmemorystore(
    db_url: str, prefix: str, fields: list[str] | None
) -> None:
    index: dict[str, Any] = {"dims": 32, "embed": DeterministicFakeEmbedding(size=32)}
    if fields:
        index["fields"] = fields
    calls = _vector_calls(len(fields or []))
    ours = _run(SQLStore(db_url, table_prefix=prefix, index=index), calls)  # type: ignore[arg-type]
    theirs = _run(InMemoryStore(index=index), calls)  # type: ignore[arg-type]
    _check_ranked(calls, ours, theirs)
    assert any(r for r in ours if isinstance(r, list) and r and r[0].score is not None)


async def test_vector_search_ranks_like_inmemorystore_async(db_url: str, prefix: str) -> None:
    index: dict[str, Any] = {"dims": 16, "embed": DeterministicFakeEmbedding(size=16)}
    calls = _vector_calls(7)
    ours = await _arun(SQLStore(db_url, table_prefix=prefix, index=index), calls)  # type: ignore[arg-type]
    theirs = await _arun(InMemoryStore(index=index), calls)  # type: ignore[arg-type]
    _check_ranked(calls, ours, theirs)
