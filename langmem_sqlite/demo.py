"""A runnable demonstration: a conversation survives a process restart in a SQLite file.

``langmem-sqlite demo`` runs two separate Python processes against one SQLite file:

1. the first holds two turns of a conversation through ``RunnableWithMessageHistory`` and exits;
2. the second starts fresh, reads the stored history back, and asks a question whose answer
   needs what the first process stored.

The "model" is a small offline rule-based stand-in (no API key needed): it answers only from the
messages it is sent, so a correct answer shows the memory was loaded from the database.
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda

from .chat_history import session_history_factory

__all__ = ["offline_model", "run_demo"]

SESSION = "demo-session"
FIRST_PROCESS_TURNS = ["Hi, my name is Ada.", "I live in Lyon."]
SECOND_PROCESS_TURN = "What is my name, and where do I live?"


def offline_model(prompt: object) -> AIMessage:
    """A deterministic stand-in for an LLM that only knows what is in ``prompt``."""
    messages: list[BaseMessage] = (
        prompt.to_messages() if hasattr(prompt, "to_messages") else list(prompt)  # type: ignore[attr-defined,call-overload]
    )
    said = " ".join(str(m.content) for m in messages if m.type == "human")
    name = re.findall(r"my name is (\w+)", said)
    place = re.findall(r"I live in (\w+)", said)
    question = str(messages[-1].content)
    if "name" in question and "?" in question:
        if name and place:
            return AIMessage(f"Your name is {name[-1]} and you live in {place[-1]}.")
        return AIMessage("I don't know yet.")
    return AIMessage(f"Noted. (I have seen {len(messages) - 1} earlier messages.)")


def _chain(db: str) -> object:
    from langchain_core.runnables.history import RunnableWithMessageHistory

    prompt = ChatPromptTemplate.from_messages(
        [("system", "You remember the user."), MessagesPlaceholder("history"), ("human", "{q}")]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RunnableWithMessageHistory(
            prompt | RunnableLambda(offline_model),  # type: ignore[arg-type]
            session_history_factory(db),
            input_messages_key="q",
            history_messages_key="history",
        )


def _turn(chain: object, text: str) -> None:
    reply = chain.invoke({"q": text}, {"configurable": {"session_id": SESSION}})  # type: ignore[attr-defined]
    print(f"  user: {text}")
    print(f"  bot:  {reply.content}")


def _phase(phase: str, db: str) -> None:
    from .chat_history import SQLChatMessageHistory

    chain = _chain(db)
    if phase == "write":
        for text in FIRST_PROCESS_TURNS:
            _turn(chain, text)
        return
    stored = SQLChatMessageHistory(SESSION, db).messages
    print(f"  read back {len(stored)} messages stored by the first process:")
    for m in stored:
        print(f"    {m.type:>5}: {m.content}")
    _turn(chain, SECOND_PROCESS_TURN)


def run_demo(db: str | Path = "langmem-demo.db") -> int:
    """Run both processes against ``db`` and return 0 if the memory was recalled."""
    db = str(Path(db).expanduser().absolute())
    for suffix in ("", "-wal", "-shm"):
        Path(db + suffix).unlink(missing_ok=True)
    print(f"Memory file: {db}  (offline demo model: rule-based, not an LLM)")
    out = ""
    for n, phase in enumerate(("write", "read"), start=1):
        print(f"\nProcess {n} ({'new conversation' if phase == 'write' else 'after a restart'}):")
        proc = subprocess.run(
            [sys.executable, "-m", "langmem_sqlite.demo", phase, db],
            capture_output=True,
            text=True,
            check=False,
        )
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        out = proc.stdout
    ok = "Your name is Ada and you live in Lyon." in out
    print("\nThe second process answered from memory stored by the first." if ok else "\nFAILED")
    return 0 if ok else 1


if __name__ == "__main__":  # python -m langmem_sqlite.demo write|read DB
    _phase(sys.argv[1], sys.argv[2])
