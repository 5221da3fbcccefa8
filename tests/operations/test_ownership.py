"""Whose thread is it: ``users``, ``threads --user``, ``prune --user``, ``copy --user`` and
``forget_user`` use one rule (any checkpoint naming the user under ``user_id`` or
``langgraph_auth_user_id``, as a string or, for a numeric id, an integer), so what the listings
show is what is copied and deleted."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langmem_sqlite import ConversationStore, SQLSaver, SQLStore
from langmem_sqlite.cli import cli as cli_group
from langmem_sqlite.operations.copy import copy_database
from langmem_sqlite.operations.erasure import forget_user, threads_of_user
from langmem_sqlite.operations.maintenance import list_users, prune
from langmem_sqlite.operations.ownership import named_users, thread_users

# thread -> the metadata of its checkpoints, oldest first
HISTORIES: dict[str, list[dict[str, Any]]] = {
    # named by its first checkpoint only: a later run went without the id
    "t-first-only": [{"source": "input", "user_id": "ada"}, {"source": "loop", "step": 1}],
    # the LangGraph server's authenticated user
    "t-auth": [{"source": "input", "langgraph_auth_user_id": "ada"}],
    # a numeric id, copied from ``configurable`` as an int
    "t-int": [{"source": "input", "user_id": 42}],
    # two users over time
    "t-shared": [{"source": "input", "user_id": "bob"}, {"source": "loop", "user_id": "ada"}],
    "t-bob": [{"source": "input", "user_id": "bob"}],
    # not a user id: a bool, an empty string
    "t-nobody": [{"source": "input", "user_id": True}, {"source": "loop", "user_id": ""}],
}
EXPECTED = {
    "ada": {"t-first-only", "t-auth", "t-shared"},
    "bob": {"t-shared", "t-bob"},
    "42": {"t-int"},
}


def _fill(saver: SQLSaver) -> None:
    for thread, history in HISTORIES.items():
        cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for metadata in history:
            cfg = saver.put(cfg, empty_checkpoint(), metadata, {})


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(cli_group, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_named_users_reads_strings_and_ints_only() -> None:
    assert named_users({"user_id": "ada", "langgraph_auth_user_id": 7}) == {"ada", "7"}
    assert named_users({"user_id": True, "langgraph_auth_user_id": " "}) == set()
    assert named_users({"user_id": 1.5}) == set() and named_users(None) == set()


def test_listing_retention_copy_and_erasure_agree_on_whose_thread(
    db_url: str, prefix: str, tmp_path: Path
) -> None:
    saver = SQLSaver(db_url, table_prefix=prefix)
    saver.setup()
    _fill(saver)
    assert _invert(thread_users(saver)) == EXPECTED
    for user, threads in EXPECTED.items():
        assert threads_of_user(saver, user) == threads
    assert threads_of_user(saver, "nobody") == set()
    with pytest.raises(ValueError, match="user_id"):
        threads_of_user(saver, " ")

    store = ConversationStore(db_url, table_prefix=prefix)
    kv = SQLStore(db_url, table_prefix=prefix)
    counts = {r["user_id"]: r["threads"] for r in list_users(store, saver, kv)}
    assert counts == {u: len(t) for u, t in EXPECTED.items()}

    common = ["--db", db_url, "--prefix", prefix]
    assert {r["user_id"]: r["threads"] for r in _cli("users", *common)} == counts
    time.sleep(0.01)  # every thread idle for more than 0 days
    for user, threads in EXPECTED.items():
        listed = {r["thread_id"] for r in _cli("threads", *common, "--user", user)}
        pruned = prune(store, saver, 0, user_id=user, dry_run=True).threads
        cli_pruned = _cli("prune", "--older-than", "0", "--dry-run", "--user", user, *common)
        forgotten = forget_user(saver.db, user, dry_run=True, table_prefix=prefix).thread_ids
        assert listed == set(pruned) == set(cli_pruned["threads"]) == set(forgotten) == threads
    assert len(_cli("threads", *common, "--user", "ada", "--limit", "2")) == 2

    # a copy of one user holds exactly that user's threads
    for user, threads in EXPECTED.items():
        target = f"sqlite:///{tmp_path}/copy-{user}.db"
        copy_database(db_url, target, table_prefix=prefix, user_id=user)
        copied = SQLSaver(target, table_prefix=prefix).list_threads()
        assert {t.thread_id for t in copied} == threads

    # pruning one user's threads deletes exactly those
    prune(store, saver, 0, user_id="ada")
    left = {r.thread_id for r in saver.list_threads()}
    assert left == set(HISTORIES) - EXPECTED["ada"]


def test_an_encrypting_saver_decodes_metadata_to_find_the_user(db_url: str, prefix: str) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"o" * 32)
    saver = SQLSaver(db_url, table_prefix=prefix, serde=serde)
    saver.setup()
    assert not saver.searchable_metadata
    _fill(saver)
    assert _invert(thread_users(saver)) == EXPECTED
    assert threads_of_user(saver, "ada") == EXPECTED["ada"]
    store = ConversationStore(db_url, table_prefix=prefix)
    time.sleep(0.01)
    # list_threads(metadata=...) needs searchable metadata; the rule does not
    assert set(prune(store, saver, 0, user_id="42", dry_run=True).threads) == {"t-int"}


def _invert(by_thread: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for thread, users in by_thread.items():
        for user in users:
            out.setdefault(user, set()).add(thread)
    return out
