"""Server faults on private, throwaway PostgreSQL and MariaDB servers (never the shared ones).

Each test starts its own server on a free loopback port in a temporary directory, then restarts
it, or kills every connection to it, while writers run: every acknowledged write is stored once,
the run completes, and with the server down an operation fails with a clear error within a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from support import HARDENING_FULL

from langmem_sqlite import ConversationStore, SQLSaver, SQLStore
from langmem_sqlite.engine import DatabaseUnavailableError, get_database

FAULTS = 6 if HARDENING_FULL else 2
PG_BIN = "/usr/local/bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def _wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


@dataclass
class Server:
    """A private server: ``url``, ``stop()``, ``start()``, ``restart()``, ``kill_connections()``."""

    url: str
    stop: Callable[[], None]
    start: Callable[[], None]
    kill_connections: Callable[[], int]
    crash: Callable[[], None]
    """Kill the server and its processes with SIGKILL (it recovers at the next start)."""

    def restart(self) -> None:
        self.stop()
        self.start()


def _sigkill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and its child processes (PostgreSQL's backends outlive a killed
    postmaster for a moment, and would hold its shared memory)."""
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    children.append(int(entry))
    for p in [pid, *children]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in children):
        time.sleep(0.05)


def _kill_all(url: str, list_sql: str, kill: Callable[[Any], str]) -> int:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            ids = list(conn.execute(sa.text(list_sql)).scalars())
            for i in ids:
                with contextlib.suppress(sa.exc.DBAPIError):
                    conn.execute(sa.text(kill(i)))
        return len(ids)
    finally:
        engine.dispose()


@contextlib.contextmanager
def _postgres() -> Iterator[Server]:
    if not os.path.exists(f"{PG_BIN}/pg_ctl"):
        pytest.skip("no PostgreSQL binaries to start a private server")
    root = tempfile.mkdtemp(prefix="lmpg")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    data, port = f"{root}/data", _free_port()
    subprocess.run(
        _as_postgres(
            [f"{PG_BIN}/initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"]
        ),
        check=True,
        capture_output=True,
    )
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"

    def ctl(*args: str) -> None:
        cmd = [f"{PG_BIN}/pg_ctl", "-D", data, "-l", f"{root}/log", "-w", *args]
        subprocess.run(_as_postgres(cmd), check=True, capture_output=True)

    ctl("-o", opts, "start")
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def crash() -> None:
        with open(f"{data}/postmaster.pid") as f:
            pid = int(f.readline())
        _sigkill_tree(pid)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.waitpid(pid, 0)

    server = Server(
        url,
        stop=lambda: ctl("-m", "fast", "stop"),
        start=lambda: ctl("-o", opts, "start"),
        kill_connections=lambda: _kill_all(
            url.replace("postgresql://", "postgresql+psycopg://"),
            "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'",
            lambda pid: f"SELECT pg_terminate_backend({int(pid)})",
        ),
        crash=crash,
    )
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            ctl("-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _mariadb() -> Iterator[Server]:
    binary = shutil.which("mariadbd") or shutil.which("mysqld")
    if binary is None:
        pytest.skip("no mariadbd binary to start a private server")
    root = tempfile.mkdtemp(prefix="lmmdb")
    data, port = f"{root}/data", _free_port()
    os.makedirs(data)
    args = [
        binary,
        "--no-defaults",
        f"--datadir={data}",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        f"--socket={root}/sock",
        f"--pid-file={root}/pid",
        "--user=root",
        "--skip-grant-tables",
        "--skip-log-bin",
        "--innodb-buffer-pool-size=32M",
        "--innodb-flush-log-at-trx-commit=2",
        "--max-connections=300",
    ]
    proc: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        with open(f"{root}/log", "ab") as log:
            proc.append(subprocess.Popen(args, stdout=log, stderr=log))
        _wait_port(port)

    def stop() -> None:
        p = proc.pop()
        p.terminate()
        p.wait(60)

    crashed: list[bool] = []

    def crash() -> None:
        if not crashed:
            # a data directory made moments ago is not on disk yet (InnoDB would find its
            # system tablespace zeroed after a SIGKILL): one clean restart writes it
            stop()
            start()
            crashed.append(True)
        p = proc.pop()
        p.kill()
        p.wait(60)

    start()
    admin = sa.create_engine(
        f"mariadb+pymysql://root@127.0.0.1:{port}/", poolclass=sa.pool.NullPool
    )
    with admin.begin() as conn:
        conn.execute(sa.text("CREATE DATABASE IF NOT EXISTS test"))
    admin.dispose()
    url = f"mariadb://root@127.0.0.1:{port}/test"
    server = Server(
        url,
        stop=stop,
        start=start,
        kill_connections=lambda: _kill_all(
            url.replace("mariadb://", "mariadb+pymysql://"),
            "SELECT id FROM information_schema.processlist WHERE id <> CONNECTION_ID() "
            "AND command <> 'Daemon'",
            lambda cid: f"KILL CONNECTION {int(cid)}",
        ),
        crash=crash,
    )
    try:
        yield server
    finally:
        for p in proc:
            p.kill()
            p.wait()
        shutil.rmtree(root, ignore_errors=True)


SERVERS = {"postgres": _postgres, "mariadb": _mariadb}


@pytest.fixture(params=sorted(SERVERS))
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    with SERVERS[request.param]() as s:
        yield s


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _checkpoint(saver: SQLSaver, i: int) -> tuple[Any, dict[str, Any]]:
    ckpt = empty_checkpoint()
    version = saver.get_next_version(None, None)
    ckpt["channel_values"] = {"x": i}
    ckpt["channel_versions"] = {"x": version}
    return ckpt, {"x": version}


@dataclass
class _Writers:
    """Threads writing numbered items, recording what was acknowledged: chat messages (one
    session each), and, when given, store items and checkpoints (one namespace or thread each).
    """

    store: ConversationStore
    facts: SQLStore | None = None
    saver: SQLSaver | None = None
    n: int = 4
    acked: dict[str, list[Any]] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def _write(self, name: str, i: int) -> Any:
        if name.startswith("h"):
            self.store.add_messages(name, [HumanMessage(str(i))])
            return i
        if name.startswith("s"):
            assert self.facts is not None
            self.facts.put((name,), str(i), {"i": i})
            return i
        assert self.saver is not None
        ckpt, versions = _checkpoint(self.saver, i)
        self.saver.put(_config(name), ckpt, {"step": i}, versions)
        return ckpt["id"]

    def run(self, name: str) -> None:
        self.acked[name] = []
        i = 0
        while not self.stop.is_set():
            try:
                done = self._write(name, i)
            except Exception as e:
                self.errors.append(e)
                return
            self.acked[name].append(done)
            i += 1

    def __enter__(self) -> _Writers:
        names = [f"h{k}" for k in range(self.n)]
        if self.facts is not None:
            names += ["s0", "s1"]
        if self.saver is not None:
            names += ["c0", "c1"]
        self.threads = [
            threading.Thread(target=self.run, args=(name,), daemon=True) for name in names
        ]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def check(self) -> None:
        assert not self.errors, f"a fault reached the caller: {self.errors[0]!r}"
        for name, acked in self.acked.items():
            if name.startswith("h"):
                stored = [int(m.content) for m in self.store.get_messages(name)]  # type: ignore[arg-type]
                # every acknowledged write, in order, once (a last unacknowledged one may be
                # there: its COMMIT may have landed before the connection died)
                assert stored[: len(acked)] == acked, f"{name}: lost, reordered or repeated writes"
                assert len(stored) <= len(acked) + 1, f"{name}: repeated writes {stored}"
            elif name.startswith("s"):
                assert self.facts is not None
                items = {it.key: it.value for it in self.facts.search((name,), limit=10**6)}
                assert all(items.get(str(i)) == {"i": i} for i in acked), f"{name}: lost items"
            else:
                assert self.saver is not None
                listed = self.saver.list(_config(name))
                ids = {t.config["configurable"]["checkpoint_id"] for t in listed}
                assert set(acked) <= ids, f"{name}: lost checkpoints"
                latest = self.saver.get_tuple(_config(name))
                assert latest is not None
                assert latest.checkpoint["channel_values"]["x"] in (len(acked) - 1, len(acked))


def _progress(writers: _Writers, at_least: int, timeout: float = 60) -> None:
    start = sum(len(a) for a in writers.acked.values())
    deadline = time.monotonic() + timeout
    while sum(len(a) for a in writers.acked.values()) < start + at_least:
        assert not writers.errors, writers.errors[0]
        assert time.monotonic() < deadline, "writers made no progress"
        time.sleep(0.02)


def _components(url: str) -> tuple[ConversationStore, SQLStore, SQLSaver]:
    prefix = f"f{uuid.uuid4().hex[:8]}_"
    store = ConversationStore(url, table_prefix=prefix)
    facts = SQLStore(url, table_prefix=prefix)
    saver = SQLSaver(url, table_prefix=prefix)
    store.count_messages("warmup")
    facts.get(("warmup",), "k")
    saver.setup()
    return store, facts, saver


@pytest.mark.timeout(300)
def test_server_restarted_mid_run(server: Server) -> None:
    """Restarts while chat history, store and checkpoint writers run: no error reaches a
    caller, and every acknowledged write is stored (the history's once, in order)."""
    with _Writers(*_components(server.url)) as writers:
        for _ in range(FAULTS):
            _progress(writers, 20)
            server.restart()
        _progress(writers, 20)  # the writers carry on after the last restart
    writers.check()


@pytest.mark.timeout(300)
def test_server_killed_and_recovering_mid_run(server: Server) -> None:
    """The server killed (SIGKILL) and started again: while it recovers it refuses connections
    ("not yet accepting connections", "in recovery mode"); the writers wait that out."""
    with _Writers(*_components(server.url)) as writers:
        for _ in range(FAULTS):
            _progress(writers, 20)
            server.crash()
            server.start()
        _progress(writers, 20)
    writers.check()


@pytest.mark.timeout(300)
def test_every_call_waits_out_a_restart(server: Server) -> None:
    """Calls made while the server is down for a restart (about 2 s) block until it is back,
    then succeed: the store's, the checkpointer's and the chat history's, sync and async."""
    prefix = f"f{uuid.uuid4().hex[:8]}_"
    store = ConversationStore(server.url, table_prefix=prefix)
    facts = SQLStore(server.url, table_prefix=prefix)
    saver = SQLSaver(server.url, table_prefix=prefix)
    store.add_messages("s", [HumanMessage("before")])
    facts.put(("ns",), "k", {"v": 1})
    first, versions = _checkpoint(saver, 1)
    saver.put(_config("t"), first, {"step": 1}, versions)

    async def async_calls() -> list[Any]:
        ckpt, vs = _checkpoint(saver, 3)
        return list(
            await asyncio.gather(
                facts.aput(("ns",), "ak", {"v": 3}),
                facts.aget(("ns",), "k"),
                saver.aput(_config("t"), ckpt, {"step": 3}, vs),
                saver.aget_tuple(_config("t")),
                store.aadd_messages("a", [HumanMessage("async")]),
                store.aget_messages("s"),
            )
        )

    def sync_calls() -> list[Any]:
        ckpt, vs = _checkpoint(saver, 2)
        return [
            facts.put(("ns",), "k2", {"v": 2}),
            facts.get(("ns",), "k"),
            saver.put(_config("t"), ckpt, {"step": 2}, vs),
            saver.get_tuple(_config("t")),
            store.add_messages("s", [HumanMessage("during")]),
            store.get_messages("s"),
        ]

    server.stop()
    results: dict[str, Any] = {}
    errors: list[BaseException] = []

    def call(name: str, fn: Callable[[], Any]) -> None:
        try:
            results[name] = fn()
        except BaseException as e:
            errors.append(e)

    threads = [
        threading.Thread(target=call, args=("sync", sync_calls)),
        threading.Thread(target=call, args=("async", lambda: asyncio.run(async_calls()))),
    ]
    for t in threads:
        t.start()
    time.sleep(2)
    server.start()
    for t in threads:
        t.join(120)
    # the calls began while the server was down: their results show that they waited for it
    assert not errors, f"a call failed during the restart: {errors[0]!r}"
    assert results["sync"][1].value == {"v": 1} and results["async"][1].value == {"v": 1}
    assert results["sync"][3].checkpoint["id"] is not None
    assert [m.content for m in store.get_messages("s")] == ["before", "during"]
    assert facts.get(("ns",), "k2").value == {"v": 2}  # type: ignore[union-attr]
    assert facts.get(("ns",), "ak").value == {"v": 3}  # type: ignore[union-attr]
    assert len(list(saver.list(_config("t")))) == 3


@pytest.mark.timeout(300)
def test_every_component_reconnects_after_a_restart(server: Server, request: Any) -> None:
    prefix = f"f{uuid.uuid4().hex[:8]}_"
    store = ConversationStore(server.url, table_prefix=prefix)
    saver = SQLSaver(server.url, table_prefix=prefix)
    facts = SQLStore(server.url, table_prefix=prefix)
    store.add_messages("s", [HumanMessage("before")])
    facts.put(("after",), "k", {"v": 1})
    assert saver.get_tuple({"configurable": {"thread_id": "none"}}) is None
    # every pooled connection is now stale; each component is first to meet one (a detected
    # disconnect invalidates the whole shared pool, so one component must not clean up for
    # the others)
    server.restart()
    assert saver.get_tuple({"configurable": {"thread_id": "none"}}) is None
    server.restart()
    assert facts.get(("after",), "k").value == {"v": 1}  # type: ignore[union-attr]
    server.restart()
    store.add_messages("s", [HumanMessage("after")])
    assert [m.content for m in store.get_messages("s")] == ["before", "after"]


@pytest.mark.timeout(300)
def test_every_connection_killed_repeatedly(server: Server) -> None:
    prefix = f"f{uuid.uuid4().hex[:8]}_"
    store = ConversationStore(server.url, table_prefix=prefix)
    store.count_messages("warmup")
    killed = 0
    with _Writers(store) as writers:
        for _ in range(FAULTS * 5):
            _progress(writers, 10)
            killed += server.kill_connections()
        _progress(writers, 10)
    assert killed > 0, "no connection was killed: the test proved nothing"
    writers.check()


async def test_async_operations_survive_a_restart(server: Server) -> None:
    prefix = f"f{uuid.uuid4().hex[:8]}_"
    store = ConversationStore(server.url, table_prefix=prefix)
    await store.aadd_messages("a", [HumanMessage("before")])
    server.restart()
    await store.aadd_messages("a", [HumanMessage("after")])
    assert [m.content for m in await store.aget_messages("a")] == ["before", "after"]


@pytest.mark.timeout(300)
def test_server_down_gives_the_typed_error_within_the_deadline(server: Server) -> None:
    """A server that stays down longer than the retry deadline: every component's calls, sync
    and async, raise DatabaseUnavailableError once they tried until the deadline, naming the
    database with its password hidden; nothing unacknowledged is stored."""
    prefix = f"f{uuid.uuid4().hex[:8]}_"
    secret = "s3cret-pw"
    url = server.url.replace("://root@", f"://root:{secret}@").replace(
        "://postgres@", f"://postgres:{secret}@"
    )
    db = get_database(url, retry_seconds=2)
    store = ConversationStore(db, table_prefix=prefix)
    facts = SQLStore(db, table_prefix=prefix)
    saver = SQLSaver(db, table_prefix=prefix)
    store.add_messages("s", [HumanMessage("stored")])
    facts.put(("ns",), "k", {"v": 1})
    saver.setup()
    server.stop()
    ckpt, versions = _checkpoint(saver, 1)
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("history add", lambda: store.add_messages("s", [HumanMessage("never acknowledged")])),
        ("history get", lambda: store.get_messages("s")),
        ("store put", lambda: facts.put(("ns",), "k", {"v": 2})),
        ("store get", lambda: facts.get(("ns",), "k")),
        ("saver put", lambda: saver.put(_config("t"), ckpt, {}, versions)),
        ("saver get", lambda: saver.get_tuple(_config("t"))),
        ("async store get", lambda: asyncio.run(facts.aget(("ns",), "k"))),
        ("async saver get", lambda: asyncio.run(saver.aget_tuple(_config("t")))),
        ("async history get", lambda: asyncio.run(store.aget_messages("s"))),
    ]
    for name, call in calls:
        with pytest.raises(DatabaseUnavailableError) as info:
            call()
        # it kept trying until the deadline, then gave up (the test's timeout guards a hang)
        assert info.value.attempts > 1 and info.value.waited >= 2, name
        assert "retry_seconds=2" in str(info.value), name
        assert secret not in str(info.value) and "***" in str(info.value), name
        assert info.value.__cause__ is not None, name
    server.start()
    assert [m.content for m in store.get_messages("s")] == ["stored"]
    assert facts.get(("ns",), "k").value == {"v": 1}  # type: ignore[union-attr]


def test_the_default_retry_deadline_is_thirty_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    from langmem_sqlite.engine.retry import default_retry_seconds

    monkeypatch.delenv("LANGMEM_SQLITE_RETRY_SECONDS", raising=False)
    assert default_retry_seconds() == 30
    monkeypatch.setenv("LANGMEM_SQLITE_RETRY_SECONDS", "5")
    assert default_retry_seconds() == 5
    for bad in ("-1", "nan", "inf", "soon"):
        monkeypatch.setenv("LANGMEM_SQLITE_RETRY_SECONDS", bad)
        with pytest.raises(ValueError, match="LANGMEM_SQLITE_RETRY_SECONDS"):
            default_retry_seconds()
    for bad_value in (-1, float("nan"), float("inf"), True, 10**6):
        with pytest.raises(ValueError, match="retry_seconds"):
            get_database("sqlite://", retry_seconds=bad_value)  # type: ignore[arg-type]
