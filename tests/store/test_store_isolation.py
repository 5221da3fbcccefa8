"""Isolation and injection in the long-term store and user facts, on SQLite, PostgreSQL and
MariaDB.

An injection attempt goes into every public string input of the store and of ``UserFacts``: it
is stored and read back verbatim, and no table, row or other user is touched. User A never reads
user B's facts through any public API, including ids that are LIKE patterns, differ in case or
trailing space.
"""

from __future__ import annotations

from support import INJECTIONS, LOOKALIKES, add_canary, assert_intact

from langmem_sqlite import SQLStore
from langmem_sqlite.store import UserFacts


def test_injection_into_every_store_input(db_url: str, prefix: str) -> None:
    canary = add_canary(db_url, prefix)
    store = SQLStore(db_url, table_prefix=prefix)
    store.put(("users", "alice"), "k", {"v": "alice's"})
    for raw in INJECTIONS:
        s = raw.replace("{p}", prefix)
        ns = ("users", s)
        store.put(ns, s, {s: s, "f": s})
        item = store.get(ns, s)
        assert item is not None and item.value == {s: s, "f": s} and item.key == s
        found = store.search(ns, query=s, filter={"f": s})
        assert [(tuple(i.namespace), i.key) for i in found] == [(ns, s)]
        assert store.search(ns, filter={"f": {"$ne": s}}) == []
        assert ns in store.list_namespaces(prefix=ns)
        assert store.list_namespaces(suffix=(s,), max_depth=2) == [ns]
        facts = UserFacts(store, s)
        key = facts.remember(s)
        assert [i.value["fact"] for i in facts.list_facts()] == [s]
        assert facts.update(key, s + "!")
        assert facts.forget(key)
        store.delete(ns, s)
        assert store.get(ns, s) is None
        assert_intact(store.db.sync_engine, prefix, canary)
        assert store.get(("users", "alice"), "k").value == {"v": "alice's"}  # type: ignore[union-attr]


def test_users_never_see_each_other_in_the_store_and_facts(db_url: str, prefix: str) -> None:
    store = SQLStore(db_url, table_prefix=prefix)
    for user in LOOKALIKES:
        UserFacts(store, user).remember(f"fact of {user!r}")
    for user in LOOKALIKES:
        facts = UserFacts(store, user)
        assert [i.value["fact"] for i in facts.list_facts()] == [f"fact of {user!r}"]
        assert [i.value["fact"] for i in facts.select()] == [f"fact of {user!r}"]
        items = store.search(("users", user))
        assert {tuple(i.namespace)[:2] for i in items} == {("users", user)}
        assert {ns[:2] for ns in store.list_namespaces(prefix=("users", user))} == {("users", user)}
    # another user's fact key is not reachable through one's own UserFacts
    alice = UserFacts(store, "alice")
    (item,) = UserFacts(store, "al%").list_facts()
    assert not alice.forget(item.key)
    assert not alice.update(item.key, "overwritten")
    assert [i.value["fact"] for i in UserFacts(store, "al%").list_facts()] == ["fact of 'al%'"]
