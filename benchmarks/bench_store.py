"""SQLStore vs the stores it replaces: SqliteStore (SQLite file) and PostgresStore (PostgreSQL).

One command: ``python benchmarks/bench_store.py`` (``--quick``: 1,000 and 10,000 items instead
of 1,000 and 100,000).

For each size, both stores are filled with the same items (namespaces ``("bench", "u<0..99>")``,
values ``{"text", "n", "tag"}``, the ``text`` field embedded with the same cheap deterministic
64-dim embedding), then measured in the same run, interleaved:

* put: single ``put`` calls (half updates, half new keys);
* get: single ``get`` calls on random keys; and the floor under SQLStore's: SQLAlchemy alone on
  its engine and table (a pool checkout and one Core ``SELECT``, no package code);
* filtered search: ``search(("bench",), filter={"tag": ..., "n": {"$gte": ...}}, limit=10)``
  over the whole store, and in one user's namespace;
* vector search: ``search(("bench", "u<k>"), query=..., limit=10)`` (one user's 1%) and over the
  whole store;
* async (SQLite file, 1,000 items, against AsyncSqliteStore): ``aput``, ``aget``, and a filtered
  ``asearch`` in one user's namespace;
* burst (SQLite file against AsyncSqliteStore, PostgreSQL against AsyncPostgresStore): 60,000
  concurrent calls in one ``asyncio.gather``, a third each of ``aget`` (1,000 preloaded items
  in 100 namespaces), ``aput`` (4,000 keys in 50 other namespaces, each written five times) and
  ``asearch`` (limit 10) of the preloaded namespaces; median of three bursts per store,
  interleaved (``--burst N`` for another size, 0 to skip). SqliteStore needs the sqlite-vec extension (loaded through ``pysqlite3`` when this
  Python's ``sqlite3`` cannot load extensions); PostgresStore needs the server's pgvector
  extension: without it only SQLStore (ranking in the application) is measured ("n/a").

Ratios are throughput ours / anchor (higher is better; target >= 1, parity). PostgreSQL comes
from ``LANGMEM_BENCH_POSTGRES_URL`` (default: the local test server); each store gets a fresh
schema or table prefix, dropped at the end. ``--pre-ping`` measures SQLStore on PostgreSQL
with the pool's per-checkout ping, for comparison (the package does not ping: a dropped
connection fails the first statement and the unit of work runs again on a new one).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, PutOp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from langmem_sqlite import SQLStore
from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables
from langmem_sqlite.store.namespaces import encode
from langmem_sqlite.store.pgvector_schema import pgvector_table

PG_URL = os.environ.get("LANGMEM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
DIMS = 64
USERS = 100
WORDS = [
    "vegetarian",
    "tea",
    "coffee",
    "jazz",
    "hiking",
    "paris",
    "tokyo",
    "python",
    "rust",
    "brief",
    "detailed",
    "morning",
    "night",
    "cats",
    "dogs",
    "chess",
    "running",
    "piano",
    "spanish",
    "chinese",
    "budget",
    "travel",
    "books",
    "cinema",
    "garden",
]


class HashEmbedding(Embeddings):
    """Cheap deterministic embedding (bag of hashed words), the same for both stores."""

    def _vec(self, text: str) -> list[float]:
        v = [0.0] * DIMS
        for word in text.split():
            h = hashlib.blake2b(word.encode(), digest_size=4).digest()
            v[int.from_bytes(h[:2], "little") % DIMS] += 1.0 if h[2] & 1 else -1.0
        return v

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


INDEX: Any = {"dims": DIMS, "embed": HashEmbedding(), "fields": ["text"]}


def value(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    return {
        "text": " ".join(rng.choice(WORDS) for _ in range(6)),
        "n": rng.randint(0, 99),
        "tag": f"t{rng.randint(0, 6)}",
    }


def load_batches(n: int) -> Iterator[list[PutOp]]:
    """The puts that load ``n`` items, in batches of 1,000."""
    for start in range(0, n, 1000):
        items = range(start, min(n, start + 1000))
        yield [PutOp(("bench", f"u{i % USERS}"), f"k{i}", value(i)) for i in items]


def load(store: BaseStore, n: int) -> float:
    """Bulk-load ``n`` items in batches; seconds taken."""
    t0 = time.perf_counter()
    for batch in load_batches(n):
        store.batch(batch)
    return time.perf_counter() - t0


Args = tuple[tuple[Any, ...], dict[str, Any]]
Workload = tuple[int, str, Callable[[int], Args]]
"""(operations per round, the store's method, op_index -> its arguments)."""


def workloads(n: int, vectors: bool) -> dict[str, Workload]:
    """name -> workload; the async section calls the same methods' ``a`` twins."""
    rng = random.Random(7)
    keys = [rng.randrange(n) for _ in range(5000)]

    def user(j: int) -> tuple[str, str]:
        return ("bench", f"u{j % USERS}")

    out: dict[str, Workload] = {
        "put": (
            200,
            "put",
            lambda j: (
                (
                    user(j),
                    f"k{keys[j % len(keys)] if j % 2 else n + j + rng.randrange(10**9)}",
                    value(j),
                ),
                {},
            ),
        ),
        "get": (
            500,
            "get",
            lambda j: ((user(keys[j % len(keys)]), f"k{keys[j % len(keys)]}"), {}),
        ),
        "filtered search (all)": (
            50,
            "search",
            lambda j: (
                (("bench",),),
                {"filter": {"tag": f"t{j % 7}", "n": {"$gte": 90}}, "limit": 10},
            ),
        ),
        "filtered search (user ns)": (
            100,
            "search",
            lambda j: ((user(j),), {"filter": {"tag": f"t{j % 7}"}, "limit": 10}),
        ),
    }
    if vectors:
        out["vector search (user ns)"] = (
            50,
            "search",
            lambda j: (
                (user(j),),
                {"query": f"{WORDS[j % 20]} {WORDS[(j * 3) % 20]}", "limit": 10},
            ),
        )
        out["vector search (all)"] = (
            10 if n > 10_000 else 30,
            "search",
            lambda j: ((("bench",),), {"query": f"{WORDS[j % 20]} {WORDS[j % 7]}", "limit": 10}),
        )
    return out


def sync_call(method: str, args: Callable[[int], Args]) -> Callable[[BaseStore, int], Any]:
    """fn(store, op_index) running one operation of a workload."""

    def call(store: BaseStore, j: int) -> Any:
        a, k = args(j)
        return getattr(store, method)(*a, **k)

    return call


ROUNDS = 7
ROUND_S = 0.03  # seconds per round for the slower store: short rounds are mostly noise
WARM_UP_S = 0.3  # seconds of each store's operations before the measured rounds (at most 200)


def measure(
    ours: BaseStore, anchor: BaseStore | None, ops: int, fn: Callable[[BaseStore, int], Any]
) -> tuple[float, float]:
    """Median ms per operation of each store, in :data:`ROUNDS` interleaved rounds (NaN for a
    missing anchor). A round runs at least ``ops // 5`` operations, more for fast operations,
    so that it lasts about :data:`ROUND_S` for the slower store."""
    stores = [(ours, []), *([(anchor, [])] if anchor is not None else [])]
    slowest = 0.0
    for store, _ in stores:
        # warm-up: the first searches after a bulk load read cold pages (HNSW at 100,000 items:
        # 4-7 ms for the first rounds of both stores, 2-3 ms afterwards)
        t0 = time.perf_counter()
        j = 0
        while time.perf_counter() - t0 < WARM_UP_S and j < 200:
            fn(store, j)
            j += 1
        t0 = time.perf_counter()
        for j in range(1, 6):
            fn(store, j)
        slowest = max(slowest, (time.perf_counter() - t0) / 5)
    per = max(1, ops // 5, min(2000, int(ROUND_S / max(slowest, 1e-9))))
    for r in range(ROUNDS):
        for store, times in stores:
            t0 = time.perf_counter()
            for j in range(r * per, (r + 1) * per):
                fn(store, j)
            times.append((time.perf_counter() - t0) * 1000 / per)
    medians = [statistics.median(times) for _, times in stores]
    return medians[0], medians[1] if len(medians) > 1 else math.nan


class SQLAlchemyGet:
    """The floor under ``SQLStore.get``: SQLAlchemy alone on the store's engine and table, a pool
    checkout and one Core ``SELECT`` by ``(ns, key)``, no package code."""

    def __init__(self, store: SQLStore) -> None:
        c = store.tables.store_items.c
        self.engine = store.db.sync_engine
        self.stmt = sa.select(store.tables.store_items).where(
            c.ns == sa.bindparam("ns"), c.key == sa.bindparam("key")
        )

    def get(self, namespace: tuple[str, ...], key: str) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(self.stmt, {"ns": encode(namespace), "key": key}).first()


def anchor_sqlite() -> Any:
    """SqliteStore's vector search loads the sqlite-vec extension: use pysqlite3 when this
    Python's sqlite3 cannot load extensions (pyenv builds often cannot)."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        import pysqlite3  # type: ignore[import-not-found]
    except ImportError:
        return None
    return pysqlite3


def has_pgvector(url: str) -> bool:
    """Whether the PostgreSQL server offers the ``vector`` extension."""
    with get_database(url).sync_engine.connect() as c:
        found = c.execute(
            sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        ).scalar()
    return bool(found)


@contextmanager
def sqlite_pair(
    n: int, vectors: bool
) -> Iterator[tuple[BaseStore, BaseStore, Any, Callable[[], None]]]:
    """(SQLStore, SqliteStore, SQLStore with the index if the anchor cannot have one)."""
    from langgraph.store.sqlite import SqliteStore

    index = INDEX if vectors else None
    with tempfile.TemporaryDirectory() as tmp:
        ours = SQLStore(f"sqlite:///{tmp}/ours.db", index=index)
        extra = None if vectors else SQLStore(f"sqlite:///{tmp}/vectors.db", index=INDEX)
        conn = (anchor_sqlite() or sqlite3).connect(
            f"{tmp}/anchor.db", check_same_thread=False, isolation_level=None
        )
        anchor = SqliteStore(conn, index=index)
        anchor.setup()
        for store in (ours, extra):  # both sides' tables exist before the timed bulk load
            if store is not None:
                store.setup()
        yield ours, anchor, extra, lambda: None
        conn.close()
        for name in ("ours", "vectors"):
            get_database(f"sqlite:///{tmp}/{name}.db").dispose()


@contextmanager
def pgvector_server() -> Iterator[str]:
    """PostgreSQL 16 with pgvector built in (the ``pgserver`` wheel), on a Unix socket in a
    temporary directory: for the vector figures when the main server has no pgvector."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver  # type: ignore[import-untyped]

    root = tempfile.mkdtemp(prefix="langmem-bench-pgvector-")
    server = pgserver.get_server(root, cleanup_mode="delete")
    try:
        yield f"postgresql://postgres@/postgres?host={root}"
    finally:
        server.cleanup()


@contextmanager
def postgres_pair(
    pg_url: str, n: int, engine_args: dict[str, Any], vectors: bool, ann: str | None = None
) -> Iterator[tuple[BaseStore, BaseStore, Any, Callable[[], None]]]:
    """(SQLStore, PostgresStore, SQLStore with the index if the anchor cannot have one: its
    vector search needs the server's pgvector extension)."""
    from langgraph.store.postgres import PostgresStore

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    prefixes = [f"b{uuid.uuid4().hex[:8]}_", f"v{uuid.uuid4().hex[:8]}_"]
    admin = sa.create_engine(get_database(pg_url).url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        if vectors:  # in public, where both stores see it (else the first to create it wins)
            c.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public"))
    url = get_database(pg_url).url
    anchor_url = (
        url.set(drivername="postgresql")
        .update_query_dict({"options": f"-csearch_path={schema},public"})
        .render_as_string(hide_password=False)
    )
    index = INDEX if vectors else None
    if vectors and ann is not None:  # the same ANN setting for both stores
        index = {**INDEX, "ann_index_config": {"kind": ann}}
    try:
        with PostgresStore.from_conn_string(anchor_url, index=index) as anchor:
            anchor.setup()
            ours = SQLStore(pg_url, table_prefix=prefixes[0], engine_args=engine_args, index=index)
            extra = None
            if not vectors:
                extra = SQLStore(
                    pg_url, table_prefix=prefixes[1], engine_args=engine_args, index=INDEX
                )

            for store in (ours, extra):  # as anchor.setup(): tables made before the bulk load
                if store is not None:
                    store.setup()

            def analyze() -> None:
                inspect = sa.inspect(admin)
                # what autovacuum does within a minute of a bulk load: without statistics the
                # planner guesses (e.g. 118 rows for a namespace range holding 100,000)
                with admin.connect() as c:
                    ours = [f"{prefixes[0]}store_{t}" for t in ("items", "vectors", "pgvectors")]
                    for table in [t for t in ours if inspect.has_table(t)]:
                        c.execute(sa.text(f'ANALYZE "{table}"'))
                    anchor_tables = c.execute(
                        sa.text("SELECT tablename FROM pg_tables WHERE schemaname = :s"),
                        {"s": schema},
                    ).scalars()
                    for table in list(anchor_tables):
                        c.execute(sa.text(f'ANALYZE "{schema}"."{table}"'))

            yield ours, anchor, extra, analyze
    finally:
        engine = get_database(pg_url).sync_engine
        for prefix in prefixes:  # pgvector's copy (if any) refers to the items: first
            pgvector_table(get_tables(prefix)).drop(engine, checkfirst=True)
            get_tables(prefix).metadata.drop_all(engine)
        with admin.connect() as c:
            c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def run(
    label: str, pair: Any, n: int, rows: list[tuple[str, ...]], only_vectors: bool = False
) -> None:
    with pair as (ours, anchor, extra, analyze):
        lo, la = load(ours, n), load(anchor, n)
        analyze()
        rows.append(
            (
                label,
                f"{n:,}",
                "bulk load (batches of 1,000)",
                f"{lo:.2f} s",
                f"{la:.2f} s",
                f"{la / lo:.2f}x",
            )
        )
        print(f"  loaded {n:,} items: ours {lo:.2f} s, anchor {la:.2f} s", flush=True)
        if extra is not None:
            load(extra, n)
        for name, (ops, method, args) in workloads(n, True).items():
            fn = sync_call(method, args)
            if only_vectors and not name.startswith("vector"):
                continue
            if name.startswith("vector") and extra is not None:
                o, a = measure(extra, None, ops, fn)
            else:
                o, a = measure(ours, anchor, ops, fn)
            theirs = "n/a" if math.isnan(a) else f"{1000 / a:,.0f}/s"
            ratio = "n/a" if math.isnan(a) else f"{a / o:.2f}x"
            if name.startswith("vector") and extra is None:
                # approximate (HNSW) searches may return fewer items: say so next to the ratio
                got = [statistics.mean(len(fn(s, j)) for j in range(20)) for s in (ours, anchor)]
                if got[0] != got[1]:
                    ratio += f" (items per search: ours {got[0]:.1f}, anchor {got[1]:.1f})"
            rows.append((label, f"{n:,}", name, f"{1000 / o:,.0f}/s", theirs, ratio))
            print(f"  {name}: ours {1000 / o:,.0f}/s, anchor {theirs}, ratio {ratio}", flush=True)
        if not only_vectors:
            ops, _, args = workloads(n, False)["get"]
            o, a = measure(SQLAlchemyGet(ours), anchor, ops, sync_call("get", args))  # type: ignore[arg-type]
            name = "get: SQLAlchemy alone (checkout, SELECT)"
            rows.append(
                (label, f"{n:,}", name, f"{1000 / o:,.0f}/s", f"{1000 / a:,.0f}/s", f"{a / o:.2f}x")
            )
            print(f"  {name}: {1000 / o:,.0f}/s, ratio {a / o:.2f}x", flush=True)


def run_async_sqlite(n: int, rows: list[tuple[str, ...]]) -> None:
    """The async API on a SQLite file: ``aput``, ``aget`` and a filtered ``asearch`` in one
    user's namespace (the workloads' ``put``, ``get`` and ``filtered search (user ns)``), SQLStore
    (given the path) vs AsyncSqliteStore, interleaved rounds."""
    import asyncio

    from langgraph.store.sqlite.aio import AsyncSqliteStore

    ops = {
        name: spec
        for name, spec in workloads(n, False).items()
        if name in ("put", "get", "filtered search (user ns)")
    }

    async def go(tmp: str) -> None:
        ours = SQLStore(os.path.join(tmp, "ours.db"))
        async with AsyncSqliteStore.from_conn_string(os.path.join(tmp, "anchor.db")) as anchor:
            await anchor.setup()
            for store in (ours, anchor):
                for batch in load_batches(n):
                    await store.abatch(batch)
            for name, (count, method, args) in ops.items():
                times: dict[int, list[float]] = {0: [], 1: []}
                for r in range(-1, ROUNDS):  # round -1 warms up
                    for side, store in enumerate((ours, anchor)):
                        t0 = time.perf_counter()
                        for j in range(max(r, 0) * count, (max(r, 0) + 1) * count):
                            a, k = args(j)
                            await getattr(store, "a" + method)(*a, **k)
                        if r >= 0:
                            times[side].append((time.perf_counter() - t0) * 1000 / count)
                o, a = statistics.median(times[0]), statistics.median(times[1])
                rows.append(
                    (
                        "sqlite async",
                        f"{n:,}",
                        name,
                        f"{1000 / o:,.0f}/s",
                        f"{1000 / a:,.0f}/s",
                        f"{a / o:.2f}x",
                    )
                )
                print(
                    f"  {name}: ours {1000 / o:,.0f}/s, anchor {1000 / a:,.0f}/s, ratio {a / o:.2f}x"
                )
        ours.db.dispose()

    print(f"SQLite file, {n:,} items, async API: SQLStore vs AsyncSqliteStore", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(go(tmp))


BURST_USERS = 100
BURST_ITEMS = 1000


async def _burst_once(store: BaseStore, n: int) -> float:
    """Seconds for ``n`` gathered calls (see the module doc); checks the gets' results."""
    import asyncio

    calls = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            calls.append(store.aget(("burst", f"u{i % BURST_USERS}"), f"k{i % BURST_ITEMS}"))
        elif kind == 1:  # distinct puts at most 4,000 a burst: AsyncPostgresStore sends one
            # statement of 4 parameters per put, at most 65,535 parameters
            calls.append(store.aput(("written", f"w{i % 50}"), f"p{(i // 3) % 4000}", {"i": i}))
        else:
            calls.append(store.asearch(("burst", f"u{i % BURST_USERS}"), limit=10))
    t0 = time.perf_counter()
    results = await asyncio.gather(*calls)
    seconds = time.perf_counter() - t0
    for i in range(0, n, 3):
        got = results[i]
        assert got is not None and got.value["n"] == (i % BURST_ITEMS), "a wrong get"
    return seconds


def run_burst(n: int, rows: list[tuple[str, ...]], pg_url: str | None) -> None:
    """SQLStore against LangGraph's async stores, ``n`` concurrent calls (see the module doc)."""
    import asyncio

    from langgraph.store.postgres import AsyncPostgresStore
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    preload = [
        PutOp(("burst", f"u{i % BURST_USERS}"), f"k{i}", {"n": i, "tag": f"t{i % 7}"})
        for i in range(BURST_ITEMS)
    ]

    async def measure(ours: BaseStore, anchor: BaseStore, label: str) -> None:
        for store in (ours, anchor):
            for start in range(0, BURST_ITEMS, 250):
                await store.abatch(preload[start : start + 250])
        times: dict[int, list[float]] = {0: [], 1: []}
        for _ in range(3):
            for side, store in enumerate((ours, anchor)):
                times[side].append(await _burst_once(store, n))
        o, a = statistics.median(times[0]), statistics.median(times[1])
        rows.append(
            (
                label,
                f"{BURST_ITEMS:,}",
                f"burst of {n:,} calls",
                f"{o:.2f} s",
                f"{a:.2f} s",
                f"{a / o:.2f}x",
            )
        )
        print(f"  burst of {n:,}: ours {o:.2f} s, anchor {a:.2f} s, ratio {a / o:.2f}x")

    async def sqlite_burst(tmp: str) -> None:
        ours = SQLStore(os.path.join(tmp, "ours.db"))
        await ours.asetup()
        async with AsyncSqliteStore.from_conn_string(os.path.join(tmp, "anchor.db")) as anchor:
            await anchor.setup()
            await measure(ours, anchor, "sqlite async")
        ours.db.dispose()

    print(f"SQLite file: {n:,} concurrent async calls, SQLStore vs AsyncSqliteStore", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(sqlite_burst(tmp))
    if pg_url is None:
        return

    async def postgres_burst() -> None:
        schema = f"burst_{uuid.uuid4().hex[:8]}"
        prefix = f"r{uuid.uuid4().hex[:8]}_"
        url = get_database(pg_url).url
        admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        anchor_url = (
            url.set(drivername="postgresql")
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
        try:
            ours = SQLStore(pg_url, table_prefix=prefix)
            await ours.asetup()
            async with AsyncPostgresStore.from_conn_string(anchor_url) as anchor:
                await anchor.setup()
                await measure(ours, anchor, "postgres async")
        finally:
            get_tables(prefix).metadata.drop_all(get_database(pg_url).sync_engine)
            with admin.connect() as c:
                c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()

    print(f"PostgreSQL: {n:,} concurrent async calls, SQLStore vs AsyncPostgresStore", flush=True)
    asyncio.run(postgres_burst())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 items")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument(
        "--pre-ping",
        action="store_true",
        help="PostgreSQL: SQLStore's engine with pool_pre_ping (one round trip more per call)",
    )
    parser.add_argument(
        "--burst", type=int, default=60_000, help="concurrent calls of the burst (0: skip)"
    )
    parser.add_argument(
        "--only-burst", action="store_true", help="the burst section alone (final figures)"
    )
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [1_000, 100_000]
    rows: list[tuple[str, ...]] = []
    if args.only_burst:
        sizes = []
    for n in sizes:
        print(f"SQLite file, {n:,} items: SQLStore vs SqliteStore", flush=True)
        run("sqlite", sqlite_pair(n, anchor_sqlite() is not None), n, rows)
        if not args.no_postgres:
            print(f"PostgreSQL, {n:,} items: SQLStore vs PostgresStore", flush=True)
            engine_args = {"pool_pre_ping": True} if args.pre_ping else {}
            run("postgres", postgres_pair(PG_URL, n, engine_args, has_pgvector(PG_URL)), n, rows)
            if not has_pgvector(PG_URL):
                with pgvector_server() as url:
                    for ann, label in (("flat", "exact"), ("hnsw", "HNSW")):
                        print(f"PostgreSQL 16 + pgvector (pgserver), {n:,} items, {label}")
                        pair = postgres_pair(url, n, engine_args, True, ann)
                        run(f"pgvector {label}", pair, n, rows, only_vectors=True)
    if sizes:
        run_async_sqlite(sizes[0], rows)
    if args.burst:
        run_burst(args.burst, rows, None if args.no_postgres else PG_URL)
    header = ("db", "items", "operation", "SQLStore", "anchor", "ratio (ours/anchor throughput)")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    for i, row in enumerate([header, *rows]):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print(
        "\nratio > 1: SQLStore is faster. n/a: PostgresStore's vector search needs the pgvector "
        "extension, which this PostgreSQL server does not have (SQLStore ranks in Python then); "
        "pgvector rows: both stores on pgserver's PostgreSQL 16 with pgvector, with the same "
        "ann_index_config: 'flat' (exact ranking, SQLStore's default) or 'hnsw' (approximate, "
        "PostgresStore's default)."
    )


if __name__ == "__main__":
    main()
