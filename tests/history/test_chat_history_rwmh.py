"""SQLChatMessageHistory inside a real RunnableWithMessageHistory, sync and async."""

from __future__ import annotations

import warnings

import pytest
import sqlalchemy as sa
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from langmem_sqlite import (
    USER_CONVERSATION_FIELDS,
    ConversationStore,
    SQLChatMessageHistory,
    session_history_factory,
    user_conversation_history_factory,
)

warnings.filterwarnings("ignore", message=".*RunnableWithMessageHistory.*")


class Recorder:
    """A fake model that records what it was sent and answers with a counter."""

    def __init__(self) -> None:
        self.seen: list[list[BaseMessage]] = []

    def __call__(self, prompt: object) -> AIMessage:
        msgs = prompt.to_messages() if hasattr(prompt, "to_messages") else list(prompt)  # type: ignore[attr-defined]
        self.seen.append(msgs)
        return AIMessage(f"answer {len(self.seen)}")


def dict_chain(recorder: Recorder) -> object:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    return prompt | RunnableLambda(recorder)


def test_two_keys_user_and_conversation(db_url: str, prefix: str) -> None:
    rec = Recorder()
    chain = RunnableWithMessageHistory(
        dict_chain(rec),  # type: ignore[arg-type]
        user_conversation_history_factory(db_url, table_prefix=prefix),
        input_messages_key="question",
        history_messages_key="history",
        history_factory_config=USER_CONVERSATION_FIELDS,
    )
    cfg_a = {"configurable": {"user_id": "alice", "conversation_id": "c1"}}
    cfg_b = {"configurable": {"user_id": "bob", "conversation_id": "c1"}}
    assert chain.invoke({"question": "hi, I'm Alice"}, cfg_a).content == "answer 1"
    chain.invoke({"question": "hi, I'm Bob"}, cfg_b)
    chain.invoke({"question": "who am I?"}, cfg_a)
    # the third call saw Alice's first turn and nothing of Bob's
    contents = [m.content for m in rec.seen[2]]
    assert contents == ["Be brief.", "hi, I'm Alice", "answer 1", "who am I?"]
    store = ConversationStore(db_url, table_prefix=prefix)
    assert len(store.get_messages("c1", user_id="alice")) == 4
    assert len(store.get_messages("c1", user_id="bob")) == 2


async def test_two_keys_async(db_url: str, prefix: str) -> None:
    rec = Recorder()
    chain = RunnableWithMessageHistory(
        dict_chain(rec),  # type: ignore[arg-type]
        user_conversation_history_factory(db_url, table_prefix=prefix),
        input_messages_key="question",
        history_messages_key="history",
        history_factory_config=USER_CONVERSATION_FIELDS,
    )
    cfg = {"configurable": {"user_id": "alice", "conversation_id": "c1"}}
    await chain.ainvoke({"question": "one"}, cfg)
    await chain.ainvoke({"question": "two"}, cfg)
    assert [m.content for m in rec.seen[1]] == ["Be brief.", "one", "answer 1", "two"]
    # mixing sync and async on the same store works
    chain.invoke({"question": "three"}, cfg)
    assert len(rec.seen[2]) == 6


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_list_input_mode_with_window(db_url: str, prefix: str, mode: str) -> None:
    """List-input mode reads the history twice per turn; a last-N window must stay correct."""
    model = FakeListChatModel(responses=[f"r{i}" for i in range(20)])
    seen: list[int] = []

    def spy(msgs: list[BaseMessage]) -> list[BaseMessage]:
        seen.append(len(msgs))
        return msgs

    chain = RunnableWithMessageHistory(
        RunnableLambda(spy) | model,
        session_history_factory(db_url, table_prefix=prefix, window=4),
    )
    cfg = {"configurable": {"session_id": "s"}}
    for i in range(5):
        if mode == "invoke":
            chain.invoke([HumanMessage(f"q{i}")], cfg)
        else:
            await chain.ainvoke([HumanMessage(f"q{i}")], cfg)
    assert seen == [1, 3, 5, 5, 5]  # window of 4 + the new question
    everything = ConversationStore(db_url, table_prefix=prefix).get_messages("s")
    assert [m.content for m in everything] == [x for i in range(5) for x in (f"q{i}", f"r{i}")]


def test_snapshot_keeps_new_question_when_another_turn_lands(db_url: str, prefix: str) -> None:
    """A concurrent turn between RWMH's two reads must not make it drop the new question."""
    store = ConversationStore(db_url, table_prefix=prefix)
    store.add_messages("s", [HumanMessage("old q"), AIMessage("old a")])

    def interfering_model(msgs: list[BaseMessage]) -> AIMessage:
        store.add_messages("s", [HumanMessage("other-turn q"), AIMessage("other-turn a")])
        return AIMessage("reply")

    chain = RunnableWithMessageHistory(
        RunnableLambda(interfering_model),
        lambda sid: SQLChatMessageHistory(sid, store=store),
    )
    chain.invoke([HumanMessage("NEW QUESTION")], {"configurable": {"session_id": "s"}})
    contents = [m.content for m in store.get_messages("s")]
    assert "NEW QUESTION" in contents
    assert contents[-2:] == ["NEW QUESTION", "reply"]


def test_history_construction_runs_no_sql(
    db_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ConversationStore(db_url, table_prefix=prefix)
    store.add_messages("s", [HumanMessage("warm up")])
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    engine = store.db.sync_engine
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        for _ in range(200):
            SQLChatMessageHistory("s", db_url, table_prefix=prefix)
            SQLChatMessageHistory("s", store=store)
        assert statements == []
        assert SQLChatMessageHistory("s", db_url, table_prefix=prefix).store.db is store.db
        h = SQLChatMessageHistory("s", db_url, table_prefix=prefix)
        h.add_messages([HumanMessage("q"), AIMessage("a")])
        # one add: a session update (+ a select where UPDATE..RETURNING is missing) + one insert
        writes = [s for s in statements if not s.lstrip().upper().startswith(("SELECT", "BEGIN"))]
        assert len(writes) == 2, statements
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


def test_adapter_methods_and_compat_arguments(db_url: str, prefix: str) -> None:
    h = SQLChatMessageHistory(session_id="s", connection_string=db_url, table_name=prefix[:-1])
    assert h.store.tables.sessions.name == f"{prefix}sessions"
    h.add_user_message("hello")
    h.add_ai_message("hi")
    h.add_message(HumanMessage("third"))
    assert [m.content for m in h.messages] == ["hello", "hi", "third"]
    assert isinstance(h.messages, list) and h.messages is not h.messages
    assert [m.content for m in h.get_messages(limit=1)] == ["third"]
    assert "Human: hello" in str(h)
    h.clear()
    assert h.messages == []
    with pytest.raises(ValueError, match="connection"):
        SQLChatMessageHistory("s", db_url, connection_string=db_url)
    with pytest.raises(ValueError, match="window"):
        SQLChatMessageHistory("s", db_url, window=0)
    with pytest.raises(ValueError, match="limit"):
        h.get_messages(limit=-2)


async def test_adapter_async_methods(db_url: str, prefix: str) -> None:
    h = SQLChatMessageHistory("s", db_url, user_id="u", table_prefix=prefix)
    await h.aadd_messages([HumanMessage("a"), AIMessage("b")])
    assert [m.content for m in await h.aget_messages()] == ["a", "b"]
    assert [m.content for m in h.messages] == ["a", "b"]  # sync on the same object
    await h.aclear()
    assert await h.aget_messages() == []


def test_async_engine_given_sync_methods_work(backend: str, db_url: str, prefix: str) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine
    from support import async_url

    engine = create_async_engine(async_url(db_url))
    h = SQLChatMessageHistory("s", engine, table_prefix=prefix)
    h.add_messages([HumanMessage("from sync code")])
    assert [m.content for m in h.messages] == ["from sync code"]
    assert "from sync code" in str(h)


async def test_limit_zero_is_rejected_even_with_a_window(db_url: str, prefix: str) -> None:
    h = SQLChatMessageHistory("s", db_url, table_prefix=prefix, window=5)
    h.add_messages([HumanMessage("x")])
    with pytest.raises(ValueError, match="limit"):
        h.get_messages(limit=0)
    with pytest.raises(ValueError, match="limit"):
        await h.aget_messages(limit=0)
