"""The rules objects' statements and facts, on every backend: insert-if-absent and upsert
built once for every feature, the server's limits and sizes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from langmem_sqlite.engine import Database, Unit, get_database
from langmem_sqlite.engine.dialects import SQLiteRules
from langmem_sqlite.operations.per_database import table_bytes


@pytest.fixture
def table(db_url: str) -> Iterator[tuple[Database, sa.Table]]:
    db = get_database(db_url)
    md = sa.MetaData()
    t = sa.Table(
        f"dia_{uuid.uuid4().hex[:8]}",
        md,
        sa.Column("k", sa.String(40), primary_key=True),
        sa.Column("a", sa.Integer, nullable=False),
        sa.Column("b", sa.String(40), nullable=True),
    )
    md.create_all(db.sync_engine)
    yield db, t
    md.drop_all(db.sync_engine)


def _rows(db: Database, t: sa.Table) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.run(lambda c: c.execute(sa.select(t).order_by(t.c.k)).all())]


def test_insert_ignore_keeps_the_first_row_and_other_errors_still_raise(
    table: tuple[Database, sa.Table],
) -> None:
    db, t = table
    stmt = db.rules.insert_ignore(t)

    def put(unit: Unit, rows: list[dict[str, Any]]) -> None:
        unit.execute(stmt, rows)

    db.run(put, [{"k": "x", "a": 1, "b": "first"}], write=True)
    db.run(
        put,
        [{"k": "x", "a": 2, "b": "second"}, {"k": "y", "a": 3, "b": None}],
        write=True,
    )
    assert _rows(db, t) == [("x", 1, "first"), ("y", 3, None)]
    with pytest.raises(sa.exc.IntegrityError):  # a NOT NULL column left empty: not ignored
        db.run(put, [{"k": "z", "a": None, "b": "no a"}], write=True)
    assert _rows(db, t) == [("x", 1, "first"), ("y", 3, None)]


def test_upsert_replaces_the_named_columns_only(table: tuple[Database, sa.Table]) -> None:
    db, t = table
    stmt = db.rules.upsert(t, ["a"])
    db.run(lambda c: c.execute(stmt, [{"k": "x", "a": 1, "b": "kept"}]), write=True)
    db.run(lambda c: c.execute(stmt, [{"k": "x", "a": 5, "b": "not written"}]), write=True)
    assert _rows(db, t) == [("x", 5, "kept")]
    # from a select, as the checkpointer copies rows
    src = sa.select(
        sa.literal("y").label("k"), sa.literal(7).label("a"), sa.literal("s").label("b")
    )
    copy = db.rules.insert_ignore(t).from_select(["k", "a", "b"], src)
    db.run(lambda c: c.execute(copy), write=True)
    db.run(lambda c: c.execute(copy), write=True)
    assert _rows(db, t) == [("x", 5, "kept"), ("y", 7, "s")]


def test_sizes_limits_and_files(table: tuple[Database, sa.Table], backend: str) -> None:
    db, t = table
    db.run(
        lambda c: c.execute(sa.insert(t), [{"k": str(i), "a": i} for i in range(100)]),
        write=True,
    )
    size = db.run(table_bytes, t)
    assert size is None or size > 0
    if backend != "sqlite":  # dbstat may be left out of a SQLite build
        assert size is not None and size > 0
    packet = db.run(lambda c: db.rules.max_statement_bytes(c))
    assert (packet is not None and packet >= 1 << 20) if backend == "mariadb" else packet is None
    assert db.rules.text_holds_nul is (backend not in ("postgres", "pgbouncer"))
    assert (db.rules.file_path(db.url) is not None) is (backend == "sqlite")
    assert SQLiteRules.file_path(sa.make_url("sqlite://")) is None
