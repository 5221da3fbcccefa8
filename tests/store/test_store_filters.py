"""SQLStore's search filters as LangGraph's stores give them: dotted keys reaching nested values
(SqliteStore), NaN and infinities (InMemoryStore's Python rule), integers beyond 64 bits against
floats (Python's rule), text with backslash sequences and NUL; on SQLite, PostgreSQL and MariaDB,
sync and async."""

from __future__ import annotations

import math
import operator
import sqlite3
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langmem_sqlite import SQLStore
from langmem_sqlite.store.filters import matches


def _keys(items: list[Any]) -> set[str]:
    return {i.key for i in items}


DOTTED = {
    "nested": {"user": {"access-level": "nested", "7th": 7}},
    "literal": {"user.access-level": "literal"},
    "digits": {"1st": {"2-nd": 5, "3rd": {"x-y": "deep"}}},
    "hyphen": {"a-b": {"3c": "x"}, "top-1": 1},
    "not an object": {"user": "plain"},
    "array": {"1st": [{"2-nd": 5}]},
}

DOTTED_FILTERS: list[dict[str, Any]] = [
    {"user.access-level": "nested"},
    {"user.access-level": "literal"},
    {"user.7th": 7},
    {"user.7th": {"$gte": 7}},
    {"1st.2-nd": 5},
    {"1st.2-nd": {"$gt": 4, "$lt": 6}},
    {"1st.3rd.x-y": "deep"},
    {"1st": {"3rd.x-y": "deep"}},
    {"1st": {"2-nd": 5}},
    {"a-b.3c": "x"},
    {"a-b": {"3c": "x"}},
    {"top-1": 1},
    {"user.access-level": {"$ne": "nested"}},
    {"user.missing": None},
]


def test_dotted_keys_reach_nested_values(store: SQLStore) -> None:
    for key, value in DOTTED.items():
        store.put(("f",), key, value)
    found = {
        i: _keys(store.search(("f",), filter=f, limit=50)) for i, f in enumerate(DOTTED_FILTERS)
    }
    assert found[0] == {"nested"}
    assert found[1] == {"literal"}  # the dotted name as a key of its own is read first
    assert found[2] == found[3] == {"nested"}
    assert found[4] == found[5] == {"digits"}  # not through an array
    assert found[6] == found[7] == {"digits"}
    assert found[8] == {"digits"}
    assert found[9] == found[10] == {"hyphen"}
    assert found[11] == {"hyphen"}
    assert found[12] == set(DOTTED) - {"nested"}
    assert found[13] == set(DOTTED)
    for i, f in enumerate(DOTTED_FILTERS):  # the rule every result satisfies
        assert found[i] == {k for k, v in DOTTED.items() if matches(v, f)}, f


def test_dotted_keys_as_sqlitestore_finds_them(store: SQLStore) -> None:
    """The filters SqliteStore accepts (top-level dotted names) find the same items; the
    literal dotted key aside (SqliteStore only walks down)."""
    anchor = SqliteStore(sqlite3.connect(":memory:", isolation_level=None))
    anchor.setup()
    for key, value in DOTTED.items():
        if key != "literal":
            store.put(("f",), key, value)
            anchor.put(("f",), key, value)
    for f in DOTTED_FILTERS:
        if any(isinstance(c, dict) and not next(iter(c)).startswith("$") for c in f.values()):
            continue  # nested filter dicts: SqliteStore compares them as JSON text
        if any(v is None or (isinstance(v, dict) and "$ne" in v) for v in f.values()):
            continue  # SqliteStore's missing fields and $ne differ (SQL NULL)
        ours = _keys(store.search(("f",), filter=f, limit=50))
        assert ours == _keys(anchor.search(("f",), filter=f, limit=50)), f


async def test_dotted_keys_async(store: SQLStore) -> None:
    for key, value in DOTTED.items():
        await store.aput(("f",), key, value)
    for f in DOTTED_FILTERS:
        found = _keys(await store.asearch(("f",), filter=f, limit=50))
        assert found == {k for k, v in DOTTED.items() if matches(v, f)}, f


NUMBERS = {
    "zero": {"n": 0},
    "int": {"n": 5},
    "float": {"n": 2.5},
    "negative": {"n": -1e300},
    "huge": {"n": 10**400},
    "text": {"n": "5"},
    "missing": {"m": 1},
}
INF, NAN = math.inf, math.nan
NONFINITE: list[dict[str, Any]] = [
    {"n": NAN},
    {"n": {"$eq": NAN}},
    {"n": {"$ne": NAN}},
    {"n": {"$gt": NAN}},
    {"n": {"$lte": NAN}},
    {"n": INF},
    {"n": {"$ne": INF}},
    {"n": {"$lt": INF}},
    {"n": {"$lte": INF}},
    {"n": {"$gt": INF}},
    {"n": {"$gte": -INF}},
    {"n": {"$gt": -INF}},
    {"n": {"$lt": -INF}},
    {"n": -INF},
    {"n": {"$gte": 0, "$lt": INF}},
]


def _python_rule(values: dict[str, Any], f: dict[str, Any]) -> set[str]:
    ops = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}
    out = set()
    for key, value in values.items():
        ok = True
        for field, cond in f.items():
            have = value.get(field)
            conds = cond if isinstance(cond, dict) else {"$eq": cond}
            for op, operand in conds.items():
                number = isinstance(have, int | float) and not isinstance(have, bool)
                if op == "$eq":
                    ok &= number and have == operand
                elif op == "$ne":
                    ok &= not (number and have == operand)
                else:
                    ok &= number and ops[op](have, operand)
        if ok:
            out.add(key)
    return out


def test_nan_and_infinities_follow_the_python_rule(store: SQLStore) -> None:
    for key, value in NUMBERS.items():
        store.put(("n",), key, value)
    reference = InMemoryStore()  # its rule, where it can apply it (numbers only)
    numeric = {k: v for k, v in NUMBERS.items() if k not in ("text", "missing", "huge")}
    for key, value in numeric.items():
        reference.put(("n",), key, value)
        store.put(("numeric",), key, value)
    for f in NONFINITE:
        found = _keys(store.search(("n",), filter=f, limit=50))
        assert found == _python_rule(NUMBERS, f), f
        assert found == {k for k, v in NUMBERS.items() if matches(v, f)}, f
        ours = _keys(store.search(("numeric",), filter=f, limit=50))
        assert ours == _keys(reference.search(("n",), filter=f, limit=50)), f


async def test_nan_and_infinities_async(store: SQLStore) -> None:
    for key, value in NUMBERS.items():
        await store.aput(("n",), key, value)
    for f in NONFINITE:
        found = _keys(await store.asearch(("n",), filter=f, limit=50))
        assert found == _python_rule(NUMBERS, f), f


BIG = float(2**70)
BIG_VALUES = {
    "exact int": {"n": 2**70},
    "next int": {"n": 2**70 + 1},
    "previous int": {"n": 2**70 - 1},
    "float": {"n": BIG},
    "spelled int": {"n": int(repr(BIG).replace("e+21", "").replace(".", "")) * 10**5},
    "next float": {"n": math.nextafter(BIG, math.inf)},
    "small": {"n": 3},
}
BIG_FILTERS: list[dict[str, Any]] = [
    {"n": BIG},
    {"n": {"$eq": BIG}},
    {"n": {"$ne": BIG}},
    {"n": {"$gt": BIG}},
    {"n": {"$gte": BIG}},
    {"n": {"$lt": BIG}},
    {"n": {"$lte": BIG}},
    {"n": 2**70},
    {"n": {"$gt": 2**70}},
    {"n": float(2**53)},
    {"n": {"$gte": -BIG, "$lt": 4}},
]


def test_big_integers_against_floats_by_the_python_rule(store: SQLStore) -> None:
    """``2**70`` stored matches ``float(2**70)``, ``2**70 + 1`` does not (Python compares an
    int and a float exactly), on every database (PostgreSQL's jsonb numerics too)."""
    assert BIG_VALUES["spelled int"]["n"] == 1180591620717411300000
    for key, value in BIG_VALUES.items():
        store.put(("big",), key, value)
    for f in BIG_FILTERS:
        expected = _python_rule(BIG_VALUES, f)
        assert _keys(store.search(("big",), filter=f, limit=50)) == expected, f
    assert _keys(store.search(("big",), filter={"n": BIG}, limit=50)) == {"exact int", "float"}


async def test_big_integers_against_floats_async(store: SQLStore) -> None:
    for key, value in BIG_VALUES.items():
        await store.aput(("big",), key, value)
    for f in BIG_FILTERS:
        found = _keys(await store.asearch(("big",), filter=f, limit=50))
        assert found == _python_rule(BIG_VALUES, f), f


def test_backslash_sequences_are_stored_as_they_are(store: SQLStore) -> None:
    texts = {
        "code": {"code": 'printf("\\u0000")'},
        "escapes": {"code": "\\\\u0000 \\n \\x00 \\"},
        "key": {"\\u0000": "a key with a backslash sequence"},
    }
    for key, value in texts.items():
        store.put(("t",), key, value)
    for key, value in texts.items():
        item = store.get(("t",), key)
        assert item is not None and item.value == value
    found = store.search(("t",), filter={"code": 'printf("\\u0000")'})
    assert [i.key for i in found] == ["code"]


async def test_nul_is_refused_only_where_the_database_cannot_hold_it(
    store: SQLStore, backend: str
) -> None:
    values = {
        "top": {"code": "a\x00b"},
        "deep": {"a": [{"b": "x"}, {"b": "y\x00"}]},
        "key": {"k\x00": 1},
    }
    if store.db.backend != "postgresql":
        for key, value in values.items():
            await store.aput(("nul",), key, value)
            item = store.get(("nul",), key)
            assert item is not None and item.value == value
        return
    where = {"top": "value['code']", "deep": "value['a'][1]['b']", "key": "value: key 'k\\x00'"}
    for key, value in values.items():
        with pytest.raises(ValueError, match="PostgreSQL cannot store the NUL") as e:
            store.put(("nul",), key, value)
        assert str(e.value).startswith(where[key])
        with pytest.raises(ValueError, match="NUL"):
            await store.aput(("nul",), key, value)
    assert store.search(("nul",)) == []
