"""The user's long-term facts as a budgeted part of the model input.

A [`ContextPolicy`][langmem_sqlite.ContextPolicy] built with `facts=` reads the facts of the
run's user through [`UserFacts`][langmem_sqlite.store.UserFacts] (most relevant to the latest
human message first with a semantic index, else most recent) and puts them in the system
message (the `<user_facts>` section of [`with_facts`][langmem_sqlite.store.with_facts]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.store.base import BaseStore, Item

from ..store.facts import UserFacts, with_facts
from ..store.facts import _user_id as user_id_from  # the fact tools' rule, shared
from ..validation import check_id
from .structure import merge_system

__all__ = ["FactsSource", "latest_question", "render_facts"]


@dataclass(frozen=True)
class FactsSource:
    """Where a policy finds the user's facts.

    Attributes:
        store: the store holding them; `None`: the running graph's store (`store=` of
            `compile`, `create_react_agent` or `create_agent`).
        namespace_prefix: labels before the user id (as in
            [`UserFacts`][langmem_sqlite.store.UserFacts]).
        user_id_key: the key of the user id in `config["configurable"]` (or the runtime
            context).
    """

    store: BaseStore | None = None
    namespace_prefix: tuple[str, ...] = ("users",)
    user_id_key: str = "user_id"

    def user_facts(
        self,
        config: Any = None,
        *,
        store: BaseStore | None = None,
        user_id: Any = None,
    ) -> UserFacts:
        """The [`UserFacts`][langmem_sqlite.store.UserFacts] of this run's user.

        Args:
            config: the run's `RunnableConfig` (the user id is read from its
                `configurable`, else from the runtime context).
            store: the graph's store, used when the source names none.
            user_id: the user, if the caller knows it (e.g. the chat history's user).

        Raises:
            ValueError: no user id, or no store.
        """
        return UserFacts(
            self._store(store),
            self._user(config, user_id),
            namespace_prefix=self.namespace_prefix,
        )

    def _store(self, given: BaseStore | None) -> BaseStore:
        for store in (self.store, given):
            if store is not None:
                return store
        try:
            from langgraph.config import get_store

            found = get_store()
        except Exception:
            found = None
        if not isinstance(found, BaseStore):
            raise ValueError(
                "facts: no store: pass facts=<a BaseStore such as SQLStore> to the policy, or "
                "compile the graph with store="
            )
        return found

    def _user(self, config: Any, user_id: Any) -> str:
        key = self.user_id_key
        configurable = (config or {}).get("configurable") or {}
        if configurable.get(key) is None and user_id is not None:
            return check_id(user_id, key)
        try:  # the config, else the runtime context: as the fact tools find the user
            return user_id_from(config, key)
        except ValueError as e:
            raise ValueError(
                f"{e}: the policy reads the user's facts: pass "
                f'config={{"configurable": {{"{key}": ...}}}} (or a runtime context with it)'
            ) from None


def latest_question(messages: Sequence[BaseMessage]) -> str | None:
    """The text of the latest human message (the query the facts are ranked for)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text
    return None


def render_facts(system: SystemMessage | None, facts: Sequence[Item]) -> SystemMessage | None:
    """`system` with the facts section (replacing one already there); still one message."""
    if not facts:
        return system
    merged, _ = merge_system(with_facts([system] if system is not None else [], facts))
    return merged
