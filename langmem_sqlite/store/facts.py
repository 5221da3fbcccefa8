"""User facts for agents: remembered across conversations, shown to the model within a budget.

Facts live in any LangGraph `BaseStore` under `(*namespace_prefix, user_id, "facts")`, one item
per fact (`{"fact": "...", "source": ...}`); candidates extracted by a model wait under
`(..., user_id, "pending_facts")` until confirmed. [`UserFacts`][langmem_sqlite.store.UserFacts]
manages them, [`facts_hook`][langmem_sqlite.store.facts_hook] puts them into the system message
before a model call, [`fact_tools`][langmem_sqlite.store.fact_tools] lets an agent change them.
Each operation is a generator of store operations, run by `store.batch` or `store.abatch`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchItem, SearchOp

from ..messages.checks import check_messages
from ..messages.counting import resolve_message_counter
from ..plans import adrive, drive
from ..validation import IdLike, check_id, check_int, check_list, check_positive, check_text
from .checks import PAGE_MAX

__all__ = ["MAX_FACT_CHARS", "UserFacts", "fact_tools", "facts_hook", "with_facts"]

T = TypeVar("T")

FACTS = "facts"
PENDING = "pending_facts"
MAX_FACT_CHARS = 2_000
_OPEN, _CLOSE = "<user_facts>", "</user_facts>"
_SECTION = re.compile(re.escape(_OPEN) + r".*?" + re.escape(_CLOSE), re.DOTALL)

StorePlan = Generator[list[Op], list[Any], T]
"""A fact operation: yields batches of store operations, receives their results."""


def _fact_text(text: Any, name: str = "fact") -> str:
    """A fact's text, whitespace collapsed: not empty, at most `MAX_FACT_CHARS` characters."""
    if not isinstance(text, str):
        raise TypeError(f"{name}: expected str, got {type(text).__name__}")
    cleaned = " ".join(text.split())
    if not cleaned:
        raise ValueError(f"{name}: must not be empty")
    if len(cleaned) > MAX_FACT_CHARS:
        raise ValueError(f"{name}: longer than {MAX_FACT_CHARS} characters")
    return cleaned


def _same(a: str, b: str) -> bool:
    return " ".join(a.casefold().split()) == " ".join(b.casefold().split())


def _rank(items: Sequence[SearchItem]) -> list[SearchItem]:
    """Most relevant first (scored before unscored), then most recently updated."""
    return sorted(
        items, key=lambda i: (i.score is None, -(i.score or 0.0), -i.updated_at.timestamp())
    )


def _check_prefix(prefix: Any) -> tuple[str, ...]:
    """A namespace prefix: a tuple (or list) of `str` labels; a `str` is refused, not split."""
    labels = tuple(check_list(prefix, "namespace_prefix"))
    for label in labels:
        check_text(label, "namespace_prefix")
    return labels


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise TypeError(f"user_id_key: expected a non-empty str, got {key!r}")
    return key


def _check_items(facts: Any, name: str = "facts") -> list[Item]:
    """A list of items (each with a `key` and a mapping `value`); a `str` is refused, not split."""
    items = check_list(facts, name)
    for i, item in enumerate(items):
        if not (hasattr(item, "key") and isinstance(getattr(item, "value", None), Mapping)):
            raise TypeError(
                f"{name}[{i}]: expected a store Item (a key and a dict value), got "
                f"{type(item).__name__}"
            )
    return items


class UserFacts:
    """The facts about one user, in a `BaseStore`.

    Args:
        store: where facts live (`SQLStore`, `InMemoryStore`...).
        user_id: the user (str, int or UUID).
        namespace_prefix: labels before the user id (default `("users",)`).
        max_facts: most facts considered by [`select`][langmem_sqlite.store.facts.UserFacts.select]
            and listed by [`list_facts`][langmem_sqlite.store.facts.UserFacts.list_facts].

    Raises:
        ValueError: `max_facts` not an int from 1 to `2**31 - 1` (the store's page bound;
            `bool`, floats, NaN and infinities refused), or a bad `user_id`.
        TypeError: `namespace_prefix` a `str` (pass a tuple of labels) or holding a non-str.
    """

    def __init__(
        self,
        store: BaseStore,
        user_id: IdLike,
        *,
        namespace_prefix: tuple[str, ...] = ("users",),
        max_facts: int = 200,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise TypeError(f"store: expected a BaseStore, got {type(store).__name__}")
        namespace_prefix = _check_prefix(namespace_prefix)
        # it is the limit of the store's searches: within every store's page bound
        self.max_facts = check_int(max_facts, "max_facts", low=1, high=PAGE_MAX)
        self.store = store
        self.user_id = check_id(user_id, "user_id")
        self.namespace = (*namespace_prefix, self.user_id, FACTS)
        self.pending_namespace = (*namespace_prefix, self.user_id, PENDING)

    # -- plans -------------------------------------------------------------------------------

    def _remember(self, text: str, key: str | None, source: str) -> StorePlan[str]:
        fact = _fact_text(text)
        key = check_id(key, "key") if key is not None else uuid.uuid4().hex
        yield [PutOp(self.namespace, key, {"fact": fact, "source": source})]
        return key

    def _update(self, key: str, text: str) -> StorePlan[bool]:
        fact = _fact_text(text)
        (item,) = yield [GetOp(self.namespace, check_id(key, "key"))]
        if item is None:
            return False
        yield [PutOp(self.namespace, item.key, {**item.value, "fact": fact})]
        return True

    def _forget(self, key: str, pending: bool = False) -> StorePlan[bool]:
        ns = self.pending_namespace if pending else self.namespace
        (item,) = yield [GetOp(ns, check_id(key, "key"))]
        if item is not None:
            yield [PutOp(ns, item.key, None)]
        return item is not None

    def _list(self, pending: bool = False) -> StorePlan[list[SearchItem]]:
        ns = self.pending_namespace if pending else self.namespace
        (items,) = yield [SearchOp(ns, limit=self.max_facts)]
        return _rank(items)

    def _propose(self, candidates: Sequence[str], source: str) -> StorePlan[list[str]]:
        texts = [_fact_text(c, "candidates") for c in check_list(candidates, "candidates")]
        known, waiting = yield [
            SearchOp(self.namespace, limit=10_000),
            SearchOp(self.pending_namespace, limit=10_000),
        ]
        seen = [i.value.get("fact", "") for i in (*known, *waiting)]
        new: list[tuple[str, str]] = []
        for text in texts:
            if not any(_same(text, s) for s in seen):
                seen.append(text)
                new.append((uuid.uuid4().hex, text))
        if new:
            yield [
                PutOp(self.pending_namespace, key, {"fact": text, "source": source})
                for key, text in new
            ]
        return [key for key, _ in new]

    def _confirm(self, key: str) -> StorePlan[str | None]:
        (item,) = yield [GetOp(self.pending_namespace, check_id(key, "key"))]
        if item is None:
            return None
        yield [
            PutOp(self.namespace, item.key, item.value),
            PutOp(self.pending_namespace, item.key, None),
        ]
        return str(item.key)

    def _select(
        self, query: str | None, max_tokens: int, token_counter: Any
    ) -> StorePlan[list[SearchItem]]:
        check_positive(max_tokens, "max_tokens", allow_zero=True)
        if query is not None:
            check_text(query, "query")
        counter = resolve_message_counter(token_counter)
        (items,) = yield [SearchOp(self.namespace, query=query or None, limit=self.max_facts)]
        chosen: list[SearchItem] = []
        used = counter(SystemMessage(f"{_OPEN}{_CLOSE}"))
        for item in _rank(items):
            cost = counter(HumanMessage(_line(item)))
            if used + cost <= max_tokens:
                chosen.append(item)
                used += cost
        return chosen

    # -- sync and async API --------------------------------------------------------------------

    def remember(self, fact: str, *, key: str | None = None) -> str:
        """Store a confirmed fact; return its key (a new one unless `key` is given)."""
        return drive(self._remember(fact, key, "user"), self.store.batch)

    async def aremember(self, fact: str, *, key: str | None = None) -> str:
        """Async [`remember`][langmem_sqlite.store.facts.UserFacts.remember]."""
        return await adrive(self._remember(fact, key, "user"), self.store.abatch)

    def update(self, key: str, fact: str) -> bool:
        """Replace the text of fact `key`; False if there is no such fact."""
        return drive(self._update(key, fact), self.store.batch)

    async def aupdate(self, key: str, fact: str) -> bool:
        """Async [`update`][langmem_sqlite.store.facts.UserFacts.update]."""
        return await adrive(self._update(key, fact), self.store.abatch)

    def forget(self, key: str) -> bool:
        """Delete fact `key`; False if there was no such fact."""
        return drive(self._forget(key), self.store.batch)

    async def aforget(self, key: str) -> bool:
        """Async [`forget`][langmem_sqlite.store.facts.UserFacts.forget]."""
        return await adrive(self._forget(key), self.store.abatch)

    def list_facts(self, *, pending: bool = False) -> list[SearchItem]:
        """The facts (or the pending candidates), most recent first."""
        return drive(self._list(pending), self.store.batch)

    async def alist_facts(self, *, pending: bool = False) -> list[SearchItem]:
        """Async [`list_facts`][langmem_sqlite.store.facts.UserFacts.list_facts]."""
        return await adrive(self._list(pending), self.store.abatch)

    def propose(self, candidates: Sequence[str], *, source: str = "extracted") -> list[str]:
        """Keep candidate facts as pending (skipping ones already known or pending, ignoring
        case and spacing); return the new pending keys.

        Raises:
            TypeError: `candidates` is a single `str` (pass `[fact]`), or holds a non-str.
        """
        return drive(self._propose(candidates, source), self.store.batch)

    async def apropose(self, candidates: Sequence[str], *, source: str = "extracted") -> list[str]:
        """Async [`propose`][langmem_sqlite.store.facts.UserFacts.propose]."""
        return await adrive(self._propose(candidates, source), self.store.abatch)

    def confirm(self, key: str) -> str | None:
        """Turn pending candidate `key` into a fact; its key, or None if not pending."""
        return drive(self._confirm(key), self.store.batch)

    async def aconfirm(self, key: str) -> str | None:
        """Async [`confirm`][langmem_sqlite.store.facts.UserFacts.confirm]."""
        return await adrive(self._confirm(key), self.store.abatch)

    def reject(self, key: str) -> bool:
        """Drop pending candidate `key`; False if it was not pending."""
        return drive(self._forget(key, pending=True), self.store.batch)

    async def areject(self, key: str) -> bool:
        """Async [`reject`][langmem_sqlite.store.facts.UserFacts.reject]."""
        return await adrive(self._forget(key, pending=True), self.store.abatch)

    def select(
        self, query: str | None = None, *, max_tokens: int = 500, token_counter: Any = None
    ) -> list[SearchItem]:
        """The facts to show the model: most relevant to `query` first (if the store has a
        semantic index), then most recent, as many as fit in `max_tokens`.

        Raises:
            ValueError: `max_tokens` not an int from 0 to `INT64_MAX`; checked before the
                store is read.
            TypeError: `query` neither a `str` nor `None`.
        """
        return drive(self._select(query, max_tokens, token_counter), self.store.batch)

    async def aselect(
        self, query: str | None = None, *, max_tokens: int = 500, token_counter: Any = None
    ) -> list[SearchItem]:
        """Async [`select`][langmem_sqlite.store.facts.UserFacts.select]."""
        return await adrive(self._select(query, max_tokens, token_counter), self.store.abatch)


def _line(item: Item) -> str:
    return f"- {item.value.get('fact', '')} (id: {item.key})"


def _section(items: Sequence[Item]) -> str:
    if not items:
        return ""
    lines = "\n".join(_line(i) for i in items)
    return f"{_OPEN}\nWhat you know about the user from earlier conversations:\n{lines}\n{_CLOSE}"


def with_facts(messages: Sequence[BaseMessage], facts: Sequence[Item]) -> list[BaseMessage]:
    """`messages` with the facts section in the system message (added, or replacing an
    earlier section); a system message is prepended if there is none.

    Raises:
        TypeError: `messages` is not a list of messages or `facts` not a list of store
            items (a `str` is refused for either, not split).
    """
    messages = check_messages(messages)
    section = _section(_check_items(facts))
    first = messages[0] if messages else None
    if isinstance(first, SystemMessage) and isinstance(first.content, str):
        base = _SECTION.sub("", first.content).rstrip()
        content = f"{base}\n\n{section}" if base and section else (base or section)
        return [first.model_copy(update={"content": content}), *messages[1:]]
    if not section:
        return list(messages)
    return [SystemMessage(section), *messages]


def _last_human(messages: Sequence[BaseMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text
    return None


def _user_id(config: RunnableConfig | None, key: str) -> str:
    configurable = (config or {}).get("configurable") or {}
    if configurable.get(key) is not None:
        return check_id(configurable[key], key)
    try:
        from langgraph.runtime import get_runtime

        context = get_runtime().context
    except Exception:
        context = None
    value = context.get(key) if isinstance(context, dict) else getattr(context, key, None)
    if value is None:
        raise ValueError(f"{key}: not in config['configurable'] nor in the runtime context")
    return check_id(value, key)


def _store(store: BaseStore | None) -> BaseStore:
    if store is not None:
        return store
    from langgraph.config import get_store

    return get_store()


def facts_hook(
    *,
    store: BaseStore | None = None,
    max_tokens: int = 500,
    token_counter: Any = None,
    namespace_prefix: tuple[str, ...] = ("users",),
    user_id_key: str = "user_id",
    output: str = "llm_input_messages",
) -> RunnableLambda[dict[str, Any], dict[str, Any]]:
    """A graph node / `pre_model_hook` that puts the user's facts in the system message.

    The user comes from `config["configurable"][user_id_key]` or the runtime context; the
    store from `store` or the graph's (`get_store()`). The facts are those of
    [`UserFacts.select`][langmem_sqlite.store.facts.UserFacts.select] for the last human message,
    within `max_tokens`.

    Args:
        output: `"llm_input_messages"` (default: the model sees the facts, the state keeps
            its messages, as `create_react_agent`'s `pre_model_hook` expects) or
            `"messages"` (the updated system message is written to the state).
    """
    if output not in ("llm_input_messages", "messages"):
        raise ValueError("output: expected 'llm_input_messages' or 'messages'")
    check_positive(max_tokens, "max_tokens", allow_zero=True)
    namespace_prefix = _check_prefix(namespace_prefix)
    _check_key(user_id_key)

    def prepare(
        state: Any, config: RunnableConfig | None
    ) -> tuple[UserFacts, list[Any], str | None]:
        messages = check_messages(state["messages"] if isinstance(state, dict) else state.messages)
        facts = UserFacts(
            _store(store), _user_id(config, user_id_key), namespace_prefix=namespace_prefix
        )
        return facts, messages, _last_human(messages)

    def finish(messages: list[BaseMessage], chosen: list[SearchItem]) -> dict[str, Any]:
        updated = with_facts(messages, chosen)
        if output == "messages":  # replace the whole list: the system message must stay first
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *updated]}
        return {"llm_input_messages": updated}

    def hook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        facts, messages, query = prepare(state, config)
        return finish(
            messages, facts.select(query, max_tokens=max_tokens, token_counter=token_counter)
        )

    async def ahook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        facts, messages, query = prepare(state, config)
        chosen = await facts.aselect(query, max_tokens=max_tokens, token_counter=token_counter)
        return finish(messages, chosen)

    return RunnableLambda(hook, afunc=ahook, name="facts_hook")


def fact_tools(
    *,
    store: BaseStore | None = None,
    namespace_prefix: tuple[str, ...] = ("users",),
    user_id_key: str = "user_id",
) -> list[BaseTool]:
    """`remember_fact`, `update_fact` and `forget_fact` tools for an agent (sync and
    async); the user and store are found as in [`facts_hook`][langmem_sqlite.store.facts_hook]."""
    namespace_prefix = _check_prefix(namespace_prefix)
    _check_key(user_id_key)

    def facts(config: RunnableConfig) -> UserFacts:
        return UserFacts(
            _store(store), _user_id(config, user_id_key), namespace_prefix=namespace_prefix
        )

    def remember_fact(fact: str, config: RunnableConfig) -> str:
        """Remember a lasting fact the user stated about themselves (preferences, name, diet)."""
        return f"remembered (id: {facts(config).remember(fact)})"

    async def aremember_fact(fact: str, config: RunnableConfig) -> str:
        return f"remembered (id: {await facts(config).aremember(fact)})"

    def update_fact(fact_id: str, fact: str, config: RunnableConfig) -> str:
        """Correct a remembered fact, given its id, when the user says it changed."""
        return "updated" if facts(config).update(fact_id, fact) else f"no fact with id {fact_id}"

    async def aupdate_fact(fact_id: str, fact: str, config: RunnableConfig) -> str:
        ok = await facts(config).aupdate(fact_id, fact)
        return "updated" if ok else f"no fact with id {fact_id}"

    def forget_fact(fact_id: str, config: RunnableConfig) -> str:
        """Forget a remembered fact, given its id, when it is wrong or the user asks."""
        return "forgotten" if facts(config).forget(fact_id) else f"no fact with id {fact_id}"

    async def aforget_fact(fact_id: str, config: RunnableConfig) -> str:
        return "forgotten" if await facts(config).aforget(fact_id) else f"no fact with id {fact_id}"

    pairs: list[tuple[Callable[..., Any], Callable[..., Any]]] = [
        (remember_fact, aremember_fact),
        (update_fact, aupdate_fact),
        (forget_fact, aforget_fact),
    ]
    return [StructuredTool.from_function(func=f, coroutine=af) for f, af in pairs]
