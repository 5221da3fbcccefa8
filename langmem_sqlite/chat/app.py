"""The terminal chat: choosing its model, setup from options, the read-eval loop."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ..context import ContextPolicy
from ..engine import DatabaseUnavailableError
from ..memory import Memory
from ..messages.counting import resolve_message_counter
from .agent import SYSTEM_PROMPT, ChatSession, build_chat_graph
from .offline import OFFLINE_LABEL, OfflineChatModel

DEFAULT_MODEL = "gpt-4o-mini"
_OPENAI_API = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ChosenModel:
    """The chat model, a human-readable label, and whether it is the offline stand-in."""

    model: Any
    label: str
    offline: bool
    name: str
    why: str = ""
    """Why this model was chosen (shown by the chat's banner)."""
    endpoint: str | None = None
    """The OpenAI-compatible server it talks to (`--base-url`, or `OPENAI_BASE_URL` in the
    environment), `None` for the OpenAI API and the offline stand-in."""


def choose_model(
    model: str | None = None,
    *,
    base_url: str | None = None,
    offline: bool = False,
    env: dict[str, str] | None = None,
) -> ChosenModel:
    """`ChatOpenAI` when `OPENAI_API_KEY` is set or `base_url` is given (any
    OpenAI-compatible server, e.g. a local one), else the offline stand-in.

    The label names the server the model talks to: `base_url`, else `OPENAI_BASE_URL` when it
    points away from the OpenAI API.

    Raises:
        ValueError: `offline` together with `base_url`.
        ImportError: a real model is wanted but `langchain-openai` is not installed.
    """
    env = dict(os.environ) if env is None else env
    if offline and base_url:
        raise ValueError("base_url: cannot be combined with offline")
    key = env.get("OPENAI_API_KEY")
    if offline or (not key and not base_url):
        why = "--offline" if offline else "no OPENAI_API_KEY and no --base-url"
        return ChosenModel(OfflineChatModel(), OFFLINE_LABEL, True, "offline", why)
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as e:  # pragma: no cover - the openai extra is in the test extra
        raise ImportError(
            'a real model needs langchain-openai: the package\'s "openai" extra '
            '(pip install ".[openai]" in its checkout)'
        ) from e
    name = model or DEFAULT_MODEL
    kwargs: dict[str, Any] = {"model": name, "api_key": key or "not-needed"}
    if base_url:
        kwargs["base_url"] = base_url
    chat_model = ChatOpenAI(**kwargs)
    # without base_url the client reads OPENAI_BASE_URL: name the server it really talks to
    url = base_url or str(chat_model.root_client.base_url).rstrip("/")
    endpoint = None if url == _OPENAI_API else url
    where = f"at {endpoint}" if endpoint else "on the OpenAI API"
    why = "--base-url" if base_url else "OPENAI_API_KEY is set"
    return ChosenModel(chat_model, f"{name} {where}", False, name, why, endpoint)


COMMANDS = {
    "/summary": "the running summary of this session",
    "/history [N]": "this session's messages (the last N) with token counts",
    "/facts": "what is remembered about you across sessions",
    "/remember TEXT": "store a fact about you",
    "/forget ID": "forget a fact",
    "/new [ID]": "start a new session (facts stay)",
    "/session": "which user, session and database this is",
    "/help": "this list",
    "/quit": "leave (the memory stays in the database)",
}

Echo = Callable[[str], None]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _reason(e: Exception) -> str:
    """The error on one line (a SQLAlchemy error's driver message, without its statement)."""
    return " ".join(str(getattr(e, "orig", None) or e).split()) or "no details given"


def open_chat(
    db: str,
    *,
    user: str,
    session: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    offline: bool = False,
    max_tokens: int | None = None,
    trigger_tokens: int | None = None,
    prefix: str | None = None,
) -> tuple[ChatSession, ChosenModel]:
    """Build the chat on database `db` for `user` (`session=None`: continue the latest).

    The offline model gets a small budget (`max_tokens=2000`, summary past 600 tokens) so
    summaries show up within a short conversation.
    """
    chosen = choose_model(model, base_url=base_url, offline=offline)
    memory = Memory(db) if prefix is None else Memory(db, table_prefix=prefix)
    if max_tokens is None and (chosen.offline or chosen.endpoint):
        max_tokens = 2_000 if chosen.offline else 8_000
    if trigger_tokens is None and chosen.offline:
        trigger_tokens = 600
    policy = ContextPolicy(
        max_tokens=max_tokens,
        model=None if chosen.offline else chosen.name,
        # exact for OpenAI model names wherever they are served, estimated for other names
        token_counter="approximate" if chosen.offline else None,
        system_prompt=SYSTEM_PROMPT,
        summarizer=chosen.model,
        trigger_tokens=trigger_tokens,
        facts=True,  # the user's facts from the graph's store, within a quarter of the budget
        facts_share=0.25,
    )
    graph = build_chat_graph(
        chosen.model, policy, checkpointer=memory.checkpointer, store=memory.store
    )
    return ChatSession(memory, graph, user, session), chosen


def _show(message: BaseMessage, echo: Echo) -> None:
    if isinstance(message, AIMessage) and message.tool_calls:
        for call in message.tool_calls:
            echo(f"  [memory] {call['name']}({json.dumps(call['args'], ensure_ascii=False)})")
    elif isinstance(message, ToolMessage):
        echo(f"  [memory] -> {message.text}")
    elif message.text:
        echo(f"bot> {message.text}")


def _history(chat: ChatSession, arg: str, echo: Echo) -> None:
    if arg and (not arg.isdigit() or int(arg) < 1):
        raise ValueError(f"/history: expected a positive number, got {arg!r}")
    messages = chat.messages()
    counter = resolve_message_counter(None)
    echo(f"session {chat.session}: {_count(len(messages), 'message')}")
    for m in messages[-int(arg) :] if arg else messages:
        text = m.text or ", ".join(c["name"] for c in getattr(m, "tool_calls", []))
        echo(f"  {m.type:>5} ({counter(m):>4} tok) {text}")


def _summary(chat: ChatSession, echo: Echo) -> None:
    record = chat.summary()
    if not record:
        echo("no summary yet (it is written once the conversation passes the trigger)")
        return
    summarized = _count(record["messages_summarized"], "message")
    echo(f"summary of {summarized} ({_count(record['updates'], 'update')}):")
    for line in str(record["summary"]).splitlines():
        echo(f"  {line}")


def _facts(chat: ChatSession, echo: Echo) -> None:
    facts = chat.facts()
    if not facts:
        echo(f"no facts remembered about {chat.user} yet")
    for item in facts:
        echo(f"  {item.key}: {item.value.get('fact')}")


def command(chat: ChatSession, line: str, echo: Echo) -> bool:
    """Run a `/command`; False when the chat should end."""
    name, _, arg = line.strip().partition(" ")
    arg = arg.strip()
    if name in ("/quit", "/exit"):
        return False
    if name == "/summary":
        _summary(chat, echo)
    elif name == "/history":
        _history(chat, arg, echo)
    elif name == "/facts":
        _facts(chat, echo)
    elif name == "/remember":
        if not arg:
            echo("usage: /remember TEXT (a fact about you, kept across sessions)")
        else:
            echo(f"remembered (id: {chat.remember(arg)})")
    elif name == "/forget":
        if not arg:
            echo("usage: /forget ID (/facts lists the ids)")
        else:
            echo("forgotten" if chat.forget(arg) else f"no fact with id {arg!r}")
    elif name == "/new":
        session = chat.new(arg or None)
        n = len(chat.messages())
        if n:
            echo(f"switched to session {session} (continuing, {_count(n, 'message')})")
        else:
            echo(f"new session {session} (facts about {chat.user} stay)")
    elif name == "/session":
        echo(f"user {chat.user}, session {chat.session}, database {chat.memory.db.url}")
    elif name == "/help":
        for usage, what in COMMANDS.items():
            echo(f"  {usage:<15} {what}")
    else:
        echo(f"unknown command {name!r}; /help lists them")
    return True


def run_lines(
    chat: ChatSession,
    lines: Iterable[str],
    echo: Echo,
    *,
    show_input: bool,
    interruptible: bool = False,
) -> int:
    """Feed `lines` (turns and `/commands`; blank lines and `#` comments skipped) to the
    chat; return the number of turns sent. Errors in a command, and a turn that fails (the
    model unreachable or refusing), are shown on one line and the chat goes on; the failed
    question stays in the session (see [`ChatSession.send`][langmem_sqlite.chat.ChatSession.send]).

    With `interruptible`, Ctrl-C (`KeyboardInterrupt`) during a reply stops that reply
    and the chat goes on: what was stored stays.

    Raises:
        DatabaseUnavailableError: the database cannot be used (the chat ends).
        TypeError: `lines` is a single `str` (pass `text.splitlines()`).
    """
    if isinstance(lines, str):
        raise TypeError("lines: expected an iterable of lines, got str (use text.splitlines())")
    turns = 0
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if show_input:
            echo(f"you> {line}")
        if line.startswith("/"):
            try:
                if not command(chat, line, echo):
                    break
            except (ValueError, TypeError) as e:
                echo(f"error: {e}")
            continue
        try:
            for message in chat.send(line):
                _show(message, echo)
        except KeyboardInterrupt:
            if not interruptible:
                raise
            echo("(reply interrupted; the conversation so far is kept)")
            continue
        except DatabaseUnavailableError:
            raise  # without its memory the chat cannot go on
        except Exception as e:
            echo(f"error: no reply: {_reason(e)} (your message is kept)")
            continue
        turns += 1
    return turns


def banner(chat: ChatSession, chosen: ChosenModel, echo: Echo) -> None:
    """Say which database, user, session and model this is; flag the offline model plainly."""
    n = len(chat.messages())
    state = f"continuing, {_count(n, 'message')}" if n else "new"
    echo(f"langmem-sqlite chat: {chat.memory.db.url}")
    echo(f"user {chat.user}, session {chat.session} ({state}); /help for commands")
    if chosen.offline:
        echo(
            f"model: OFFLINE stand-in, rule-based, NOT an LLM ({chosen.why}). It only answers "
            "from what memory hands it."
        )
    else:
        echo(f"model: {chosen.label}")
