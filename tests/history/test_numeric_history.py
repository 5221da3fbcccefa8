"""Numeric parameters of the chat history and the whole-database operations, on every database.

Every public numeric parameter (limits, offsets, token budgets, days, sizes, batch sizes; sync
and async) is driven with values no database holds or the parameter does not mean: integers
past 2**63 - 1, negative numbers, NaN, the infinities, floats where an int is expected, and
``bool``. Each must raise a ``ValueError`` naming the parameter and its range before anything
is read or written; the tables are compared before and after. The valid edges (0, 1,
2**63 - 1, the largest number of days) work. The CLI turns the same values into usage errors
naming the option.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from langmem_sqlite import ConversationStore, SQLChatMessageHistory, SQLSaver, copy_database
from langmem_sqlite.cli import cli
from langmem_sqlite.history.store import MAX_DAYS, MAX_MESSAGE_TOKENS
from langmem_sqlite.operations.copy import MAX_BATCH_SIZE
from langmem_sqlite.operations.importers import import_chat_history
from langmem_sqlite.operations.maintenance import prune
from langmem_sqlite.validation import INT64_MAX

FUZZ = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)

NAN, INF = float("nan"), float("inf")


def _ints_outside(low: int, high: int) -> st.SearchStrategy[Any]:
    """Values an int parameter from ``low`` to ``high`` must refuse."""
    return st.one_of(
        st.integers(min_value=high + 1),
        st.integers(max_value=low - 1),
        st.sampled_from([2**63, 2**64, 10**30, -(2**63) - 1, high + 1, low - 1]),
        st.booleans(),
        st.sampled_from([NAN, INF, -INF]),
        st.floats(allow_nan=True, allow_infinity=True),  # a float is never an int
    )


def _numbers_outside(low: float, high: float) -> st.SearchStrategy[Any]:
    """Values a number parameter from ``low`` to ``high`` must refuse."""
    return st.one_of(
        st.floats(min_value=high, exclude_min=True, allow_infinity=True),
        st.floats(max_value=low - 1e-9, allow_infinity=True),
        st.integers(min_value=int(high) + 1),
        st.integers(max_value=math.ceil(low) - 1),
        st.sampled_from([NAN, INF, -INF, 1e300, -1e-300, 2**63, 10**30]),
        st.booleans(),
    )


def _run(call: Any) -> Any:
    """The value of a sync call, or of an async one (run to its end)."""
    return asyncio.run(call) if asyncio.iscoroutine(call) else call


def _state(store: ConversationStore) -> tuple[Any, ...]:
    """Everything the tables hold, row by row (sessions with their counts, then messages)."""
    t = store.tables
    with store.db.sync_engine.connect() as conn:
        sessions = conn.execute(sa.select(t.sessions).order_by(t.sessions.c.id)).all()
        messages = conn.execute(sa.select(t.messages).order_by(t.messages.c.id)).all()
    return tuple(map(tuple, sessions)), tuple(map(tuple, messages))


@pytest.fixture
def store(db_url: str, prefix: str) -> ConversationStore:
    s = ConversationStore(db_url, table_prefix=prefix)
    for session, user in (("s", None), ("s", "u1"), ("t", "u2")):
        s.add_messages(session, [HumanMessage(f"q {session}"), AIMessage("a")], user_id=user)
    return s


def _history(store: ConversationStore, **kw: Any) -> SQLChatMessageHistory:
    return SQLChatMessageHistory("s", store=store, **kw)


# name -> (parameter, its bad values, call(store, value))
Call = Callable[[ConversationStore, Any], Any]
INTS_1 = _ints_outside(1, INT64_MAX)
INTS_0 = _ints_outside(0, INT64_MAX)
DAYS = _numbers_outside(0, MAX_DAYS)

CALLS: dict[str, tuple[str, st.SearchStrategy[Any], Call]] = {
    "get_messages": ("limit", INTS_1, lambda s, v: s.get_messages("s", limit=v)),
    "aget_messages": ("limit", INTS_1, lambda s, v: s.aget_messages("s", limit=v)),
    "get_token_window": ("max_tokens", INTS_0, lambda s, v: s.get_token_window("s", v)),
    "aget_token_window": ("max_tokens", INTS_0, lambda s, v: s.aget_token_window("s", v)),
    "load_window.limit": ("limit", INTS_1, lambda s, v: s.load_window("s", limit=v)),
    "aload_window.limit": ("limit", INTS_1, lambda s, v: s.aload_window("s", limit=v)),
    "load_window.limit+max_tokens": (
        "limit",
        INTS_1,
        lambda s, v: s.load_window("s", limit=v, max_tokens=100),
    ),
    "load_window.max_tokens": (
        "max_tokens",
        INTS_0,
        lambda s, v: s.load_window("s", max_tokens=v),
    ),
    "aload_window.max_tokens": (
        "max_tokens",
        INTS_0,
        lambda s, v: s.aload_window("s", max_tokens=v),
    ),
    "list_sessions.limit": ("limit", INTS_1, lambda s, v: s.list_sessions(limit=v)),
    "alist_sessions.limit": ("limit", INTS_1, lambda s, v: s.alist_sessions(limit=v)),
    "list_sessions.offset": ("offset", INTS_0, lambda s, v: s.list_sessions(offset=v)),
    "alist_sessions.offset": ("offset", INTS_0, lambda s, v: s.alist_sessions(offset=v)),
    "delete_sessions_older_than": ("days", DAYS, lambda s, v: s.delete_sessions_older_than(v)),
    "adelete_sessions_older_than": (
        "days",
        DAYS,
        lambda s, v: s.adelete_sessions_older_than(v),
    ),
    "delete_sessions_older_than.user": (
        "days",
        DAYS,
        lambda s, v: s.delete_sessions_older_than(v, user_id="u1"),
    ),
    "ConversationStore.max_message_bytes": (
        "max_message_bytes",
        INTS_1,
        lambda s, v: ConversationStore(s.db, table_prefix=s.tables.prefix, max_message_bytes=v),
    ),
    "ConversationStore.token_counter": (
        "token_counter",
        _ints_outside(0, MAX_MESSAGE_TOKENS),
        lambda s, v: ConversationStore(
            s.db, table_prefix=s.tables.prefix, token_counter=lambda m: v
        ).add_messages("s", [HumanMessage("counted")]),
    ),
    "ConversationStore.token_counter async": (
        "token_counter",
        _ints_outside(0, MAX_MESSAGE_TOKENS),
        lambda s, v: ConversationStore(
            s.db, table_prefix=s.tables.prefix, token_counter=lambda m: v
        ).aadd_messages("s", [HumanMessage("counted")]),
    ),
    "SQLChatMessageHistory.window": ("window", INTS_1, lambda s, v: _history(s, window=v)),
    "SQLChatMessageHistory.get_messages": (
        "limit",
        INTS_1,
        lambda s, v: _history(s).get_messages(v),
    ),
    "SQLChatMessageHistory.aget_messages": (
        "limit",
        INTS_1,
        lambda s, v: _history(s).aget_messages(v),
    ),
    "SQLChatMessageHistory.get_token_window": (
        "max_tokens",
        INTS_0,
        lambda s, v: _history(s).get_token_window(v),
    ),
    "SQLChatMessageHistory.aget_token_window": (
        "max_tokens",
        INTS_0,
        lambda s, v: _history(s).aget_token_window(v),
    ),
    "maintenance.prune": (
        "days",
        DAYS,
        lambda s, v: prune(s, SQLSaver(s.db, table_prefix=s.tables.prefix), v),
    ),
    "maintenance.prune dry run": (
        "days",
        DAYS,
        lambda s, v: prune(s, SQLSaver(s.db, table_prefix=s.tables.prefix), v, dry_run=True),
    ),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_bad_numbers_refused_before_any_write(store: ConversationStore, name: str) -> None:
    parameter, values, call = CALLS[name]
    before = _state(store)

    @FUZZ
    @given(value=values)
    def refused(value: Any) -> None:
        with pytest.raises(ValueError, match=rf"^{parameter}: .*expected an? (int|number) "):
            _run(call(store, value))

    refused()
    assert _state(store) == before


@pytest.mark.parametrize("parameter", ["batch_size"])
def test_operations_batch_sizes_refused(
    store: ConversationStore, tmp_path: Path, parameter: str
) -> None:
    """copy_database and import_chat_history refuse a bad batch size before reading or writing
    (the target stays empty; the source is not even opened)."""
    before = _state(store)
    target = f"sqlite:///{tmp_path}/target.db"
    missing = tmp_path / "no-such-source.db"

    @FUZZ
    @given(value=_ints_outside(1, MAX_BATCH_SIZE))
    def refused(value: Any) -> None:
        with pytest.raises(ValueError, match=r"^batch_size: expected an int from 1 to 100_000"):
            copy_database(store.db, target, table_prefix=store.tables.prefix, batch_size=value)
        with pytest.raises(ValueError, match=r"^batch_size: expected an int from 1 to 100_000"):
            import_chat_history(missing, store, batch_size=value)

    refused()
    assert not (tmp_path / "target.db").exists()
    assert _state(store) == before


# -- the valid edges ---------------------------------------------------------------------------


def test_largest_counts_work(store: ConversationStore) -> None:
    both = [HumanMessage("q s"), AIMessage("a")]
    texts = [m.content for m in both]
    assert [m.content for m in store.get_messages("s", limit=INT64_MAX)] == texts
    assert [m.content for m in asyncio.run(store.aget_messages("s", limit=INT64_MAX))] == texts
    assert [m.content for m in store.get_messages("s", limit=1)] == ["a"]
    assert len(store.get_token_window("s", INT64_MAX)) == 2
    assert store.get_token_window("s", 0) == []
    assert len(store.load_window("s", limit=INT64_MAX, max_tokens=INT64_MAX)) == 2
    assert len(store.list_sessions(limit=INT64_MAX)) == 3
    assert store.list_sessions(offset=INT64_MAX) == []
    assert store.list_sessions(limit=1, offset=0)[0].session_id in ("s", "t")
    history = _history(store, window=INT64_MAX)
    assert [m.content for m in history.messages] == texts
    assert len(history.get_token_window(INT64_MAX)) == 2
    assert ConversationStore(store.db, max_message_bytes=INT64_MAX).max_message_bytes == INT64_MAX


def test_days_edges(store: ConversationStore) -> None:
    before = _state(store)
    assert store.delete_sessions_older_than(MAX_DAYS) == 0
    assert store.delete_sessions_older_than(float(MAX_DAYS)) == 0
    assert asyncio.run(store.adelete_sessions_older_than(365.25)) == 0
    assert store.delete_sessions_older_than(0.5, user_id="u1") == 0
    report = prune(store, SQLSaver(store.db, table_prefix=store.tables.prefix), MAX_DAYS)
    assert report.sessions == [] and report.threads == []
    assert _state(store) == before
    # 0 days: every session idle for any time at all
    assert store.delete_sessions_older_than(0, user_id="u2") in (0, 1)


def test_largest_token_count_is_stored(store: ConversationStore) -> None:
    counted = ConversationStore(
        store.db, table_prefix=store.tables.prefix, token_counter=lambda m: MAX_MESSAGE_TOKENS
    )
    assert counted.add_messages("big", [HumanMessage("x"), HumanMessage("y")]) == 2
    assert counted.get_session("big").token_total == 2 * MAX_MESSAGE_TOKENS  # type: ignore[union-attr]
    assert [m.content for m in counted.get_token_window("big", MAX_MESSAGE_TOKENS)] == ["y"]


def test_a_summary_record_past_any_position_reads_everything(store: ConversationStore) -> None:
    """``upto_seq`` comes from the stored summary record: a value no position has (too large
    for the database, negative, not an int) makes the read start at the beginning."""
    for upto in (2**63, 10**30, -5, "x", 1.5e300):
        store.set_summary("s", f'{{"upto_seq": {upto!r}}}'.replace("'", '"'))
        history = _history(store, since_summary=True)
        assert [m.content for m in history.messages] == ["q s", "a"]


def test_copy_and_import_batch_size_edges(
    store: ConversationStore, tmp_path: Path, prefix: str
) -> None:
    report = copy_database(
        store.db, f"sqlite:///{tmp_path}/one.db", table_prefix=prefix, batch_size=1
    )
    assert report.verified and report.copied >= 9
    report = copy_database(
        store.db, f"sqlite:///{tmp_path}/max.db", table_prefix=prefix, batch_size=MAX_BATCH_SIZE
    )
    assert report.verified and report.copied >= 9


# -- the command line ------------------------------------------------------------------------


@pytest.fixture
def cli_db(tmp_path: Path) -> str:
    path = tmp_path / "cli.db"
    ConversationStore(str(path)).add_messages("s", [HumanMessage("hi")])
    return str(path)


BAD_COMMANDS = [
    (["sessions", "--limit", "0"], "--limit"),
    (["sessions", "--limit", str(2**63)], "--limit"),
    (["sessions", "--limit", "-1"], "--limit"),
    (["sessions", "--limit", "1.5"], "--limit"),
    (["sessions", "--limit", "nan"], "--limit"),
    (["threads", "--limit", str(10**30)], "--limit"),
    (["history", "s", "--limit", str(2**63)], "--limit"),
    (["checkpoints", "t", "--limit", str(2**64)], "--limit"),
    (["prune", "--older-than", "nan"], "--older-than"),
    (["prune", "--older-than", "inf"], "--older-than"),
    (["prune", "--older-than", "-inf"], "--older-than"),
    (["prune", "--older-than", "-1"], "--older-than"),
    (["prune", "--older-than", "1e300"], "--older-than"),
    (["prune", "--older-than", str(MAX_DAYS + 1)], "--older-than"),
    (["prune", "--older-than", "soon"], "--older-than"),
    (["copy", "--from", "{db}", "--to", "{tmp}/x.db", "--batch-size", "0"], "--batch-size"),
    (["copy", "--from", "{db}", "--to", "{tmp}/x.db", "--batch-size", "100001"], "--batch-size"),
    (["copy", "--from", "{db}", "--to", "{tmp}/x.db", "--batch-size", str(2**63)], "--batch-size"),
    (["chat", "--offline", "--max-tokens", str(2**63)], "--max-tokens"),
    (["chat", "--offline", "--trigger-tokens", str(10**30)], "--trigger-tokens"),
    (["chat", "--offline", "--max-tokens", "nan"], "--max-tokens"),
]


@pytest.mark.parametrize(
    ("args", "option"), BAD_COMMANDS, ids=[" ".join(a) for a, _ in BAD_COMMANDS]
)
def test_cli_bad_numbers_are_usage_errors(
    cli_db: str, tmp_path: Path, args: list[str], option: str
) -> None:
    store = ConversationStore(cli_db)
    before = _state(store)
    argv = [a.format(db=cli_db, tmp=tmp_path) for a in args]
    if "--from" not in argv:
        argv += ["--db", cli_db]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert not (tmp_path / "x.db").exists()
    assert _state(store) == before


def test_cli_numeric_edges_work(cli_db: str, tmp_path: Path) -> None:
    for argv in (
        ["sessions", "--limit", str(INT64_MAX)],
        ["history", "s", "--limit", str(INT64_MAX)],
        ["prune", "--older-than", str(MAX_DAYS), "--dry-run"],
        ["prune", "--older-than", "0.5"],
        ["copy", "--from", cli_db, "--to", f"{tmp_path}/y.db", "--batch-size", "100000"],
    ):
        if "--from" not in argv:
            argv += ["--db", cli_db]
        result = CliRunner().invoke(cli, argv, catch_exceptions=False)
        assert result.exit_code == 0, (argv, result.output)
    assert [m.content for m in ConversationStore(f"{tmp_path}/y.db").get_messages("s")] == ["hi"]
