"""The chat agent's graph (checkpointer, context policy, facts) and `ChatSession`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.base import BaseStore, SearchItem
from typing_extensions import NotRequired, TypedDict

from ..context import ContextPolicy
from ..engine import DatabaseUnavailableError
from ..memory import Memory
from ..store import fact_tools
from ..validation import check_id

SYSTEM_PROMPT = (
    "You are a helpful assistant with a durable memory. When the user states a lasting fact "
    "about themselves, call remember_fact. Use the remembered facts and the conversation "
    "summary you are given."
)


class ChatState(TypedDict):
    """The chat graph's state: the messages and the running-summary record."""

    messages: Annotated[list[AnyMessage], add_messages]
    context_summary: NotRequired[dict[str, Any] | None]


def thread_id_for(user: str, session: str) -> str:
    """The checkpointer thread of `user`'s `session` (two users never share one)."""
    return f"chat:{user}:{session}"


def build_chat_graph(
    model: Any,
    policy: ContextPolicy,
    *,
    checkpointer: Any,
    store: BaseStore,
) -> Any:
    """Compile the chat graph: `START -> agent -(tool calls)-> tools -> agent -> END`.

    `agent` builds the model input with the policy (the summary kept in the state as
    `context_summary`) and calls the model; `tools` runs the fact tools on `store`.

    Args:
        model: a chat model supporting `bind_tools`.
        policy: the context-window policy; built with `facts=True`, it puts the user's facts
            from `store` into the model input within its budget.
        checkpointer: where threads live ([`SQLSaver`][langmem_sqlite.SQLSaver]).
        store: where facts live ([`SQLStore`][langmem_sqlite.SQLStore]).
    """
    if not isinstance(policy, ContextPolicy):
        raise TypeError(f"policy: expected a ContextPolicy, got {type(policy).__name__}")
    tools = fact_tools(store=store)
    bound = model.bind_tools(tools)

    def agent(state: ChatState, config: RunnableConfig) -> dict[str, Any]:
        messages = state["messages"]
        facts = policy.fetch_facts(messages, config, store=store)
        result = policy.prepare(messages, state.get("context_summary"), facts=facts)
        reply = bound.invoke(result.messages, config)
        update: dict[str, Any] = {"messages": [reply]}
        if result.summary is not None:
            update["context_summary"] = result.summary
        return update

    graph = StateGraph(ChatState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer, store=store)


@dataclass
class ChatSession:
    """One user's chat over a [`Memory`][langmem_sqlite.Memory]. Each turn is also copied to
    the conversation tables (with the summary), so `langmem-sqlite sessions` and `history`
    show chats too.

    Args:
        memory: the database (checkpointer, store and conversation tables).
        graph: the graph of [`build_chat_graph`][langmem_sqlite.chat.build_chat_graph] compiled on
            `memory`.
        user: the user id.
        session: the session id; `None` continues the user's most recent chat session
            (or starts `"main"`).
    """

    memory: Memory
    graph: Any
    user: str
    session: str | None = None

    def __post_init__(self) -> None:
        self.user = check_id(self.user, "user")
        if self.session is None:
            self.session = self.latest_session() or "main"
        self.session = check_id(self.session, "session")

    @property
    def config(self) -> RunnableConfig:
        """The graph config of the current session."""
        assert self.session is not None
        return {
            "configurable": {
                "thread_id": thread_id_for(self.user, self.session),
                "user_id": self.user,
                "session": self.session,
            }
        }

    def latest_session(self) -> str | None:
        """The user's most recently active chat session, if any."""
        threads = self.memory.checkpointer.list_threads(metadata={"user_id": self.user}, limit=None)
        for t in threads:
            session = (t.metadata or {}).get("session")
            if t.thread_id.startswith("chat:") and isinstance(session, str):
                return session
        return None

    def send(self, text: str) -> list[BaseMessage]:
        """Run one turn; return the new messages (tool calls, tool results, the answer).

        A turn that fails (the model unreachable, Ctrl-C) keeps what the checkpointer stored
        of it, the question at least, and copies the same to the conversation tables.

        Raises:
            ValueError: `text` is empty.
            DatabaseUnavailableError: the database cannot be used (nothing was copied).
            Exception: the model's error, re-raised.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text: must be a non-empty string")
        before = len(self.messages())
        try:
            out = self.graph.invoke({"messages": [HumanMessage(text)]}, self.config)
        except DatabaseUnavailableError:
            raise  # the memory itself cannot be reached: nothing to copy
        except BaseException:  # the conversation tables keep what the checkpointer kept
            self._mirror(before, self.graph.get_state(self.config).values)
            raise
        self._mirror(before, out)
        return list(out["messages"][before + 1 :])

    def _mirror(self, before: int, values: dict[str, Any]) -> None:
        """Copy the turn's messages (past `before`) and summary to the conversation tables."""
        messages: list[BaseMessage] = values.get("messages", [])
        assert self.session is not None
        store = self.memory.conversations
        mirrored = store.count_messages(self.session, user_id=self.user)
        # normally only this turn's messages; all of them (ids skip the known) after a gap
        store.add_messages(
            self.session,
            messages[before:] if mirrored == before else messages,
            user_id=self.user,
            skip_existing=True,
        )
        record = values.get("context_summary")
        if record:
            store.set_summary(self.session, record["summary"], user_id=self.user)

    def messages(self) -> list[BaseMessage]:
        """Every message of the session (the checkpointed state, untrimmed)."""
        values = self.graph.get_state(self.config).values
        return list(values.get("messages", []))

    def summary(self) -> dict[str, Any] | None:
        """The running-summary record (`summary`, `messages_summarized`...), if any."""
        record = self.graph.get_state(self.config).values.get("context_summary")
        return dict(record) if record else None

    def facts(self) -> list[SearchItem]:
        """The user's long-term facts, most recent first."""
        return self.memory.facts(self.user).list_facts()

    def remember(self, fact: str) -> str:
        """Store a fact about the user directly; return its key."""
        return self.memory.facts(self.user).remember(fact)

    def forget(self, key: str) -> bool:
        """Forget fact `key`; False if there is none."""
        return self.memory.facts(self.user).forget(key)

    def new(self, session: str | None = None) -> str:
        """Switch to session `session`, or to a new one (`YYYYmmdd-HHMMSS-xxxx`); facts stay:
        they belong to the user."""
        if not session:
            now = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
            session = f"{now}-{uuid.uuid4().hex[:4]}"
        self.session = check_id(session, "session")
        return self.session
