"""Hostile input to the long-term store: fuzzed namespaces, keys and values, deeply nested values,
lone surrogates and large numbers, on SQLite, PostgreSQL and MariaDB.

Every input is either stored and read back exactly, or refused with ``TypeError``/``ValueError``
before anything is written.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import PutOp
from support import FUZZ, STORE_JSON, STORE_TEXT, TEXT

from langmem_sqlite import SQLStore


@FUZZ
@given(
    ns=st.lists(TEXT, min_size=1, max_size=3),
    key=TEXT,
    value=st.dictionaries(STORE_TEXT, STORE_JSON, max_size=4),
)
def test_fuzzed_store_items(
    db_url: str, prefix: str, ns: list[str], key: str, value: dict[str, Any]
) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    try:
        store.put(tuple(ns), key, value)
    except (TypeError, ValueError):
        # refused: nothing was written (or the namespace/key is invalid, and reads refuse it too)
        with contextlib.suppress(TypeError, ValueError):
            assert store.get(tuple(ns), key) is None
        return
    item = store.get(tuple(ns), key)
    assert item is not None and item.value == value
    store.delete(tuple(ns), key)


def test_deep_nesting_in_store_values_is_a_typed_error(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    nested: dict[str, Any] = {}
    cur = nested
    for _ in range(50_000):
        cur["a"] = {}
        cur = cur["a"]
    with pytest.raises((TypeError, ValueError)):
        store.batch([PutOp(("deep",), "k", {"v": nested})])
    assert store.get(("deep",), "k") is None


def test_store_values_with_lone_surrogates(db_url: str, prefix: str, backend: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    for value in ({"\ud800": 1}, {"a": "x\udfff"}):
        try:
            store.put(("s",), "k", value)
        except ValueError:
            assert store.get(("s",), "k") is None
        else:
            assert store.get(("s",), "k").value == value  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "number", [3.913995296008598e16, 1e16, -2.5e20, 1e300, 1.5e-7, 0.1, 2.0, 10**20]
)
def test_store_number_fidelity(db_url: str, prefix: str, number: float) -> None:
    """Floats stay floats and ints stay ints (PostgreSQL's JSONB keeps numbers as ``numeric``,
    which would turn 3.9e16 into an integer without the package's JSONB encoding)."""
    store = SQLStore(db_url, table_prefix=prefix)
    store.put(("f",), "k", {"f": number, "nested": [{"x": number}], "text": f"{number!r} e+16"})
    got = store.get(("f",), "k").value  # type: ignore[union-attr]
    assert type(got["f"]) is type(number) and got["f"] == number
    assert got["nested"][0]["x"] == number and type(got["nested"][0]["x"]) is type(number)
    assert got["text"] == f"{number!r} e+16"
