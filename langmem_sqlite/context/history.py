"""`context_step`: a policy in a `RunnableWithMessageHistory` chain, the summary on the
session row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig, RunnableLambda

from ..history.chat_history import SQLChatMessageHistory
from .policy import ContextPolicy
from .summary import dump_record, load_record


def _messages(value: Any) -> Sequence[BaseMessage]:
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, Sequence) and all(isinstance(m, BaseMessage) for m in value):
        return value
    raise TypeError(f"input: expected a prompt value or a list of messages, got {type(value)}")


def _history(config: RunnableConfig) -> SQLChatMessageHistory:
    history = (config.get("configurable") or {}).get("message_history")
    if not isinstance(history, SQLChatMessageHistory):
        raise TypeError(
            "context_step: run it inside RunnableWithMessageHistory with a "
            f"SQLChatMessageHistory (got {type(history).__name__})"
        )
    if history.window is not None:
        raise ValueError(
            "context_step: the chat history must not use window= (summary watermarks are "
            "positions in the full history)"
        )
    return history


def _for_policy(h: SQLChatMessageHistory, record: dict[str, Any] | None) -> Any:
    """With `since_summary` the prompt holds only unsummarized history: watermark before it."""
    if record is None or not h.since_summary:
        return record
    return {**record, "upto_index": -1, "upto_id": None}


def _for_storage(
    h: SQLChatMessageHistory, previous: dict[str, Any] | None, new: dict[str, Any]
) -> str | None:
    """The record to store, in positions of the whole history, with `upto_seq` (the stored
    position of the last summarized message) bounding the next read."""
    if not h.since_summary or h.pinned is None:
        return dump_record(new)
    k = int(new["upto_index"])  # among the non-system messages of this prompt
    seqs = [seq for seq, m in h.pinned[1] if m.type != "system"]
    base = int(previous["upto_index"]) if previous else -1
    after = {**new, "upto_index": base + k + 1}
    if 0 <= k < len(seqs):
        after["upto_seq"] = seqs[k]
    elif previous and "upto_seq" in previous:
        after["upto_seq"] = previous["upto_seq"]
    return dump_record(after)


def context_step(policy: ContextPolicy) -> RunnableLambda[Any, list[BaseMessage]]:
    """A step applying `policy` with the summary persisted on the chat history's session.

    ```python
    chain = prompt | context_step(policy) | model
    RunnableWithMessageHistory(chain, session_history_factory(url), ...)
    ```

    The summary record is read from and written to the session row; the history stays whole.
    Watermarks are message positions: use a history without `window=`. With `facts=<store>`
    on the policy, the facts of the history's user are budgeted in.

    Raises:
        ValueError: the policy reads facts from the graph's store (`facts=True`): a chain
            has none, give the policy the store itself.
    """
    if not isinstance(policy, ContextPolicy):
        raise TypeError(f"policy: expected a ContextPolicy, got {type(policy).__name__}")
    if policy.facts_source is not None and policy.facts_source.store is None:
        raise ValueError(
            "context_step: the policy has facts=True (the graph's store), and a chain has no "
            "store: pass facts=<a BaseStore such as SQLStore> to the policy"
        )

    def run(value: Any, config: RunnableConfig) -> list[BaseMessage]:
        h = _history(config)
        if h.since_summary and h.pinned is not None:  # read together with the messages
            record = load_record(h.pinned[0])
        else:
            record = load_record(h.store.get_summary(h.session_id, user_id=h.user_id))
        messages = _messages(value)
        facts = policy.fetch_facts(messages, config, user_id=h.user_id)
        result = policy.prepare(messages, _for_policy(h, record), facts=facts)
        if result.summary is not None:
            text = _for_storage(h, record, result.summary)
            h.store.set_summary(h.session_id, text, user_id=h.user_id)
        return result.messages

    async def arun(value: Any, config: RunnableConfig) -> list[BaseMessage]:
        h = _history(config)
        if h.since_summary and h.pinned is not None:
            record = load_record(h.pinned[0])
        else:
            record = load_record(await h.store.aget_summary(h.session_id, user_id=h.user_id))
        messages = _messages(value)
        facts = await policy.afetch_facts(messages, config, user_id=h.user_id)
        result = await policy.aprepare(messages, _for_policy(h, record), facts=facts)
        if result.summary is not None:
            text = _for_storage(h, record, result.summary)
            await h.store.aset_summary(h.session_id, text, user_id=h.user_id)
        return result.messages

    return RunnableLambda(run, afunc=arun, name="context_window")
