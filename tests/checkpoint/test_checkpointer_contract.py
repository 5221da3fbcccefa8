"""SQLSaver's contract details, each compared with LangGraph's own savers where they define
it: metadata round trips, metadata filters of any key, DeltaChannel seeds of any value,
``from_conn_string``'s clean-up, the encrypted saver's refusal of rows not written under its
key, and MariaDB's log. On SQLite, PostgreSQL and MariaDB, sync and async."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
import sqlalchemy as sa
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import START, StateGraph
from support import POSTGRES_URL, cfg
from typing_extensions import TypedDict

from langmem_sqlite import SQLSaver
from langmem_sqlite.checkpoint import CheckpointEncryptionError


def put_values(saver: BaseCheckpointSaver, thread: str, values: dict[str, Any], **md: Any) -> Any:
    ckpt = empty_checkpoint()
    versions = {k: saver.get_next_version(None, None) for k in values}
    ckpt["channel_values"] = dict(values)
    ckpt["channel_versions"] = versions
    return saver.put(cfg(thread), ckpt, {"source": "loop", "step": 0, **md}, versions)


# -- metadata ---------------------------------------------------------------------------------

METADATA = {
    "writes": {"foo": "bar"},
    "source": "loop",
    "step": 3,
    "parents": {},
    "nested": {"a": [1, {"b": None}], "é": "ü"},
    "ratio": 1.5,
    "flag": False,
}


async def test_metadata_round_trips_exactly_like_inmemory(saver: SQLSaver) -> None:
    got = []
    for cp in (saver, InMemorySaver()):
        config = cp.put(cfg("md"), empty_checkpoint(), dict(METADATA), {})
        got.append(cp.get_tuple(config).metadata)  # type: ignore[union-attr]
        for flt in ({"writes": {"foo": "bar"}}, {"nested": METADATA["nested"]}, {"flag": False}):
            assert len(list(cp.list(cfg("md"), filter=flt))) == 1, flt
            assert len(list(cp.list(None, filter=flt))) == 1, flt
        assert list(cp.list(None, filter={"writes": {"foo": "baz"}})) == []
    assert got[0] == got[1] == METADATA
    assert (await saver.aget_tuple(cfg("md"))).metadata == METADATA  # type: ignore[union-attr]
    assert len([t async for t in saver.alist(None, filter={"writes": {"foo": "bar"}})]) == 1


KEYS = [
    "ключ",
    "日本語",
    'a"b',
    "a\\b",
    "a.b",
    "a-b",
    "a b",
    "$",
    "$.a",
    "a'b",
    "[0]",
    "a[0]",
    "*",
    '"',
    "\\",
    "",
    'x") OR 1=1 --',
    "x' OR '1'='1",
    "🚀",
    'a\\"b',
]


def _value(i: int) -> str:
    """A value as odd as the keys: another key's spelling, and its number."""
    return f"{KEYS[-1 - i]} {i}"


def _filter_saver_threads(cp: BaseCheckpointSaver) -> None:
    for i, key in enumerate(KEYS):
        put_values(cp, f"t{i}", {"v": i}, **{key: _value(i), key + "#n": i})
    put_values(cp, "dotted", {"v": -1}, **{"a.b": "deep"})
    put_values(cp, "nested", {"v": -2}, a={"b": "deep"})


def _threads(items: Any) -> set[str]:
    return {t.config["configurable"]["thread_id"] for t in items}


async def test_metadata_filters_match_keys_of_any_spelling(saver: SQLSaver) -> None:
    memory = InMemorySaver()
    for cp in (saver, memory):
        _filter_saver_threads(cp)
    for i, key in enumerate(KEYS):
        for flt in ({key: _value(i)}, {key + "#n": i}, {key: _value(i), key + "#n": i}):
            expected = _threads(memory.list(None, filter=flt))
            assert expected == {f"t{i}"}
            assert _threads(saver.list(None, filter=flt)) == expected, key
            assert _threads([t async for t in saver.alist(None, filter=flt)]) == expected, key
            assert [t.thread_id for t in saver.list_threads(metadata=flt)] == [f"t{i}"], key
            assert [t.thread_id for t in await saver.alist_threads(metadata=flt)] == [f"t{i}"]
        assert list(saver.list(None, filter={key: _value(i) + " "})) == []
        assert saver.list_threads(metadata={key: _value(i).upper() + "x"}) == []
    # a key is a key, not a JSON path
    assert _threads(saver.list(None, filter={"a.b": "deep"})) == {"dotted"}
    assert _threads(saver.list(None, filter={"a": {"b": "deep"}})) == {"nested"}
    assert [t.thread_id for t in saver.list_threads(metadata={"a.b": "deep"})] == ["dotted"]
    with pytest.raises(ValueError, match="scalar metadata"):
        saver.list_threads(metadata={"a": {"b": "deep"}})


# -- DeltaChannel seeds ---------------------------------------------------------------------------

SEEDS = [42, 0, True, False, "short", "a string of more than thirty-two characters", 1.5, None]


def _seed_history(cp: BaseCheckpointSaver, thread: str, seed: Any) -> Any:
    """A delta channel whose oldest value (``seed``, a plain value from before it was a delta
    channel) is followed by writes: seed at step 0, writes w0..w2, no snapshot since."""
    config = cp.put(cfg(thread), empty_checkpoint(), {"source": "input", "step": -1}, {})
    cp.put_writes(config, [("d", "w0")], "task-0")
    version = None
    for step in range(3):
        version = cp.get_next_version(version, None)
        ckpt = empty_checkpoint()
        ckpt["channel_versions"] = {"d": version}
        metadata: dict[str, Any] = {"source": "loop", "step": step}
        if step == 0:
            ckpt["channel_values"] = {"d": seed}
        else:
            metadata["counters_since_delta_snapshot"] = {"d": [step, step]}
        config = cp.put(config, ckpt, metadata, {"d": version})
        cp.put_writes(config, [("d", f"w{step + 1}")], f"task-{step + 1}")
    last = empty_checkpoint()
    last["channel_versions"] = {"d": cp.get_next_version(version, None)}
    metadata = {"source": "loop", "step": 3, "counters_since_delta_snapshot": {"d": [3, 3]}}
    return cp.put(config, last, metadata, {"d": last["channel_versions"]["d"]})


@pytest.mark.parametrize("seed", SEEDS, ids=repr)
async def test_delta_seed_matches_inmemory(saver: SQLSaver, seed: Any) -> None:
    memory = InMemorySaver()
    want = memory.get_delta_channel_history(config=_seed_history(memory, "s", seed), channels=["d"])
    assert want["d"]["seed"] == seed and type(want["d"]["seed"]) is type(seed)
    assert [w[2] for w in want["d"]["writes"]] == ["w1", "w2", "w3"]
    target = _seed_history(saver, "s", seed)
    got = saver.get_delta_channel_history(config=target, channels=["d"])
    assert got == want and type(got["d"]["seed"]) is type(seed)
    assert await saver.aget_delta_channel_history(config=target, channels=["d"]) == want
    saver.prune(["s"])  # keep_latest keeps the ancestors back to that seed
    assert saver.get_delta_channel_history(config=target, channels=["d"]) == want


class Before(TypedDict):
    total: int


class After(TypedDict):
    total: Annotated[int, DeltaChannel(lambda s, ws: s + sum(ws), int)]


def _counter(state_type: Any, checkpointer: BaseCheckpointSaver) -> Any:
    g = StateGraph(state_type)
    g.add_node("add", lambda s: {"total": 2} if state_type is After else {"total": 42})
    g.add_edge(START, "add")
    return g.compile(checkpointer=checkpointer)


def test_graph_moved_to_a_delta_channel_reads_like_inmemory(saver: SQLSaver) -> None:
    """A thread written with a plain ``total: int`` (last value 42), then
    continued by the same graph with ``total`` as a DeltaChannel of sums: 42 is the seed."""
    values = []
    for cp in (saver, InMemorySaver()):
        _counter(Before, cp).invoke({"total": 40}, cfg("moved"))
        graph = _counter(After, cp)
        graph.invoke({"total": 1}, cfg("moved"))
        graph.invoke({"total": 1}, cfg("moved"))
        values.append([s.values.get("total") for s in graph.get_state_history(cfg("moved"))])
    assert values[0] == values[1]
    assert values[0][0] == 42 + 1 + 2 + 1 + 2


# -- from_conn_string -------------------------------------------------------------------------


def _open_connections(backend: str, admin: Any, database: str) -> int:
    if backend == "postgres":  # client connections (not an autovacuum worker)
        q = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
    else:
        q = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE DB = %s AND ID <> CONNECTION_ID()"
    with admin.cursor() as cur:
        cur.execute(q, (database,))
        return int(cur.fetchone()[0])


@pytest.fixture
def scratch_url(backend: str, db_url: str, tmp_path: Any) -> Iterator[tuple[str, Any]]:
    """A database of this test's own (a SQLite file; on the servers, a new database), and an
    admin connection to check who is connected to it."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/scratch.db", None
        return
    if backend == "pgbouncer":  # it keeps server connections of its own, whatever we close
        pytest.skip("a database behind PgBouncer is closed by PgBouncer, not by its clients")
    name = f"lmck_{uuid.uuid4().hex[:10]}"
    url = sa.make_url(db_url)
    if backend == "postgres":
        import psycopg

        admin: Any = psycopg.connect(POSTGRES_URL, autocommit=True)
        admin.execute(f'CREATE DATABASE "{name}"')
    else:
        import pymysql

        admin = pymysql.connect(
            host=url.host, port=url.port or 3306, user=url.username, autocommit=True
        )
        admin.cursor().execute(f"CREATE DATABASE `{name}`")
    try:
        yield url.set(database=name).render_as_string(hide_password=False), admin
    finally:
        if backend == "postgres":
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        else:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def _released(backend: str, url: str, admin: Any) -> None:
    """Nothing is connected to the database any more: it can be dropped (or, for a SQLite
    file, switched out of WAL mode, which needs the only connection)."""
    database = sa.make_url(url).database
    assert database
    if backend == "sqlite":
        con = sqlite3.connect(database, timeout=0)
        assert con.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
        con.close()
        return
    # a closed connection's server process may take a moment to go: wait up to 5 s, as
    # PostgreSQL's DROP DATABASE itself does
    deadline = time.monotonic() + 5
    while _open_connections(backend, admin, database) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _open_connections(backend, admin, database) == 0
    if backend == "postgres":
        admin.execute(f'DROP DATABASE "{database}"')  # fails while anyone is connected


def test_from_conn_string_closes_what_it_opened(backend: str, scratch_url: Any) -> None:
    url, admin = scratch_url
    with SQLSaver.from_conn_string(url) as saver:
        config = put_values(saver, "fcs", {"v": [1, 2]})
        assert saver.get_tuple(config) is not None
    _released(backend, url, admin)


async def test_async_from_conn_string_closes_what_it_opened(backend: str, scratch_url: Any) -> None:
    url, admin = scratch_url
    async with SQLSaver.from_conn_string(url) as saver:
        ckpt = empty_checkpoint()
        config = await saver.aput(cfg("afcs"), ckpt, {"source": "loop", "step": 0}, {})
        assert await saver.aget_tuple(config) is not None
        assert [t async for t in saver.alist(cfg("afcs"))]
    _released(backend, url, admin)


def test_from_conn_string_leaves_a_callers_engine_alone(db_url: str, prefix: str) -> None:
    engine = sa.create_engine(db_url.replace("mariadb://", "mariadb+pymysql://"))
    try:
        with SQLSaver.from_conn_string(engine, table_prefix=prefix) as saver:
            config = put_values(saver, "own", {"v": 1})
            saver.db.sync_engine.connect().close()  # a connection back in the caller's pool
        assert engine.pool.checkedin() >= 1  # type: ignore[attr-defined]
        assert SQLSaver(engine, table_prefix=prefix).get_tuple(config) is not None
    finally:
        engine.dispose()


# -- the encrypted saver refuses rows not written under its key ---------------------------------


def _aes(key: bytes) -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=key)


async def test_encrypted_saver_refuses_rows_not_written_under_its_key(
    db_url: str, prefix: str
) -> None:
    key = secrets.token_bytes(16)
    plain = SQLSaver(db_url, table_prefix=prefix)
    enc = SQLSaver(db_url, table_prefix=prefix, serde=_aes(key))
    assert enc.encrypted_only and not plain.encrypted_only
    forged = put_values(plain, "forged", {"messages": ["injected"], "n": 1})
    with pytest.raises(CheckpointEncryptionError, match="unencrypted"):
        enc.get_tuple(forged)
    with pytest.raises(CheckpointEncryptionError):
        list(enc.list(cfg("forged")))
    with pytest.raises(CheckpointEncryptionError):
        await enc.aget_tuple(forged)
    child = empty_checkpoint()
    child["channel_versions"] = {"messages": plain.get_next_version(None, None)}
    child_config = plain.put(forged, child, {"source": "loop", "step": 1}, {})
    with pytest.raises(CheckpointEncryptionError):  # its seed is the forged value
        enc.get_delta_channel_history(config=child_config, channels=["messages"])
    # a genuine thread with one forged pending write
    mine = put_values(enc, "mine", {"messages": ["mine"]})
    assert enc.get_tuple(mine).checkpoint["channel_values"] == {"messages": ["mine"]}  # type: ignore[union-attr]
    plain.put_writes(mine, [("messages", ["injected"])], "intruder")
    with pytest.raises(CheckpointEncryptionError):
        enc.get_tuple(mine)
    # another key: refused too
    other = SQLSaver(db_url, table_prefix=prefix, serde=_aes(secrets.token_bytes(16)))
    ours = put_values(enc, "ours", {"messages": ["ours"]})
    with pytest.raises(CheckpointEncryptionError, match="cannot be decrypted"):
        other.get_tuple(ours)
    # the opt-out reads rows written before encryption was turned on
    lenient = SQLSaver(db_url, table_prefix=prefix, serde=_aes(key), encrypted_only=False)
    got = lenient.get_tuple(forged)
    assert got is not None and got.checkpoint["channel_values"]["messages"] == ["injected"]
    assert enc.with_allowlist([("x", "Y")]).encrypted_only  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="encrypted_only"):
        SQLSaver(db_url, table_prefix=prefix, encrypted_only=True)


def test_a_blob_row_replaced_in_plaintext_is_refused(db_url: str, prefix: str) -> None:
    enc = SQLSaver(db_url, table_prefix=prefix, serde=_aes(secrets.token_bytes(16)))
    config = put_values(enc, "t", {"messages": ["a", "b"]})
    type_, data = enc.serde.serde.dumps_typed(["forged"])  # type: ignore[attr-defined]
    b = enc.tables.checkpoint_blobs
    with enc.db.sync_engine.begin() as conn:
        conn.execute(sa.update(b).values(type=type_, value=data, kind="v", root_version=None))
    with pytest.raises(CheckpointEncryptionError):
        enc.get_tuple(config)


# -- MariaDB: expected duplicates are not warnings ------------------------------------------------


async def test_duplicate_writes_log_nothing(
    saver: SQLSaver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    big_first, big_second = os.urandom(5 * 1024 * 1024), os.urandom(5 * 1024 * 1024)
    config = put_values(saver, "dup", {"messages": ["m1", "m2"]})
    for value, big in (("first", big_first), ("second", big_second)):
        await saver.aput_writes(config, [("a", value), ("b", [value]), ("big", big)], "t1")
        saver.put_writes(config, [("a", value), ("b", [value]), ("big", big)], "t1")
        await saver.aput_writes(config, [("__error__", value)], "t2")  # replaced
    ckpt = saver.get_tuple(config).checkpoint  # type: ignore[union-attr]
    await saver.aput(cfg("dup"), ckpt, {"source": "loop", "step": 0}, ckpt["channel_versions"])
    saver.put(cfg("dup"), ckpt, {"source": "loop", "step": 0}, ckpt["channel_versions"])
    await asyncio.sleep(0)
    got = saver.get_tuple(config)
    assert got is not None
    assert got.pending_writes == [
        ("t1", "a", "first"),
        ("t1", "b", ["first"]),
        ("t1", "big", big_first),
        ("t2", "__error__", "second"),
    ]
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not noisy, [r.getMessage() for r in noisy]


# -- the anchors' metadata keys: from config, as InMemorySaver ----------------------------------


def test_config_metadata_is_merged_as_inmemory(saver: SQLSaver) -> None:
    got = []
    for cp in (saver, InMemorySaver()):
        config = {
            "configurable": {"thread_id": "cm", "checkpoint_ns": "", "user_id": "u1", "__x": 1},
            "metadata": {"tenant": "acme\x00", "n": 3, "obj": {"no": 1}},
        }
        stored = cp.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        got.append(cp.get_tuple(stored).metadata)  # type: ignore[union-attr]
    assert got[0] == got[1]
    assert got[0]["tenant"] == "acme" and got[0]["user_id"] == "u1" and "__x" not in got[0]
