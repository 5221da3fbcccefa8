"""The execution seam (``langmem_sqlite.engine.unit``): SQLAlchemy statements on pooled
DBAPI connections, compiled with SQLAlchemy's public API.

Compiled statements are kept by statement object in one bounded cache, so these tests make sure
values never leak from one statement to another, that INSERTs compile for the columns given,
that errors keep SQLAlchemy's types and roll back, that a dropped connection is retried, and
that connections go back to the pool as they came.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support import backend_url, server_url

from langmem_sqlite.engine import Database, Unit, get_database
from langmem_sqlite.engine.unit import STATEMENTS_KEPT


@pytest.fixture
def table(backend: str, tmp_path: Any) -> Iterator[tuple[Database, sa.Table]]:
    db = get_database(backend_url(backend, tmp_path))
    md = sa.MetaData()
    t = sa.Table(
        f"lite_{uuid.uuid4().hex[:8]}",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(50), nullable=False),
        sa.Column("note", sa.String(50), nullable=True, server_default="none"),
        sa.Column("doc", sa.JSON, nullable=True),
    )
    md.create_all(db.sync_engine)
    yield db, t
    md.drop_all(db.sync_engine)


def _insert(unit: Unit, t: sa.Table, rows: list[dict[str, Any]]) -> int:
    return unit.execute(sa.insert(t), rows).rowcount


def test_values_of_same_shape_statements_never_mix(table: tuple[Database, sa.Table]) -> None:
    db, t = table
    db.run(_insert, t, [{"id": i, "name": f"n{i}", "doc": {"i": i}} for i in range(10)])

    def by_literal(unit: Unit, i: int) -> Any:
        # a new statement per call, literal value inside: compiled for that call
        return unit.execute(sa.select(t.c.name, t.c.doc).where(t.c.id == i)).one()

    for i in (3, 7, 3, 0):
        row = db.run(by_literal, i, single=True)
        assert (row.name, row.doc) == (f"n{i}", {"i": i})

    def limited(unit: Unit, n: int) -> list[int]:
        return unit.execute(sa.select(t.c.id).order_by(t.c.id).limit(n)).scalars().all()

    assert [len(db.run(limited, n)) for n in (2, 5, 1)] == [2, 5, 1]


def test_in_lists_literal_and_bound(table: tuple[Database, sa.Table]) -> None:
    db, t = table
    db.run(_insert, t, [{"id": i, "name": f"n{i}"} for i in range(10)])
    bound = sa.select(t.c.id).where(t.c.id.in_(sa.bindparam("ids", expanding=True)))

    def by_bound(unit: Unit, ids: list[int]) -> set[int]:
        return set(unit.execute(bound, {"ids": ids}).scalars())

    def by_literal(unit: Unit, ids: list[int]) -> set[int]:
        return set(unit.execute(sa.select(t.c.id).where(t.c.id.in_(ids))).scalars())

    for ids in ([1, 2], [5], [0, 9, 4], []):
        assert db.run(by_bound, ids) == set(ids)
        assert db.run(by_literal, ids) == set(ids)


def test_in_list_shapes_are_kept_without_mixing_values(table: tuple[Database, sa.Table]) -> None:
    """Statements with IN lists, expanded per call: lengths seen before, tuple lists, other
    parameters and empty lists all give what SQLAlchemy itself gives."""
    db, t = table
    db.run(_insert, t, [{"id": i, "name": f"n{i % 3}"} for i in range(12)])
    scalar = sa.select(t.c.id).where(
        t.c.id.in_(sa.bindparam("ids", expanding=True)),
        t.c.name != sa.bindparam("skip"),
        t.c.id < 100,  # a literal value among the parameters
    )
    pairs = sa.select(t.c.id).where(
        sa.tuple_(t.c.id, t.c.name).in_(sa.bindparam("pairs", expanding=True))
    )

    def seam(unit: Unit, stmt: Any, params: dict[str, Any]) -> list[int]:
        return sorted(unit.execute(stmt, params).scalars())

    def core(conn: sa.Connection, stmt: Any, params: dict[str, Any]) -> list[int]:
        return sorted(conn.execute(stmt, params).scalars())

    cases = [
        (scalar, {"ids": [1, 2, 3], "skip": "n0"}),
        (scalar, {"ids": [4, 5, 6], "skip": "n1"}),  # same length, other values
        (scalar, {"ids": [7], "skip": "none"}),
        (scalar, {"ids": [9, 10, 11], "skip": "n2"}),
        (scalar, {"ids": [], "skip": "n0"}),
        (pairs, {"pairs": [(1, "n1"), (2, "n0"), (3, "n0")]}),
        (pairs, {"pairs": [(4, "n1"), (5, "n1"), (6, "n0")]}),
        (pairs, {"pairs": [(8, "n2")]}),
    ]
    for stmt, params in cases:
        assert db.run(seam, stmt, params) == db.run(core, stmt, params, schema=True), params
    assert db.run(seam, scalar, {"ids": [4, 5, 6], "skip": "n1"}) == [5, 6]


def test_insert_compiles_for_the_columns_given(table: tuple[Database, sa.Table]) -> None:
    db, t = table
    stmt = sa.insert(t)  # one statement object, two column sets

    def put(unit: Unit, row: dict[str, Any]) -> None:
        unit.execute(stmt, row)

    db.run(put, {"id": 1, "name": "a"}, write=True)
    db.run(put, {"id": 2, "name": "b", "note": "given"}, write=True)
    with db.sync_engine.connect() as c:
        rows = c.execute(sa.select(t.c.id, t.c.note).order_by(t.c.id)).all()
    assert [tuple(r) for r in rows] == [(1, "none"), (2, "given")]


def test_errors_keep_their_type_and_roll_back(table: tuple[Database, sa.Table]) -> None:
    db, t = table
    db.run(_insert, t, [{"id": 1, "name": "a"}], write=True)

    def two(unit: Unit) -> None:
        unit.execute(sa.insert(t), {"id": 2, "name": "b"})
        unit.execute(sa.insert(t), {"id": 1, "name": "duplicate"})

    with pytest.raises(sa.exc.IntegrityError):
        db.run(two, write=True)
    count = db.run(lambda c: c.execute(sa.select(sa.func.count()).select_from(t)).scalar())
    assert count == 1  # the first insert of the failed transaction was rolled back


def test_async_runs_the_same_function(table: tuple[Database, sa.Table]) -> None:
    db, t = table

    async def main() -> list[Any]:
        await db.arun(_insert, t, [{"id": i, "name": f"n{i}"} for i in range(3)])
        got = await asyncio.gather(
            *[
                db.arun(
                    lambda c, i=i: c.execute(sa.select(t.c.name).where(t.c.id == i)).scalar(),
                    single=True,
                )
                for i in range(3)
            ]
        )
        await db.adispose()
        return got

    assert asyncio.run(main()) == ["n0", "n1", "n2"]


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
def test_a_dropped_connection_is_retried(server: str) -> None:
    url = server_url(server)
    db = get_database(url, engine_args={"pool_size": 1, "max_overflow": 0})
    pg = db.backend == "postgresql"
    pid_sql = "SELECT pg_backend_pid()" if pg else "SELECT CONNECTION_ID()"
    pid = db.run(lambda c: c.exec_driver_sql(pid_sql).scalar())
    admin = sa.create_engine(db.url, poolclass=sa.pool.NullPool)
    with admin.connect() as c:
        if pg:
            c.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        else:
            c.execute(sa.text(f"KILL CONNECTION {int(pid)}"))
    admin.dispose()
    # the pooled connection is dead: the run fails on it, is retried on a new one
    assert db.run(lambda c: c.exec_driver_sql(pid_sql).scalar()) != pid
    db.dispose()


def test_result_types_match_sqlalchemy(backend: str, tmp_path: Any) -> None:
    """Result processors are made from the driver's column type codes, as SQLAlchemy does
    (psycopg's numeric processor needs them)."""
    db = get_database(backend_url(backend, tmp_path))
    stmt = sa.select(
        sa.literal(1.5, sa.Float).label("f"),
        sa.cast(sa.literal(2), sa.Numeric(10, 2)).label("n"),
        sa.func.count().label("c"),
        sa.literal("é", sa.String).label("s"),
    )
    got = db.run(lambda c: c.execute(stmt).one())
    with db.sync_engine.connect() as conn:
        plain = conn.execute(stmt).one()
    assert tuple(got) == tuple(plain)
    assert [type(v) for v in got] == [type(v) for v in plain]
    assert (got.f, got.c) == (1.5, 1)


def _pid(unit: Unit) -> int:
    return int(unit.exec_driver_sql("SELECT pg_backend_pid()").scalar())


def _xids(unit: Unit) -> tuple[int, int]:
    xid = "SELECT txid_current()"
    return unit.exec_driver_sql(xid).scalar(), unit.exec_driver_sql(xid).scalar()


def test_postgres_single_statements_run_in_autocommit_and_connections_go_back_as_they_came() -> (
    None
):
    """PostgreSQL: a read or a one-statement write runs in the driver's autocommit mode (no BEGIN
    and COMMIT round trips), a transaction is one transaction, and every connection goes back
    to the pool, for its other users, out of autocommit mode."""
    db = get_database(server_url("postgres"), engine_args={"pool_size": 2, "max_overflow": 0})
    try:

        def mode(unit: Unit) -> bool:
            return bool(unit.connection.connection.dbapi_connection.autocommit)  # type: ignore[union-attr]

        assert db.run(mode, single=True) is True
        assert db.run(mode, write=True, single=True) is True
        assert db.run(mode, write=True) is False
        a, b = db.run(_xids, write=True)
        assert a == b  # one transaction
        a, b = db.run(_xids)
        assert a != b  # a read: each statement on its own
        engine = db.sync_engine
        held = [engine.raw_connection() for _ in range(2)]  # every connection the pool has
        try:
            assert all(h.dbapi_connection.autocommit is False for h in held)  # type: ignore[union-attr]
        finally:
            for h in held:
                h.close()
    finally:
        db.dispose()


def _xids(unit: Unit) -> tuple[int, int]:
    xid = "SELECT txid_current()"
    return unit.exec_driver_sql(xid).scalar(), unit.exec_driver_sql(xid).scalar()


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
def test_every_pooled_connection_killed_is_retried(server: str) -> None:
    """Every idle connection of the pool ended by the server: the next unit of work fails on
    one, and runs again on a new connection (the pool's older connections are dropped)."""
    db = get_database(server_url(server), engine_args={"pool_size": 4, "max_overflow": 0})
    pg = db.backend == "postgresql"
    pid_sql = "SELECT pg_backend_pid()" if pg else "SELECT CONNECTION_ID()"
    try:
        held = [db.sync_engine.raw_connection() for _ in range(4)]
        pids = []
        for h in held:
            cur = h.cursor()
            cur.execute(pid_sql)
            pids.append(cur.fetchone()[0])  # type: ignore[index]
            cur.close()
            h.rollback()
        for h in held:
            h.close()
        admin = sa.create_engine(db.url, poolclass=sa.pool.NullPool)
        with admin.connect() as c:
            for pid in pids:
                if pg:
                    c.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
                else:
                    c.execute(sa.text(f"KILL CONNECTION {int(pid)}"))
        admin.dispose()
        got = [db.run(lambda c: c.exec_driver_sql(pid_sql).scalar()) for _ in range(4)]
        assert not set(got) & set(pids)
    finally:
        db.dispose()


def test_statements_of_one_shape_keep_their_own_values(tmp_path: Any) -> None:
    """More statements of one shape than SQLAlchemy's compiled cache holds: every statement,
    cached or not, runs with its own values."""
    db = get_database(tmp_path / "c.db")
    t = sa.table("numbers", sa.column("n"))
    db.run(lambda c: c.exec_driver_sql("CREATE TABLE numbers (n INTEGER)"), write=True)
    db.run(lambda c: c.execute(sa.insert(t), [{"n": i} for i in range(50)]), write=True)
    stmts = [sa.select(t.c.n).where(t.c.n == i % 50) for i in range(800)]

    def each(unit: Unit) -> list[int]:
        return [unit.execute(s).scalar() for s in stmts]

    assert db.run(each) == [i % 50 for i in range(len(stmts))]
    assert db.run(each) == [i % 50 for i in range(len(stmts))]


def test_a_unit_that_leaves_a_transaction_open_does_not_leak_it(
    backend: str, tmp_path: Any
) -> None:
    """A unit of work that opens a transaction itself, writes in it and returns without ending
    it leaves nothing open for the next unit on its pooled connection: the stray write is
    ended with its own unit (committed where the seam commits every unit, as on MariaDB;
    rolled back where the unit had no transaction of the seam's, by the pool's reset on
    return, or with the connection discarded), never committed later by another unit."""
    url = backend_url(backend, tmp_path)
    db = get_database(url, engine_args={"pool_size": 1, "max_overflow": 0})
    outside = sa.create_engine(db.url, poolclass=sa.pool.NullPool)  # not the pool's connection
    md = sa.MetaData()
    t = sa.Table(f"leak_{uuid.uuid4().hex[:8]}", md, sa.Column("id", sa.Integer, primary_key=True))
    md.create_all(db.sync_engine)
    try:

        def stray(unit: Unit) -> Any:
            if backend != "sqlite":  # SQLite's unit is always a transaction of its own
                unit.exec_driver_sql("BEGIN")
            unit.execute(sa.insert(t), {"id": 1})
            return unit.connection.connection.dbapi_connection

        def count() -> int:
            with outside.connect() as c:
                return int(c.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())

        first = db.run(stray, single=True)
        ended = count()  # what the stray unit left: 1 if committed with it, else 0
        assert ended in (0, 1)
        db.run(_insert, t, [{"id": 2}], write=True)  # commits its own work only
        assert count() == ended + 1
        db.run(_insert, t, [{"id": 3}], single=True, write=True)
        assert count() == ended + 2
        if backend == "sqlite":  # the same pooled connection served every unit
            assert db.run(lambda conn: conn.connection.connection.dbapi_connection) is first
    finally:
        md.drop_all(db.sync_engine)
        db.dispose()
        outside.dispose()


def test_sqlite_units_stay_transactions_after_autocommit_use(tmp_path: Any) -> None:
    """A pooled SQLite connection once used with the AUTOCOMMIT option (VACUUM) comes back from
    SQLAlchemy with the driver's own transaction handling; every later unit of work is still
    one transaction: a failure undoes all it wrote."""
    db = get_database(tmp_path / "i.db", engine_args={"pool_size": 1, "max_overflow": 0})
    db.run(lambda c: c.exec_driver_sql("CREATE TABLE t (k INTEGER PRIMARY KEY)"), write=True)

    def vacuum(conn: sa.Connection) -> None:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM")

    def fail(unit: Unit | sa.Connection) -> None:
        unit.exec_driver_sql("INSERT INTO t VALUES (1)")
        unit.exec_driver_sql("INSERT INTO t VALUES (2)")
        raise RuntimeError("after two inserts")

    for flags in ({"write": True}, {}, {"write": True, "schema": True}):
        db.run(vacuum, own_transaction=True)
        with pytest.raises(RuntimeError):
            db.run(fail, **flags)
    assert db.run(lambda u: u.exec_driver_sql("SELECT count(*) FROM t").scalar()) == 0
    db.dispose()


def test_statements_built_per_key_once_within_the_bound(tmp_path: Any) -> None:
    db = get_database(tmp_path / "b.db")
    built: list[int] = []

    def get(unit: Unit, n: int) -> Any:
        return unit.statement(
            ("numbers", n % 3), lambda: built.append(n) or sa.select(sa.literal(n % 3))
        )

    stmts = db.run(lambda c: [get(c, n) for n in range(9)])
    assert built == [0, 1, 2] and stmts[0] is stmts[3] is stmts[6]

    def distinct(unit: Unit) -> list[Any]:
        return [
            unit.statement(("n", n), lambda n=n: sa.select(sa.literal(n)))
            for n in range(STATEMENTS_KEPT * 2)
        ]

    assert len(db.run(distinct)) == STATEMENTS_KEPT * 2
    # the last STATEMENTS_KEPT are kept, the older ones were dropped (built again if asked)
    rebuilt: list[int] = []

    def again(unit: Unit, n: int) -> Any:
        return unit.statement(("n", n), lambda: rebuilt.append(n) or sa.select(sa.literal(n)))

    db.run(again, STATEMENTS_KEPT)
    db.run(again, STATEMENTS_KEPT - 1)
    assert rebuilt == [STATEMENTS_KEPT - 1]
