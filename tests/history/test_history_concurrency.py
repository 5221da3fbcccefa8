"""Many writers at once: nothing lost, nothing duplicated, no lock errors reach the caller."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage

from langmem_sqlite import ConversationStore

TURNS = 40


def _write_turns(url: str, prefix: str, writer: str, sessions: int) -> None:
    store = ConversationStore(url, table_prefix=prefix)
    for i in range(TURNS):
        sid = f"s{i % sessions}"
        store.add_messages(
            sid,
            [HumanMessage(f"{writer}:{i}:q"), AIMessage(f"{writer}:{i}:a")],
            user_id="u",
        )
        store.get_messages(sid, user_id="u", limit=4)


def _check(store: ConversationStore, writers: list[str], sessions: int) -> None:
    seen: Counter[str] = Counter()
    for s in range(sessions):
        msgs = store.get_messages(f"s{s}", user_id="u")
        contents = [str(m.content) for m in msgs]
        # every turn is stored whole and adjacent: question immediately followed by its answer
        for q, a in zip(contents[::2], contents[1::2], strict=True):
            assert q.endswith(":q") and a == q[:-1] + "a"
        seen.update(contents)
        info = store.get_session(f"s{s}", user_id="u")
        assert info is not None and info.message_count == len(msgs)
    expected = {f"{w}:{i}:{k}" for w in writers for i in range(TURNS) for k in "qa"}
    assert set(seen) == expected
    assert all(n == 1 for n in seen.values())  # no duplicates
    with store.db.sync_engine.connect() as conn:
        m = store.tables.messages.c
        rows = conn.execute(sa.select(m.session_pk, m.seq)).all()
    by_session: dict[int, list[int]] = {}
    for pk, seq in rows:
        by_session.setdefault(pk, []).append(seq)
    for seqs in by_session.values():
        assert sorted(seqs) == list(range(len(seqs)))  # positions contiguous, none reused


def test_sqlite_16_threads_and_4_processes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    prefix = "c_"
    ConversationStore(url, table_prefix=prefix).list_sessions()  # schema in place
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_turns, args=(url, prefix, f"p{i}", 4)) for i in range(4)]
    errors: list[BaseException] = []

    def thread_main(name: str) -> None:
        try:
            _write_turns(url, prefix, name, 4)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=thread_main, args=(f"t{i}",)) for i in range(16)]
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(300)
    assert errors == []
    assert [p.exitcode for p in procs] == [0] * 4
    writers = [f"t{i}" for i in range(16)] + [f"p{i}" for i in range(4)]
    _check(ConversationStore(url, table_prefix=prefix), writers, 4)


def _started_together(n: int, work: Callable[[str], None]) -> None:
    """``work("w0")`` ... ``work(f"w{n-1}")`` in ``n`` threads released at once; no errors."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(name: str) -> None:
        try:
            start.wait()
            work(name)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(f"w{i}",)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_threads_race_to_create_one_session(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    store.list_sessions()
    _started_together(8, lambda name: _write_turns(db_url, prefix, name, 1))
    _check(store, [f"w{i}" for i in range(8)], 1)


async def test_async_tasks_concurrently(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    await store.alist_sessions()

    async def task(name: str) -> None:
        for i in range(TURNS):
            await store.aadd_messages(
                f"s{i % 2}",
                [HumanMessage(f"{name}:{i}:q"), AIMessage(f"{name}:{i}:a")],
                user_id="u",
            )

    await asyncio.gather(*(task(f"a{i}") for i in range(16)))
    _check(store, [f"a{i}" for i in range(16)], 2)


# -- skip_existing: the check and the insert are one atomic step ---------------------------------

ROUNDS = 30


def _graph_node_rounds(url: str, prefix: str, writer: str, rounds: int, start: Any = None) -> None:
    """What a LangGraph node does with ``skip_existing=True``: every writer sends the whole
    state (the same ids) plus its own new message, round after round (all writers released at
    once by ``start``, a barrier, when given)."""
    store = ConversationStore(url, table_prefix=prefix)
    store.count_messages("warm-up", user_id="u")  # engine and schema ready before the race
    if start is not None:
        start.wait()
    for r in range(rounds):
        state = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(r + 1)]
        store.add_messages(
            "s", [*state, AIMessage(f"{writer}:{r}")], user_id="u", skip_existing=True
        )


def _check_once_each(store: ConversationStore, rounds: int, writers: list[str]) -> None:
    msgs = store.get_messages("s", user_id="u")
    shared = [m.id for m in msgs if m.id is not None]
    assert sorted(shared, key=lambda i: int(i[1:])) == [f"h{i}" for i in range(rounds)]
    # the shared ids keep their order; each writer's own messages are all there, in order
    assert shared == [f"h{i}" for i in range(rounds)]
    for w in writers:
        mine = [str(m.content) for m in msgs if m.id is None and str(m.content).startswith(w + ":")]
        assert mine == [f"{w}:{r}" for r in range(rounds)]
    assert len(msgs) == rounds * (1 + len(writers))
    info = store.get_session("s", user_id="u")
    assert info is not None and info.message_count == len(msgs)
    with store.db.sync_engine.connect() as conn:
        m = store.tables.messages.c
        seqs = conn.execute(sa.select(m.seq).order_by(m.seq)).scalars().all()
    assert seqs == list(range(len(msgs)))


def test_skip_existing_from_8_threads_stores_each_id_once(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    store.list_sessions()
    _started_together(8, lambda name: _graph_node_rounds(db_url, prefix, name, ROUNDS))
    _check_once_each(store, ROUNDS, [f"w{i}" for i in range(8)])


def test_skip_existing_from_8_processes_stores_each_id_once(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    store.list_sessions()
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(8)
    procs = [
        ctx.Process(target=_graph_node_rounds, args=(db_url, prefix, f"p{i}", ROUNDS, start))
        for i in range(8)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0] * 8
    _check_once_each(store, ROUNDS, [f"p{i}" for i in range(8)])


async def test_skip_existing_from_8_async_tasks_stores_each_id_once(
    db_url: str, prefix: str
) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    await store.alist_sessions()

    async def task(name: str) -> None:
        for r in range(ROUNDS):
            state = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(r + 1)]
            await store.aadd_messages(
                "s", [*state, AIMessage(f"{name}:{r}")], user_id="u", skip_existing=True
            )

    await asyncio.gather(*(task(f"a{i}") for i in range(8)))
    _check_once_each(store, ROUNDS, [f"a{i}" for i in range(8)])
