"""RunnableWithMessageHistory + context_step reading only what the summary does not cover.

The same conversation run twice, once reading the whole history every turn and once with
``since_summary=True``: the model must receive exactly the same inputs, while the bounded
variant reads only the unsummarized part from SQL.
"""

from __future__ import annotations

import warnings

from langchain_core.messages import BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from context_fakes import AgentModel, RecordingSummarizer, human_turns  # noqa: E402

from langmem_sqlite import ConversationStore, SQLChatMessageHistory  # noqa: E402
from langmem_sqlite.context import ContextPolicy, context_step, load_record  # noqa: E402

warnings.filterwarnings("ignore", message=".*RunnableWithMessageHistory.*")

SYSTEM = "You are a helpful research assistant."


def _run(url: str, prefix: str, since_summary: bool, turns: int) -> tuple[AgentModel, list[int]]:
    model, summ = AgentModel(answer_words=120), RecordingSummarizer()
    policy = ContextPolicy(
        max_tokens=3000,
        model="gpt-4o",
        summarizer=summ,
        keep_tokens=900,
        max_summary_tokens=400,
    )
    store = ConversationStore(url, table_prefix=prefix)
    reads: list[int] = []

    def history(session_id: str) -> SQLChatMessageHistory:
        h = SQLChatMessageHistory(session_id, store=store, since_summary=since_summary)
        original = h.get_messages

        def get_messages(limit: int | None = None) -> list[BaseMessage]:
            got = original(limit)
            reads.append(len(got))
            return got

        h.get_messages = get_messages  # type: ignore[method-assign]
        return h

    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | context_step(policy) | model,
        history,
        input_messages_key="question",
        history_messages_key="history",
    )
    cfg = {"configurable": {"session_id": "s"}}
    for h in human_turns(turns, seed=11, words=60):
        chain.invoke({"question": h.text.split(" [tools")[0]}, cfg)
    assert store.count_messages("s") == 2 * turns  # everything stays stored
    return model, reads


def test_since_summary_gives_the_same_model_inputs(db_url: str, prefix: str) -> None:
    turns = 40
    full_model, full_reads = _run(db_url, prefix + "a", False, turns)
    bounded_model, bounded_reads = _run(db_url, prefix + "b", True, turns)
    assert [[m.content for m in call] for call in bounded_model.calls] == [
        [m.content for m in call] for call in full_model.calls
    ]
    # the full variant reads the whole history; the bounded one only what is not summarized
    assert max(full_reads) == 2 * (turns - 1)
    # bounded by the summary trigger (about 26 messages here), not by the history's length
    assert max(bounded_reads) <= 30 < max(full_reads)
    assert sum(bounded_reads) < 0.6 * sum(full_reads)
    store = ConversationStore(db_url, table_prefix=prefix + "b")
    record = load_record(store.get_summary("s"))
    assert record is not None and record["updates"] >= 2 and "upto_seq" in record
    for p in ("a", "b"):
        ConversationStore(db_url, table_prefix=prefix + p).tables.metadata.drop_all(
            store.db.sync_engine
        )
