"""SQLSaver storage: opaque values, serializers (encryption, strict msgpack), linear growth,
threads and retention, processes, input validation. On SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import hashlib
import math
import os
import secrets
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, MessagesState, StateGraph
from support import cfg
from typing_extensions import TypedDict

from langmem_sqlite import SQLSaver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def put_values(saver: SQLSaver, thread: str, values: dict[str, Any], **md: Any) -> Any:
    ckpt = empty_checkpoint()
    versions = {k: saver.get_next_version(None, None) for k in values}
    ckpt["channel_values"] = dict(values)
    ckpt["channel_versions"] = versions
    return saver.put(cfg(thread), ckpt, {"source": "loop", "step": 0, **md}, versions)


def chat_graph(checkpointer: Any) -> Any:
    def chat(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"reply {n} " + "y" * 280)]}

    g = StateGraph(MessagesState)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    return g.compile(checkpointer=checkpointer)


# -- values are opaque ------------------------------------------------------------------------


def test_values_round_trip_byte_exact(saver: SQLSaver) -> None:
    big = secrets.token_bytes(10 * 1024 * 1024)
    values = {
        "nul": "a\x00b",
        "nan": float("nan"),
        "inf": [float("inf"), float("-inf")],
        "emoji": "héllo ☃ 🚀 中文",
        "big": big,
        "empty_str": "",
        "none_list": [None, {"k\x00": "v\x00"}],
    }
    stored = put_values(saver, "UserA", values, note="x\x00y", ratio=float("nan"))
    got = saver.get_tuple(stored)
    assert got is not None
    cv = got.checkpoint["channel_values"]
    assert cv["nul"] == "a\x00b" and cv["emoji"] == values["emoji"] and cv["empty_str"] == ""
    assert math.isnan(cv["nan"]) and cv["inf"] == [float("inf"), float("-inf")]
    assert cv["big"] == big
    assert cv["none_list"] == [None, {"k\x00": "v\x00"}]
    assert math.isnan(got.metadata["ratio"])


def test_thread_ids_are_case_and_space_sensitive(saver: SQLSaver) -> None:
    for tid in ("UserA", "usera", "usera ", "ÜserA"):
        put_values(saver, tid, {"owner": tid})
    for tid in ("UserA", "usera", "usera ", "ÜserA"):
        got = saver.get_tuple(cfg(tid))
        assert got is not None and got.checkpoint["channel_values"]["owner"] == tid
    assert saver.get_tuple(cfg("USERA")) is None
    assert len(list(saver.list(cfg("usera")))) == 1


class XorCipher:
    """A test cipher (SHA-256 keystream, random nonce): no plaintext survives it."""

    def __init__(self) -> None:
        self.key = secrets.token_bytes(32)

    def _stream(self, nonce: bytes, n: int) -> bytes:
        out, i = b"", 0
        while len(out) < n:
            out += hashlib.sha256(self.key + nonce + i.to_bytes(8, "big")).digest()
            i += 1
        return out[:n]

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = secrets.token_bytes(16)
        return "xor", nonce + bytes(
            a ^ b for a, b in zip(plaintext, self._stream(nonce, len(plaintext)), strict=True)
        )

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        nonce, body = ciphertext[:16], ciphertext[16:]
        return bytes(a ^ b for a, b in zip(body, self._stream(nonce, len(body)), strict=True))


def _raw_dump(saver: SQLSaver) -> bytes:
    """Every cell of every checkpointer table, as bytes (read with a plain connection)."""
    t = saver.tables
    out = b""
    with saver.db.sync_engine.connect() as conn:
        for table in (t.checkpoints, t.checkpoint_blobs, t.checkpoint_writes, t.checkpoint_threads):
            for row in conn.execute(sa.select(table)):
                for cell in row:
                    out += (
                        bytes(cell) if isinstance(cell, bytes | memoryview) else str(cell).encode()
                    )
    return out


def test_encrypted_serializer_leaves_no_plaintext(db_url: str, prefix: str) -> None:
    serde = EncryptedSerializer(XorCipher())
    saver = SQLSaver(db_url, table_prefix=prefix, serde=serde)

    class S(TypedDict):
        messages: list
        secret: str

    def node(state: S) -> dict[str, Any]:
        return {
            "secret": "TOPSECRET-str-channel",
            "messages": [*state["messages"], "TOPSECRET-msg"],
        }

    g = StateGraph(S)
    g.add_node("n", node)
    g.add_edge(START, "n")
    graph = g.compile(checkpointer=saver)
    for _ in range(3):
        graph.invoke({"messages": ["TOPSECRET-input"], "secret": "TOPSECRET-in"}, cfg("enc"))
    saver.put_writes(saver.get_tuple(cfg("enc")).config, [("secret", "TOPSECRET-write")], "t1")
    assert graph.get_state(cfg("enc")).values["secret"] == "TOPSECRET-str-channel"
    dump = _raw_dump(saver)
    assert b"TOPSECRET" not in dump
    assert b"msgpack+xor" in dump  # values did go through the serializer


@dataclass
class Custom:
    name: str


def test_strict_msgpack_and_with_allowlist(saver: SQLSaver) -> None:
    strict = SQLSaver(
        saver.db,
        table_prefix=saver.tables.prefix,
        serde=JsonPlusSerializer(allowed_msgpack_modules=None),
    )
    stored = put_values(strict, "strict", {"obj": Custom("x")})
    blocked = strict.get_tuple(stored).checkpoint["channel_values"]["obj"]
    assert not isinstance(blocked, Custom)  # strict mode refuses to rebuild unknown types
    allowed = strict.with_allowlist([(Custom.__module__, "Custom")])
    assert allowed is not strict and allowed.db is strict.db
    assert allowed.get_tuple(stored).checkpoint["channel_values"]["obj"] == Custom("x")


def test_pickle_rows_are_refused(saver: SQLSaver) -> None:
    stored = put_values(saver, "pickled", {"v": {"k": 1}})
    t = saver.tables.checkpoint_blobs
    with saver.db.sync_engine.begin() as conn:
        conn.execute(sa.update(t).values(type="pickle", value=b"\x80\x04K\x01."))
    with pytest.raises(Exception, match=r"pickle|[Uu]nknown serialization type"):
        saver.get_tuple(stored)


# -- linear storage -------------------------------------------------------------------------


def _stored_bytes(saver: SQLSaver, thread: str) -> int:
    total = 0
    with saver.db.sync_engine.connect() as conn:
        for table, col in (
            (saver.tables.checkpoint_blobs, "value"),
            (saver.tables.checkpoints, "checkpoint"),
            (saver.tables.checkpoint_writes, "value"),
        ):
            q = sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(table.c[col])), 0))
            total += int(conn.execute(q.where(table.c.thread_id == thread)).scalar_one())
    return total


def test_storage_grows_linearly_with_plain_add_messages(saver: SQLSaver) -> None:
    graph = chat_graph(saver)
    sizes = {}
    for turn in range(1, 61):
        graph.invoke({"messages": [HumanMessage(f"question {turn} " + "z" * 150)]}, cfg("lin"))
        if turn in (20, 40, 60):
            sizes[turn] = _stored_bytes(saver, "lin")
    first, second = sizes[40] - sizes[20], sizes[60] - sizes[40]
    assert second < 1.3 * first  # quadratic storage would add ~1.7x more in the third block
    # Each message is stored once in a delta, and in full copies written each time the list
    # doubles (at most ~2x more): blobs stay within 3.5x the serialized messages.
    messages = graph.get_state(cfg("lin")).values["messages"]
    one_copy = len(saver.serde.dumps_typed(messages)[1])
    with saver.db.sync_engine.connect() as conn:
        b = saver.tables.checkpoint_blobs.c
        blob_bytes = conn.execute(
            sa.select(sa.func.sum(sa.func.length(b.value))).where(b.thread_id == "lin")
        ).scalar_one()
    assert blob_bytes < 3.5 * one_copy


def test_fresh_saver_continues_with_deltas(db_url: str, prefix: str) -> None:
    first = SQLSaver(db_url, table_prefix=prefix)
    graph = chat_graph(first)
    for i in range(10):
        graph.invoke({"messages": [HumanMessage(f"q{i}")]}, cfg("cont"))
    # A new process (no cache): get_tuple is enough to store the next turns as deltas.
    second = SQLSaver(db_url, table_prefix=prefix)
    second.lists.forget_threads()
    before = _stored_bytes(second, "cont")
    chat_graph(second).invoke({"messages": [HumanMessage("next")]}, cfg("cont"))
    assert _stored_bytes(second, "cont") - before < 4000
    assert (
        len(
            chat_graph(SQLSaver(db_url, table_prefix=prefix, list_cache_size=0))
            .get_state(cfg("cont"))
            .values["messages"]
        )
        == 22
    )


def test_in_place_mutation_is_not_mistaken_for_stored_value(saver: SQLSaver) -> None:
    def mutate(state: MessagesState) -> dict[str, Any]:
        first = state["messages"][0]
        first.content = "rewritten in place"  # bad practice, but must not corrupt storage
        return {"messages": [first, AIMessage("ok")]}

    g = StateGraph(MessagesState)
    g.add_node("m", mutate)
    g.add_edge(START, "m")
    graph = g.compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage("original", id="h1")]}, cfg("mut"))
    graph.invoke({"messages": [HumanMessage("second", id="h2")]}, cfg("mut"))
    cold = SQLSaver(saver.db, table_prefix=saver.tables.prefix, list_cache_size=0)
    stored = cold.get_tuple(cfg("mut")).checkpoint["channel_values"]["messages"]
    live = graph.get_state(cfg("mut")).values["messages"]
    assert [m.content for m in stored] == [m.content for m in live]
    assert stored[0].content == "rewritten in place"


# -- threads, retention, vacuum -------------------------------------------------------------------


def test_list_threads_counts_order_and_metadata(saver: SQLSaver) -> None:
    graph = chat_graph(saver)
    for tid, user in (("t-a", "u1"), ("t-b", "u2"), ("t-c", "u1")):
        graph.invoke(
            {"messages": [HumanMessage("hi")]},
            {"configurable": {"thread_id": tid, "user_id": user}},
        )
        time.sleep(0.01)
    graph.invoke(
        {"messages": [HumanMessage("again")]},
        {"configurable": {"thread_id": "t-a", "user_id": "u1"}},
    )
    threads = saver.list_threads()
    assert [t.thread_id for t in threads] == ["t-a", "t-c", "t-b"]
    assert {t.thread_id: t.checkpoint_count for t in threads} == {"t-a": 6, "t-b": 3, "t-c": 3}
    assert all(t.created_at <= t.updated_at for t in threads)
    assert [t.thread_id for t in saver.list_threads(metadata={"user_id": "u1"})] == ["t-a", "t-c"]
    assert [
        t.thread_id for t in saver.list_threads(metadata={"user_id": "u1"}, limit=1, offset=1)
    ] == ["t-c"]
    assert saver.list_threads(metadata={"user_id": "nobody"}) == []
    assert [t.metadata["user_id"] for t in saver.list_threads(limit=1)] == ["u1"]
    # list(config=None) spans threads, with metadata filters.
    assert {
        t.config["configurable"]["thread_id"] for t in saver.list(None, filter={"user_id": "u2"})
    } == {"t-b"}
    assert len(list(saver.list(None, filter={"user_id": "u1", "step": -1}))) == 2


async def test_delete_idle_threads(saver: SQLSaver) -> None:
    for tid in ("old", "new"):
        put_values(saver, tid, {"v": tid})
    th = saver.tables.checkpoint_threads
    with saver.db.sync_engine.begin() as conn:
        conn.execute(
            sa.update(th)
            .where(th.c.thread_id == "old")
            .values(updated_at=th.c.updated_at - 3 * 86_400_000)
        )
    assert saver.delete_idle_threads(2) == 1
    assert saver.get_tuple(cfg("old")) is None and saver.get_tuple(cfg("new")) is not None
    assert await saver.adelete_idle_threads(2) == 0
    assert [t.thread_id for t in await saver.alist_threads()] == ["new"]


def test_sqlite_space_is_reclaimed(tmp_path: Any) -> None:
    path = str(tmp_path / "vac.db")
    saver = SQLSaver(path)
    saver.setup()
    for i in range(40):
        put_values(saver, f"big{i}", {"blob": secrets.token_bytes(50_000)})
    full = os.path.getsize(path) + os.path.getsize(path + "-wal")
    for i in range(40):
        saver.delete_thread(f"big{i}")
    saver.vacuum()
    assert os.path.getsize(path) < full * 0.3
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental, set on creation
    con.close()
    saver.vacuum(full=True)


def test_two_processes_share_one_sqlite_file(tmp_path: Any) -> None:
    path = str(tmp_path / "shared.db")
    SQLSaver(path).setup()
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.graph import START, MessagesState, StateGraph
        from langmem_sqlite import SQLSaver
        saver = SQLSaver({path!r})
        g = StateGraph(MessagesState)
        g.add_node("chat", lambda s: {{"messages": [AIMessage("r")]}})
        g.add_edge(START, "chat")
        graph = g.compile(checkpointer=saver)
        me = sys.argv[1]
        for i in range(15):
            graph.invoke({{"messages": [HumanMessage(me + str(i))]}}, {{"configurable": {{"thread_id": me}}}})
            graph.invoke({{"messages": [HumanMessage(me + str(i))]}}, {{"configurable": {{"thread_id": "shared-" + me}}}})
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, name]) for name in ("p1", "p2", "p3")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    saver = SQLSaver(path)
    for name in ("p1", "p2", "p3"):
        assert len(saver.get_tuple(cfg(name)).checkpoint["channel_values"]["messages"]) == 30
        assert len(list(saver.list(cfg("shared-" + name)))) == 45


# -- API details -------------------------------------------------------------------------------


def test_bad_input_raises_typed_errors(saver: SQLSaver) -> None:
    with pytest.raises(ValueError, match="thread_id"):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(ValueError, match="thread_id"):
        saver.get_tuple(cfg("bad\x00id"))
    with pytest.raises(ValueError, match="configurable"):
        saver.get_tuple({})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="checkpoint_ns"):
        saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": 3}})
    with pytest.raises(ValueError, match="limit"):
        list(saver.list(cfg("t"), limit=-1))
    with pytest.raises(TypeError, match="filter"):
        list(saver.list(cfg("t"), filter=["source"]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strategy"):
        saver.prune(["t"], strategy="everything")
    with pytest.raises(TypeError, match="thread_ids"):
        saver.prune("t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="checkpoint_id"):
        saver.put_writes(cfg("t"), [("ch", 1)], "task")
    stored = put_values(saver, "src", {"v": 1})
    with pytest.raises(ValueError, match="target_thread_id"):
        saver.copy_thread("src", "src")
    put_values(saver, "dst", {"v": 2})
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("src", "dst")
    assert saver.get_tuple(stored) is not None
    with pytest.raises(ValueError, match="days"):
        saver.delete_idle_threads(-1)


def test_put_reports_a_wrong_id_channel_or_version_and_writes_nothing(saver: SQLSaver) -> None:
    """What a put stores is checked before anything is written, and the caller's mistake is
    named even where encoding the value would fail first."""

    def put(new_versions: Any = None, **changes: Any) -> None:
        ckpt: Any = empty_checkpoint()
        ckpt["channel_values"] = {"v": "x" * 40}
        ckpt["channel_versions"] = {"v": "1"}
        ckpt.update(changes)
        saver.put(cfg("checked"), ckpt, {"source": "loop", "step": 0}, new_versions or {"v": "1"})

    with pytest.raises(ValueError, match=r"^checkpoint\['id'\]: must not be None"):
        put(id=None)
    with pytest.raises(ValueError, match=r"^checkpoint\['id'\]: must not be None"):
        put(id=None, channel_values={"v": object()})  # not serializable either
    with pytest.raises(ValueError, match=r"^checkpoint\['channel_versions'\] key: not valid"):
        put(channel_versions={"v": "1", "w\ud800": "1"})  # in the record, a lone surrogate
    with pytest.raises(TypeError, match=r"^new_versions key: expected str, got int"):
        put({1: "1"})
    with pytest.raises(ValueError, match=r"^new_versions key: not valid"):
        put({"v\ud800": "1"}, channel_values={"v\ud800": "x"})
    with pytest.raises(TypeError, match=r"^new_versions\['v'\]: expected str, int or float"):
        put({"v": object()})
    assert saver.get_tuple(cfg("checked")) is None
    assert saver.list_threads() == []
    put()
    assert saver.get_tuple(cfg("checked")) is not None


def test_versions_increase_and_differ_across_forks(saver: SQLSaver) -> None:
    v1 = saver.get_next_version(None, None)
    a, b = saver.get_next_version(v1, None), saver.get_next_version(v1, None)
    assert v1 < a and v1 < b and a != b
    assert a.split(".")[0] == b.split(".")[0] == "2".zfill(12)
    assert saver.get_next_version(7, None).startswith("8".zfill(12) + ".")
    assert saver.get_next_version("00000000000000000000000000000041.5", None) > "0" * 10 + "41"
    # and across forked processes writing the same thread (the random bits are reseeded)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next versions, through the pipe
        os.write(write, " ".join(saver.get_next_version(v1, None) for _ in range(20)).encode())
        os._exit(0)
    os.close(write)
    child = set(os.read(read, 4096).decode().split())
    os.waitpid(pid, 0)
    os.close(read)
    mine = {saver.get_next_version(v1, None) for _ in range(20)}
    assert len(child) == 20 and not child & mine


async def test_sync_methods_work_inside_a_running_loop(saver: SQLSaver) -> None:
    stored = put_values(saver, "loop", {"v": 1})  # a sync call on the event loop thread
    saver.put_writes(stored, [("ch", 1)], "task")
    assert [t.config for t in saver.list(cfg("loop"))] == [stored]
    assert (await saver.aget_tuple(stored)).pending_writes == [("task", "ch", 1)]


async def test_from_conn_string_sync_and_async(db_url: str, prefix: str) -> None:
    with SQLSaver.from_conn_string(db_url, table_prefix=prefix) as saver:
        put_values(saver, "fcs", {"v": 1})
    async with SQLSaver.from_conn_string(db_url, table_prefix=prefix) as asaver:
        assert (await asaver.aget_tuple(cfg("fcs"))).checkpoint["channel_values"] == {"v": 1}
        assert (await asaver.aget_delta_channel_history(config=cfg("fcs"), channels=[])) == {}


def test_strict_msgpack_env_with_a_compiled_graph(tmp_path: Any) -> None:
    """``LANGGRAPH_STRICT_MSGPACK=true``: compile() derives the allowlist through
    ``with_allowlist``; the graph reads its own types back, the bare saver refuses them."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from dataclasses import dataclass
        from typing_extensions import TypedDict
        from langgraph.graph import START, StateGraph
        from langmem_sqlite import SQLSaver

        @dataclass
        class Note:
            text: str

        class S(TypedDict):
            note: Note

        g = StateGraph(S)
        g.add_node("n", lambda s: {{"note": Note(s["note"].text + "!")}})
        g.add_edge(START, "n")
        saver = SQLSaver(sys.argv[1])
        graph = g.compile(checkpointer=saver)
        c = {{"configurable": {{"thread_id": "t"}}}}
        graph.invoke({{"note": Note("hi")}}, c)
        graph.invoke({{"note": graph.get_state(c).values["note"]}}, c)
        value = graph.get_state(c).values["note"]
        assert isinstance(value, Note) and value.text == "hi!!", value
        raw = saver.get_tuple(c).checkpoint["channel_values"]["note"]
        assert not isinstance(raw, Note), raw
        print("ok")
        """
    )
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "strict.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


async def test_list_pages_with_filter_limit_and_before(saver: SQLSaver) -> None:
    small = SQLSaver(saver.db, table_prefix=saver.tables.prefix, page_size=2)
    configs = [put_values(small, "pages", {"i": i}, parity=i % 2) for i in range(9)]

    def values(items: Any) -> list[int]:
        return [t.checkpoint["channel_values"]["i"] for t in items]

    assert values(small.list(cfg("pages"))) == list(range(8, -1, -1))
    assert values(small.list(cfg("pages"), filter={"parity": 1})) == [7, 5, 3, 1]
    assert values(small.list(cfg("pages"), filter={"parity": 1}, limit=3)) == [7, 5, 3]
    assert values(small.list(cfg("pages"), filter={"parity": 1}, before=configs[5])) == [3, 1]
    assert values(small.list(cfg("pages"), limit=0)) == []
    assert values([t async for t in small.alist(cfg("pages"), filter={"parity": 0}, limit=4)]) == [
        8,
        6,
        4,
        2,
    ]
    assert values(small.list(None, filter={"parity": 0, "source": "loop"})) == [8, 6, 4, 2, 0]


@pytest.mark.parametrize("encrypted", [False, True])
def test_values_are_compressed_unless_encrypted(db_url: str, prefix: str, encrypted: bool) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"c" * 16) if encrypted else None
    saver = SQLSaver(db_url, table_prefix=prefix, serde=serde)
    text = "the same sentence again and again. " * 200
    put_values(saver, "z", {"doc": text, "tiny": ["x"]})
    got = saver.get_tuple(cfg("z"))
    assert got is not None and got.checkpoint["channel_values"] == {"doc": text, "tiny": ["x"]}
    b = saver.tables.checkpoint_blobs
    with saver.db.sync_engine.connect() as conn:
        rows = {r.type: len(r.value) for r in conn.execute(sa.select(b.c.type, b.c.value))}
    if encrypted:  # ciphertext does not compress: stored as the serializer made it
        assert not any("+z" in t for t in rows)
    else:
        assert rows.get("msgpack+z", 10**9) < len(text) / 10  # compressed ~ 70x
        assert "msgpack" in rows  # ["x"] is too small to be worth it


def test_compressed_rows_read_and_damage_is_refused() -> None:
    import zlib

    from langmem_sqlite.checkpoint import codec

    serde = JsonPlusSerializer()
    value = {"text": "a value long enough to be compressed " * 4}
    type_, data = serde.dumps_typed(value)
    ztype, zdata = codec.dumps(serde, value, "v")
    assert ztype == type_ + "+z" and zdata == zlib.compress(data)
    assert codec.loads(serde, ztype, zdata) == value
    with pytest.raises(ValueError, match="damaged"):
        codec.loads(serde, ztype, zdata[:-3])
    with pytest.raises(ValueError, match="damaged"):
        codec.loads(serde, ztype, zdata + b"trailing")
    with pytest.raises(ValueError, match="damaged"):
        codec.loads(serde, "msgpack+z", b"not zlib")
    # a row that would expand past the cap is refused instead of filling memory
    packed = zlib.compress(b"\x00" * 5000, 9)
    old_cap = codec.MAX_VALUE_BYTES
    codec.MAX_VALUE_BYTES = 4096
    try:
        with pytest.raises(ValueError, match="over 4096 bytes"):
            codec.loads(serde, "msgpack+z", packed)
    finally:
        codec.MAX_VALUE_BYTES = old_cap


def test_a_delta_whose_base_vanished_is_stored_whole(saver: SQLSaver) -> None:
    """Another process pruned the list version this process would extend: the put must not
    write a checkpoint pointing at a missing base."""
    m = [HumanMessage("one", id="1"), AIMessage("two", id="2")]
    first = saver.put(cfg("gone"), _ckpt({"messages": m}, 1), {"source": "loop", "step": 0}, _v(1))
    b = saver.tables.checkpoint_blobs
    with saver.db.sync_engine.begin() as conn:
        assert conn.execute(sa.delete(b).where(b.c.thread_id == "gone")).rowcount == 1
    more = [*m, HumanMessage("three", id="3")]
    second = saver.put(first, _ckpt({"messages": more}, 2), {"source": "loop", "step": 1}, _v(2))
    got = saver.get_tuple(second)
    assert got is not None and got.checkpoint["channel_values"]["messages"] == more
    fresh = SQLSaver(saver.db, table_prefix=saver.tables.prefix, list_cache_size=0)
    got = fresh.get_tuple(second)
    assert got is not None and got.checkpoint["channel_values"]["messages"] == more
    with saver.db.sync_engine.connect() as conn:
        kinds = conn.execute(sa.select(b.c.kind).where(b.c.thread_id == "gone")).scalars().all()
    assert len(kinds) == 1  # the second version, stored whole


LONG = "a value of more than thirty-two characters, #"


def test_scalar_values_read_back_in_every_checkpoint(saver: SQLSaver) -> None:
    """None (LangGraph's ``branch:to:<node>`` triggers, at every step), counters, flags and
    short strings read back as present, not absent (None included); in a later checkpoint
    too, whether their version changed or not, for a fresh saver as for the writer."""
    small = {"branch:to:a": None, "count": 1, "ok": True, "ratio": 0.5, "route": "agent"}
    first = put_values(saver, "small", {**small, "n": LONG + "1"})
    got = saver.get_tuple(first)
    assert got is not None
    assert got.checkpoint["channel_values"] == {**small, "n": LONG + "1"}
    assert got.checkpoint["id"] == first["configurable"]["checkpoint_id"]
    # the next checkpoint changes "n" and "count": the others keep their versions and values
    ckpt = empty_checkpoint()
    ckpt["channel_values"] = {**small, "count": 2, "n": LONG + "2"}
    old = got.checkpoint["channel_versions"]
    new = {ch: saver.get_next_version(old[ch], None) for ch in ("n", "count")}
    ckpt["channel_versions"] = {**old, **new}
    second = saver.put(first, ckpt, {"source": "loop", "step": 1}, new)
    fresh = SQLSaver(saver.db, table_prefix=saver.tables.prefix, list_cache_size=0)
    for s in (saver, fresh):
        got = s.get_tuple(second)
        assert got is not None
        assert got.checkpoint["channel_values"] == {**small, "count": 2, "n": LONG + "2"}
        assert got.checkpoint["channel_versions"] == ckpt["channel_versions"]
        assert [c.checkpoint["channel_values"] for c in s.list(cfg("small"))] == [
            {**small, "count": 2, "n": LONG + "2"},
            {**small, "n": LONG + "1"},
        ]
    for v in (LONG, [1], {"k": 1}, b"x"):
        thread = f"row-{type(v).__name__}-{len(str(v))}"
        put_values(saver, thread, {"v": v})
        got = fresh.get_tuple(cfg(thread))
        assert got is not None and got.checkpoint["channel_values"] == {"v": v}


def test_graph_input_reads_back_from_its_checkpoint(saver: SQLSaver) -> None:
    """The input (``__start__``) is in the input checkpoint only, and replaying from that
    checkpoint sees it."""
    graph = chat_graph(saver)
    for turn in range(2):
        graph.invoke({"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}, cfg("in"))
    fresh = SQLSaver(saver.db, table_prefix=saver.tables.prefix, list_cache_size=0)
    inputs = [c for c in fresh.list(cfg("in")) if c.metadata.get("source") == "input"]
    assert [c.checkpoint["channel_values"]["__start__"] for c in inputs] == [
        {"messages": [HumanMessage("question 1", id="h1")]},
        {"messages": [HumanMessage("question 0", id="h0")]},
    ]
    later = [c for c in fresh.list(cfg("in")) if c.metadata.get("source") == "loop"]
    assert all("__start__" not in c.checkpoint["channel_values"] for c in later)
    # replay from the second input checkpoint: the graph runs its turn again from there
    out = chat_graph(fresh).invoke(None, inputs[0].config)
    assert [m.content for m in out["messages"][:3]] == [
        "question 0",
        out["messages"][1].content,
        "question 1",
    ]
    assert len(out["messages"]) == 4


def test_list_rows_of_the_earlier_format_still_read(saver: SQLSaver) -> None:
    """List rows written before digests were stored with the items (a bare list of items, in a
    delta chain): they read as before, and the next put stores the list whole, with digests,
    after which puts are deltas again."""
    from langmem_sqlite.checkpoint import codec

    graph = chat_graph(saver)
    for turn in range(4):
        graph.invoke({"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}, cfg("old"))
    expected = graph.get_state(cfg("old")).values["messages"]
    b = saver.tables.checkpoint_blobs
    with saver.db.sync_engine.begin() as conn:
        for r in conn.execute(sa.select(b).where(b.c.thread_id == "old")).all():
            payload = codec.loads(saver.serde, r.type, r.value)
            if r.root_version is not None and isinstance(payload, dict):  # keep the items
                type_, data = codec.dumps(saver.serde, payload["items"], "old")
                conn.execute(
                    sa.update(b)
                    .where(b.c.thread_id == "old", b.c.version == r.version)
                    .values(type=type_, value=data)
                )
    fresh = SQLSaver(saver.db, table_prefix=saver.tables.prefix)
    fresh_graph = chat_graph(fresh)
    assert fresh_graph.get_state(cfg("old")).values["messages"] == expected
    assert fresh.lists.get(("old", "", "messages")) is None  # no digests: nothing to build on
    fresh_graph.invoke({"messages": [HumanMessage("next", id="h-next")]}, cfg("old"))
    fresh_graph.invoke({"messages": [HumanMessage("then", id="h-then")]}, cfg("old"))
    lists = sa.select(b.c.kind).where(b.c.thread_id == "old", b.c.root_version.is_not(None))
    with saver.db.sync_engine.connect() as conn:
        kinds = list(conn.execute(lists.order_by(b.c.version)).scalars())
    assert kinds[-4:] == ["v", "d", "d", "d"]  # stored whole once, then deltas
    cold = SQLSaver(saver.db, table_prefix=saver.tables.prefix, list_cache_size=0)
    got = [m.content for m in chat_graph(cold).get_state(cfg("old")).values["messages"]]
    assert got[: len(expected)] == [m.content for m in expected]
    assert len(got) == len(expected) + 4 and got[-4] == "next" and got[-2] == "then"


def _ckpt(values: dict[str, Any], version: int) -> Any:
    ckpt = empty_checkpoint()
    ckpt["id"] = f"00000000-0000-0000-0000-{version:012d}"
    ckpt["channel_values"] = dict(values)
    ckpt["channel_versions"] = _v(version)
    return ckpt


def _v(version: int) -> dict[str, str]:
    return {"messages": f"{version:012d}.aaaaaaaaaaaa"}


def test_list_versions_are_skip_deltas_found_by_digests() -> None:
    """Version d of a list (d = 1, 2, 3... after its full copy) is a delta from version
    d & (d - 1); the prefix it shares is found from the items' serialized bytes, so an item
    replaced, or changed in place however deeply, ends it (storage.ListState.extend)."""
    from langmem_sqlite.checkpoint import storage

    serde = JsonPlusSerializer()
    size = storage.DIGEST_SIZE
    msgs = [
        HumanMessage(content=f"m{i}", id=str(i), additional_kwargs={"k": {}}) for i in range(70)
    ]
    digests = storage.item_digests(serde, msgs)
    assert digests is not None and len(digests) == 70 * size
    state = storage.ListState("v0", "v0", 0, 32, digests[: 32 * size])
    for depth in range(1, 32):
        plan = state.extend(f"v{depth}", digests[: (32 + depth) * size], 10_000)
        assert plan is not None
        base, base_len, state = plan
        assert base == f"v{depth & (depth - 1)}" and base_len == 32 + (depth & (depth - 1))
        assert state.depth == depth and len(state.chain) == bin(depth).count("1")
        assert state.root == "v0" and state.chain[0][:2] == (0, "v0")
    assert state.extend("v32", digests[: 64 * size], 10_000) is None  # doubled: stored whole
    assert state.extend("v32", digests[: 63 * size], 31) is None  # too deep
    assert state.extend("v32", b"", 10_000) is None  # nothing shared
    replaced = list(msgs)
    replaced[5] = HumanMessage(content="m5", id="other")
    assert storage.common_prefix(digests, storage.item_digests(serde, replaced) or b"") == 5
    msgs[7].additional_kwargs["k"]["deep"] = [1]  # changed in place, two levels down
    changed = storage.item_digests(serde, msgs) or b""
    assert storage.common_prefix(digests, changed) == 7
    plan = state.extend("v32", changed[: 63 * size], 10_000)
    assert plan is not None and plan[:2] == ("v0", 7)  # the delta starts at the changed item
    # encrypted values differ at every call: digests come from the serializer inside
    enc = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16)
    assert storage.fingerprint_serde(enc) is enc.serde
    assert storage.item_digests(storage.fingerprint_serde(enc), msgs) == changed


class CountingSerde(JsonPlusSerializer):
    """Counts the values it decodes."""

    def __init__(self) -> None:
        super().__init__()
        self.decoded = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.decoded += 1
        return super().loads_typed(data)


def test_a_read_decodes_a_logarithmic_number_of_rows(db_url: str, prefix: str) -> None:
    """At turn 60 of a chat (120 messages, a full copy at 64 of them, deltas since): a cold
    get_tuple decodes the record, the metadata and at most 1 + log2(56) rows of the list."""
    graph = chat_graph(SQLSaver(db_url, table_prefix=prefix))
    for turn in range(60):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, cfg("log"))
    serde = CountingSerde()
    cold = SQLSaver(db_url, table_prefix=prefix, serde=serde, list_cache_size=0)
    got = cold.get_tuple(cfg("log"))
    assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == 120
    assert serde.decoded - len(got.pending_writes) <= 2 + 1 + 6
    assert (
        got.checkpoint["channel_values"]["messages"]
        == graph.get_state(cfg("log")).values["messages"]
    )
