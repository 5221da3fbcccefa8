"""Export a session (conversation tables) or a thread (checkpointer) as JSON, JSONL or Markdown.

A document is a plain dict: `{"kind", "id", "user_id", "summary", "messages", ...}` with the
messages in LangChain's `message_to_dict` form, so `messages_from_dict` reads them back.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage, messages_to_dict

from ..history.store import ConversationStore
from ..validation import IdLike, check_id

__all__ = ["FORMATS", "render", "session_document", "thread_document"]

FORMATS = ("json", "jsonl", "md")


def session_document(
    store: ConversationStore, session_id: IdLike, *, user_id: IdLike | None = None
) -> dict[str, Any]:
    """A session's messages, title and summary.

    Raises:
        LookupError: no such session.
    """
    info = store.get_session(session_id, user_id=user_id)
    if info is None:
        who = f" of user {user_id!r}" if user_id is not None else ""
        raise LookupError(f"session: no session {str(session_id)!r}{who}")
    messages = store.get_messages(session_id, user_id=user_id)
    return {
        "kind": "session",
        "id": info.session_id,
        "user_id": info.user_id,
        "title": info.title,
        "summary": store.get_summary(session_id, user_id=user_id),
        "messages": messages_to_dict(messages),
    }


def thread_document(saver: Any, thread_id: str) -> dict[str, Any]:
    """A thread's latest root state (its `messages` and summary record) and checkpoint list.

    Raises:
        LookupError: no such thread.
    """
    thread_id = check_id(thread_id, "thread")
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    latest = saver.get_tuple(config)
    if latest is None:
        raise LookupError(f"thread: no thread {thread_id!r}")
    values = latest.checkpoint["channel_values"]
    messages = [m for m in values.get("messages", []) if isinstance(m, BaseMessage)]
    record = values.get("context_summary")
    checkpoints = [
        {
            "checkpoint_id": t.config["configurable"]["checkpoint_id"],
            "checkpoint_ns": t.config["configurable"].get("checkpoint_ns", ""),
            "step": (t.metadata or {}).get("step"),
            "source": (t.metadata or {}).get("source"),
        }
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    ]
    return {
        "kind": "thread",
        "id": thread_id,
        "user_id": (latest.metadata or {}).get("user_id"),
        "summary": record.get("summary") if isinstance(record, dict) else None,
        "messages": messages_to_dict(messages),
        "checkpoints": checkpoints,
    }


def _markdown(doc: dict[str, Any]) -> str:
    lines = [f"# {doc['kind'].capitalize()} {doc['id']}", ""]
    if doc.get("user_id"):
        lines += [f"User: {doc['user_id']}", ""]
    if doc.get("summary"):
        lines += ["## Summary", "", str(doc["summary"]), ""]
    lines += ["## Messages", ""]
    for m in doc["messages"]:
        data = m["data"]
        content = data.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        calls = ", ".join(c["name"] for c in data.get("tool_calls") or [])
        lines += [f"**{m['type']}**{f' (calls {calls})' if calls else ''}: {text}", ""]
    return "\n".join(lines)


def render(doc: dict[str, Any], fmt: str) -> str:
    """`doc` as `json` (the whole document), `jsonl` (one message per line) or `md`.

    Raises:
        ValueError: an unknown format.
    """
    if fmt == "json":
        return json.dumps(doc, ensure_ascii=False, indent=2, default=str) + "\n"
    if fmt == "jsonl":
        return "".join(
            json.dumps(m, ensure_ascii=False, default=str) + "\n" for m in doc["messages"]
        )
    if fmt == "md":
        return _markdown(doc)
    raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
