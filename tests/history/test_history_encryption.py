"""Encryption at rest of the chat history, verified by reading the raw rows: with a key, no
message text, title or summary is stored in plaintext; a wrong or missing key and a row moved to
another session are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from support import ENCRYPTION_KEY, SECRET, raw_dump

from langmem_sqlite import ConversationStore, SQLChatMessageHistory
from langmem_sqlite.crypto import MessageCipher


def test_encrypted_history_has_no_plaintext(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix, encryption_key=ENCRYPTION_KEY)
    messages: list[BaseMessage] = [
        HumanMessage(f"my password is {SECRET}", id="m1"),
        AIMessage(
            [{"type": "text", "text": f"noted {SECRET}"}],
            tool_calls=[{"name": "save", "args": {"p": SECRET}, "id": "c1"}],
        ),
        ToolMessage(SECRET, tool_call_id="c1"),
    ]
    store.add_messages("s", messages, user_id="u")
    store.rename_session("s", f"title {SECRET}", user_id="u")
    store.set_summary("s", f"summary {SECRET}", user_id="u")
    assert store.get_messages("s", user_id="u") == messages
    assert store.get_token_window("s", 100_000, user_id="u") == messages
    info = store.get_session("s", user_id="u")
    assert info is not None and info.title == f"title {SECRET}"
    assert store.get_summary("s", user_id="u") == f"summary {SECRET}"
    assert [i.title for i in store.list_sessions("u")] == [f"title {SECRET}"]
    t = store.tables
    raw = raw_dump(store.db.sync_engine, [t.sessions, t.messages])
    assert SECRET.encode() not in raw and b"password" not in raw and b"noted" not in raw
    with store.db.sync_engine.connect() as conn:
        texts = conn.execute(sa.select(t.messages.c.content_text)).scalars().all()
    assert texts == ["", "", ""]  # the searchable column holds nothing


async def test_encrypted_history_async_and_history_adapter(db_url: str, prefix: str) -> None:
    history = SQLChatMessageHistory("s", db_url, table_prefix=prefix, encryption_key=ENCRYPTION_KEY)
    await history.aadd_messages([HumanMessage(SECRET)])
    history.add_message(AIMessage(SECRET + "!"))
    assert [m.content for m in await history.aget_messages()] == [SECRET, SECRET + "!"]
    t = history.store.tables
    assert SECRET.encode() not in raw_dump(history.store.db.sync_engine, [t.messages])


def test_wrong_key_missing_key_and_moved_rows_are_refused(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix, encryption_key=ENCRYPTION_KEY)
    store.add_messages("s", [HumanMessage(SECRET)], user_id="alice")
    store.add_messages("s", [HumanMessage("bob's")], user_id="bob")
    with pytest.raises(ValueError, match="decrypted"):
        ConversationStore(db_url, table_prefix=prefix, encryption_key=b"x" * 32).get_messages(
            "s", user_id="alice"
        )
    with pytest.raises(ValueError, match="encrypted"):
        ConversationStore(db_url, table_prefix=prefix).get_messages("s", user_id="alice")
    # an attacker with write access moves alice's encrypted row into bob's session
    t = store.tables
    with store.db.sync_engine.begin() as conn:
        pks = dict(conn.execute(sa.select(t.sessions.c.user_id, t.sessions.c.id)).all())
        body = conn.execute(
            sa.select(t.messages.c.body).where(t.messages.c.session_pk == pks["alice"])
        ).scalar_one()
        conn.execute(
            sa.update(t.messages).where(t.messages.c.session_pk == pks["bob"]).values(body=body)
        )
    with pytest.raises(ValueError, match="another session"):
        store.get_messages("s", user_id="bob")
    assert [m.content for m in store.get_messages("s", user_id="alice")] == [SECRET]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"encryption_key": b"short"}, ValueError),
        ({"encryption_key": 12345}, TypeError),
        ({"cipher": "aes"}, TypeError),
        ({"encryption_key": ENCRYPTION_KEY, "cipher": MessageCipher(ENCRYPTION_KEY)}, ValueError),
    ],
)
def test_bad_encryption_options(tmp_path: Path, kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ConversationStore(tmp_path / "x.db", **kwargs)
