"""Every numeric parameter of SQLSaver, sync and async, on SQLite, PostgreSQL and MariaDB:
out-of-range, negative, huge, NaN, infinite and bool values are a ValueError naming the
parameter and its range, raised before anything is written; the edges of each range work.

Where LangGraph's savers define a behaviour it is kept: ``list(limit=0)`` yields nothing, as
``InMemorySaver`` and ``SqliteSaver`` do (their ``limit=-1`` differs, all rows against none,
and ``SqliteSaver`` fails on a limit beyond 64 bits with the driver's ``OverflowError``: here
both are a ValueError)."""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from support import cfg

from langmem_sqlite import SQLSaver
from langmem_sqlite.checkpoint.saver import MAX_IDLE_DAYS
from langmem_sqlite.checkpoint.storage import MAX_VERSION_COUNTER
from langmem_sqlite.validation import INT64_MAX

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

NAN, INF = math.nan, math.inf

# values no numeric parameter accepts
NOT_NUMBERS = st.sampled_from([True, False, NAN, INF, -INF])


def ints_outside(low: int, high: int) -> st.SearchStrategy[Any]:
    """Integers below ``low`` or above ``high`` (up to far beyond 64 bits), bools, NaN, inf."""
    return st.one_of(
        st.integers(max_value=low - 1),
        st.integers(min_value=high + 1),
        st.integers(min_value=high + 1, max_value=2**200),
        st.floats(),  # an int parameter takes no float at all
        NOT_NUMBERS,
    )


def numbers_outside(low: float, high: float) -> st.SearchStrategy[Any]:
    """Numbers below ``low`` or above ``high``, bools, NaN and infinities."""
    return st.one_of(
        st.integers(max_value=math.ceil(low) - 1),
        st.integers(min_value=math.floor(high) + 1),
        st.floats(max_value=low, exclude_max=True),
        st.floats(min_value=high, exclude_min=True),
        NOT_NUMBERS,
    )


@pytest.fixture
def saver(db_url: str, prefix: str) -> Iterator[SQLSaver]:
    """A saver holding one thread: one checkpoint, one value, one pending write."""
    s = SQLSaver(db_url, table_prefix=prefix)
    stored = put_one(s, "seed")
    s.put_writes(stored, [("v", "written")], "task-1")
    yield s


def put_one(saver: SQLSaver, thread: str, version: Any = None) -> Any:
    ckpt = empty_checkpoint()
    v = saver.get_next_version(None, None) if version is None else version
    ckpt["channel_values"] = {"v": "a value of more than 32 characters, in a row of its own"}
    ckpt["channel_versions"] = {"v": v}
    return saver.put(cfg(thread), ckpt, {"source": "loop", "step": 0}, {"v": v})


def counts(saver: SQLSaver) -> tuple[int, ...]:
    """Rows of each checkpoint table."""
    t = saver.tables
    tables = (t.checkpoints, t.checkpoint_blobs, t.checkpoint_writes, t.checkpoint_threads)
    with saver.db.sync_engine.connect() as conn:
        return tuple(
            int(conn.execute(sa.select(sa.func.count()).select_from(x)).scalar_one())
            for x in tables
        )


def refused(saver: SQLSaver, call: Callable[[], Any], name: str) -> None:
    """``call()`` raises a ValueError naming ``name``, and no row changes."""
    before = counts(saver)
    with pytest.raises(ValueError, match=rf"^{re.escape(name)}: .*(expected|from)") as info:
        call()
    assert str(info.value).startswith(f"{name}: ")
    assert counts(saver) == before


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def alist(saver: SQLSaver, config: Any, **kw: Any) -> list[Any]:
    return [t async for t in saver.alist(config, **kw)]


# -- every parameter, out of its range ---------------------------------------------------------


@pytest.mark.parametrize("api", ["sync", "async"])
@SETTINGS
@given(value=ints_outside(0, INT64_MAX))
def test_list_limit(saver: SQLSaver, api: str, value: Any) -> None:
    if api == "sync":
        refused(saver, lambda: list(saver.list(cfg("seed"), limit=value)), "limit")
        refused(saver, lambda: list(saver.list(None, limit=value)), "limit")
    else:
        refused(saver, lambda: run(alist(saver, cfg("seed"), limit=value)), "limit")


@pytest.mark.parametrize("api", ["sync", "async"])
@SETTINGS
@given(value=ints_outside(1, INT64_MAX))
def test_list_threads_limit(saver: SQLSaver, api: str, value: Any) -> None:
    if api == "sync":
        refused(saver, lambda: saver.list_threads(limit=value), "limit")
        refused(
            saver, lambda: saver.list_threads(metadata={"source": "loop"}, limit=value), "limit"
        )
    else:
        refused(saver, lambda: run(saver.alist_threads(limit=value)), "limit")


@pytest.mark.parametrize("api", ["sync", "async"])
@SETTINGS
@given(value=ints_outside(0, INT64_MAX))
def test_list_threads_offset(saver: SQLSaver, api: str, value: Any) -> None:
    if api == "sync":
        refused(saver, lambda: saver.list_threads(offset=value), "offset")
    else:
        refused(saver, lambda: run(saver.alist_threads(offset=value)), "offset")


@pytest.mark.parametrize("api", ["sync", "async"])
@SETTINGS
@given(value=numbers_outside(0, MAX_IDLE_DAYS))
def test_delete_idle_threads_days(saver: SQLSaver, api: str, value: Any) -> None:
    # a negative number of days would put the cut-off in the future: every thread would go
    if api == "sync":
        refused(saver, lambda: saver.delete_idle_threads(value), "days")
    else:
        refused(saver, lambda: run(saver.adelete_idle_threads(value)), "days")
    assert saver.get_tuple(cfg("seed")) is not None


@SETTINGS
@given(value=ints_outside(0, INT64_MAX), page=ints_outside(1, INT64_MAX))
def test_constructor_sizes(saver: SQLSaver, value: Any, page: Any) -> None:
    db, p = saver.db, saver.tables.prefix
    refused(saver, lambda: SQLSaver(db, table_prefix=p, list_cache_size=value), "list_cache_size")
    refused(saver, lambda: SQLSaver(db, table_prefix=p, page_size=page), "page_size")


@SETTINGS
@given(value=ints_outside(0, MAX_VERSION_COUNTER))
def test_get_next_version_current(saver: SQLSaver, value: Any) -> None:
    if isinstance(value, float) and math.isfinite(value) and 0 <= value <= MAX_VERSION_COUNTER:
        return  # a float counter in range is taken (as int)
    refused(saver, lambda: saver.get_next_version(value, None), "current")


@pytest.mark.parametrize("api", ["sync", "async"])
@SETTINGS
@given(value=NOT_NUMBERS)
def test_put_version(saver: SQLSaver, api: str, value: Any) -> None:
    """A version may be any str, int or float, but not a bool, NaN or an infinity."""
    ckpt = empty_checkpoint()
    ckpt["channel_values"] = {"v": "x" * 40}
    ckpt["channel_versions"] = {"v": value}
    md: Any = {"source": "loop", "step": 1}
    good = {"v": saver.get_next_version(None, None)}
    name = "new_versions['v']"
    if api == "sync":
        refused(saver, lambda: saver.put(cfg("p"), ckpt, md, {"v": value}), name)
        ckpt["channel_versions"] = good
        refused(saver, lambda: saver.put(cfg("p"), ckpt, md, {"v": value}), name)
    else:
        refused(saver, lambda: run(saver.aput(cfg("p"), ckpt, md, {"v": value})), name)


# -- put_writes: a str is not a sequence of pairs -------------------------------------------------


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize(
    "writes", ["abc", "ab", b"ab", {"ch": 1}, [("ch", 1, 2)], ["ab"], [("ch", 1), 3]]
)
def test_put_writes_needs_pairs(saver: SQLSaver, api: str, writes: Any) -> None:
    stored = saver.get_tuple(cfg("seed")).config  # type: ignore[union-attr]
    before = counts(saver)
    with pytest.raises(TypeError, match=r"^writes"):
        if api == "sync":
            saver.put_writes(stored, writes, "task-2")
        else:
            run(saver.aput_writes(stored, writes, "task-2"))
    assert counts(saver) == before
    # pairs given as lists, and any iterable of pairs, are taken
    saver.put_writes(stored, iter([["a", 1], ("b", None)]), "task-3")
    writes_of = {(w[0], w[1]) for w in saver.get_tuple(stored).pending_writes}  # type: ignore[union-attr]
    assert {("task-3", "a"), ("task-3", "b")} <= writes_of


# -- the valid edges ---------------------------------------------------------------------------


async def test_list_limit_edges_as_langgraph(saver: SQLSaver) -> None:
    for _ in range(2):
        put_one(saver, "seed")
    ours = list(saver.list(cfg("seed"), limit=0))
    mem = InMemorySaver()
    put_one(mem, "seed")  # type: ignore[arg-type]
    assert ours == list(mem.list(cfg("seed"), limit=0)) == []  # type: ignore[arg-type]
    assert await alist(saver, cfg("seed"), limit=0) == []
    assert len(list(saver.list(cfg("seed"), limit=1))) == 1
    assert len(list(saver.list(cfg("seed"), limit=INT64_MAX))) == 3
    assert len(list(saver.list(None, limit=INT64_MAX))) == 3
    assert len(await alist(saver, cfg("seed"), limit=INT64_MAX)) == 3
    big = SQLSaver(saver.db, table_prefix=saver.tables.prefix, page_size=INT64_MAX)
    assert len(list(big.list(cfg("seed")))) == 3
    one = SQLSaver(saver.db, table_prefix=saver.tables.prefix, page_size=1, list_cache_size=0)
    assert len(list(one.list(cfg("seed"), limit=2))) == 2
    wide = SQLSaver(saver.db, table_prefix=saver.tables.prefix, list_cache_size=INT64_MAX)
    put_one(wide, "wide")
    assert wide.get_tuple(cfg("wide")) is not None


async def test_list_threads_edges(saver: SQLSaver) -> None:
    put_one(saver, "second")
    assert [t.thread_id for t in saver.list_threads(limit=INT64_MAX)] == ["second", "seed"]
    assert [t.thread_id for t in saver.list_threads(limit=1, offset=0)] == ["second"]
    assert saver.list_threads(offset=INT64_MAX) == []
    assert saver.list_threads(limit=INT64_MAX, offset=INT64_MAX) == []
    assert saver.list_threads(metadata={"source": "loop"}, offset=INT64_MAX) == []
    assert len(saver.list_threads(metadata={"source": "loop"}, limit=INT64_MAX)) == 2
    assert await saver.alist_threads(limit=INT64_MAX, offset=1) == saver.list_threads(offset=1)


async def test_delete_idle_threads_edges(saver: SQLSaver) -> None:
    assert saver.delete_idle_threads(MAX_IDLE_DAYS) == 0
    assert await saver.adelete_idle_threads(float(MAX_IDLE_DAYS)) == 0
    assert saver.delete_idle_threads(1e-12) in (0, 1)  # under a ms: at most the seed goes
    put_one(saver, "other")
    time.sleep(0.01)
    assert saver.delete_idle_threads(0) >= 1
    assert saver.get_tuple(cfg("other")) is None
    assert counts(saver) == (0, 0, 0, 0)


def test_version_edges(saver: SQLSaver) -> None:
    top = saver.get_next_version(MAX_VERSION_COUNTER, None)
    assert top.startswith("999999999999.")
    assert saver.get_next_version(float(MAX_VERSION_COUNTER), None).startswith("999999999999.")
    assert saver.get_next_version(0, None) < top
    # the version after it would have 13 digits and sort below it as text
    with pytest.raises(ValueError, match=r"^current: "):
        saver.get_next_version(top, None)
    # a version is text: an int of any size, negative or a finite float is stored as given
    for version in (2**70, -(2**70), -1.5, 1e300):
        stored = put_one(saver, f"v{version}", version)
        got = saver.get_tuple(stored)
        assert got is not None and got.checkpoint["channel_versions"] == {"v": version}
