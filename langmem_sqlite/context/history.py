"""A Runnable step for ``RunnableWithMessageHistory`` chains, with the summary stored in SQL.

Place it between the prompt and the model::

    chain = prompt | context_step(policy) | model
    RunnableWithMessageHistory(chain, session_history_factory(url), ...)

It reads the prompt's messages (system prompt, full history, new input), applies the policy with
the summary record stored on the session row (:meth:`ConversationStore.get_summary`), stores the
updated record (:meth:`ConversationStore.set_summary`) and passes the model input on. The
history itself stays whole in the database. Watermarks use message positions, so use a history
without ``window=``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig, RunnableLambda

from ..chat_history import SQLChatMessageHistory
from .policy import ContextPolicy
from .summary import dump_record

__all__ = ["context_step"]


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


def context_step(policy: ContextPolicy) -> RunnableLambda[Any, list[BaseMessage]]:
    """A step applying ``policy`` with the summary persisted on the chat history's session."""
    if not isinstance(policy, ContextPolicy):
        raise TypeError(f"policy: expected a ContextPolicy, got {type(policy).__name__}")

    def run(value: Any, config: RunnableConfig) -> list[BaseMessage]:
        h = _history(config)
        record = h.store.get_summary(h.session_id, user_id=h.user_id)
        result = policy.prepare(_messages(value), record)
        if result.summary is not None:
            h.store.set_summary(h.session_id, dump_record(result.summary), user_id=h.user_id)
        return result.messages

    async def arun(value: Any, config: RunnableConfig) -> list[BaseMessage]:
        h = _history(config)
        record = await h.store.aget_summary(h.session_id, user_id=h.user_id)
        result = await policy.aprepare(_messages(value), record)
        if result.summary is not None:
            await h.store.aset_summary(h.session_id, dump_record(result.summary), user_id=h.user_id)
        return result.messages

    return RunnableLambda(run, afunc=arun, name="context_window")
