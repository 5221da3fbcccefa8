"""Where a policy finds the user's long-term facts, and how they enter the system message."""

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


@dataclass(frozen=True)
class FactsSource:
    """Where a policy finds the user's facts (`store=None`: the running graph's store)."""

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
        """The `UserFacts` of this run's user (`user_id`, else from `config` or the runtime
        context), in this source's store, else `store`, else the graph's; `ValueError` if none."""
        return UserFacts(
            self._store(store),
            self._user(config, user_id),
            namespace_prefix=self.namespace_prefix,
        )

    def _store(self, given: BaseStore | None) -> BaseStore:
        if self.store is not None or given is not None:
            return self.store if self.store is not None else given
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
