"""Commands that look inside a database: users, sessions, threads, history, checkpoints,
facts, stats and export. None of them creates a database."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path
from typing import Any

import click

from .base import (
    cli,
    database,
    database_options,
    db_option,
    json_option,
    limit_option,
    opened,
    prefix_option,
    user_option,
    with_options,
)
from .output import count, err, out

listing_options = with_options([db_option, user_option, limit_option, prefix_option, json_option])
"""`--db --user --limit --prefix --json`, the options of every listing."""


def _when(moment: int | dt.datetime) -> str:
    """A time (ms since the epoch, or a datetime) for a table: UTC, with its offset."""
    if isinstance(moment, int):
        moment = dt.datetime.fromtimestamp(moment / 1000, dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc).isoformat(" ", "seconds")


def _session_store(db: str | None, prefix: str, session: str, user: str | None) -> Any:
    """The conversation store, once it holds `session` of `user`; else the error naming the
    users who have a session so called."""
    from ..operations.maintenance import users_with_session

    conversations = opened("store", db, prefix)
    if conversations.get_session(session, user_id=user) is not None:
        return conversations
    message = f"no session {session!r}" + (f" of user {user!r}" if user else " without a user")
    others = [u for u in users_with_session(conversations, session) if u != (user or "")]
    named = [u for u in others if u]
    if named:
        listed = ", ".join(repr(u) for u in named[:5]) + (" ..." if len(named) > 5 else "")
        hint = f"--user {shlex.quote(named[0])}" if len(named) == 1 else "--user U"
        message += f"; user(s) {listed} have one: add {hint}"
    elif others:  # only the session without a user
        message += "; there is one without a user: leave out --user"
    raise click.ClickException(message)


@cli.command()
@database_options
def users(db: str | None, prefix: str, as_json: bool) -> None:
    """List users, with their sessions, checkpointer threads and facts."""
    from ..operations.maintenance import list_users

    rows = list_users(*(opened(kind, db, prefix) for kind in ("store", "saver", "kv")))
    if as_json:
        out.json(rows)
        return
    out.table(
        ("user", "sessions", "threads", "facts"),
        ((r["user_id"], r["sessions"], r["threads"], r["facts"]) for r in rows),
    )


@cli.command()
@listing_options
def sessions(
    db: str | None, user: str | None, limit: int | None, prefix: str, as_json: bool
) -> None:
    """List sessions (conversation tables), most recently active first."""
    rows = opened("store", db, prefix).list_sessions(user, limit=limit)
    if as_json:
        out.json([r.__dict__ for r in rows])
        return
    # the title column only where a session has one (the chat names none)
    titled = any(r.title for r in rows)
    out.table(
        ("user", "session", *(("title",) if titled else ()), "messages", "tokens", "last active"),
        (
            (
                r.user_id,
                r.session_id,
                *((r.title,) if titled else ()),
                r.message_count,
                r.token_total,
                _when(r.updated_at),
            )
            for r in rows
        ),
    )


@cli.command()
@listing_options
def threads(
    db: str | None, user: str | None, limit: int | None, prefix: str, as_json: bool
) -> None:
    """List checkpointer threads, most recently updated first (--user: the threads any of whose
    checkpoints name the user, those forget-user deletes)."""
    from ..operations.erasure import threads_of_user

    cp = opened("saver", db, prefix)
    if user is None:
        rows = cp.list_threads(limit=limit)
    else:
        mine = threads_of_user(cp, user)
        rows = [r for r in cp.list_threads() if r.thread_id in mine][:limit]
    if as_json:
        out.json([r.__dict__ for r in rows])
        return
    out.table(
        ("thread", "user", "checkpoints", "last update"),
        (
            (
                r.thread_id,
                (r.metadata or {}).get("user_id"),
                r.checkpoint_count,
                _when(r.updated_at),
            )
            for r in rows
        ),
    )


@cli.command()
@click.argument("session")
@listing_options
def history(
    session: str, db: str | None, user: str | None, limit: int | None, prefix: str, as_json: bool
) -> None:
    """Show a session's messages in order (the last --limit N), token counts and summary."""
    from langchain_core.messages import message_to_dict

    from ..messages.counting import resolve_message_counter

    conversations = _session_store(db, prefix, session, user)
    msgs = conversations.get_messages(session, user_id=user, limit=limit)
    summary = conversations.get_summary(session, user_id=user)
    counter = resolve_message_counter(None)
    if as_json:
        out.json(
            {
                "session_id": session,
                "user_id": user,
                "summary": summary,
                "messages": [{**message_to_dict(m), "tokens": counter(m)} for m in msgs],
            }
        )
        return
    if summary:
        out.line(("summary", "bold"), ": ", summary)
    for m in msgs:
        out.line((f"{m.type:>6}", "bold"), f" ({counter(m):>4} tok) ", m.text)


@cli.command()
@click.argument("thread")
@db_option
@limit_option
@prefix_option
@json_option
def checkpoints(thread: str, db: str | None, limit: int | None, prefix: str, as_json: bool) -> None:
    """Show a thread's checkpoints, newest first."""
    rows = []
    for t in opened("saver", db, prefix).list({"configurable": {"thread_id": thread}}, limit=limit):
        values = t.checkpoint["channel_values"]
        rows.append(
            {
                "checkpoint_id": t.config["configurable"]["checkpoint_id"],
                "checkpoint_ns": t.config["configurable"].get("checkpoint_ns", ""),
                "parent_id": (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "step": (t.metadata or {}).get("step"),
                "source": (t.metadata or {}).get("source"),
                "messages": len(values.get("messages", []) or []),
                "pending_writes": len(t.pending_writes or []),
            }
        )
    if not rows:
        raise click.ClickException(f"no thread {thread!r}")
    if as_json:
        out.json(rows)
        return
    out.table(rows[0].keys(), (r.values() for r in rows))


@cli.command()
@db_option
@click.option("--user", required=True, help="Whose facts.")
@click.option("--pending", is_flag=True, help="Candidates waiting for confirmation instead.")
@prefix_option
@json_option
def facts(db: str | None, user: str, pending: bool, prefix: str, as_json: bool) -> None:
    """Show the long-term facts remembered about a user."""
    from ..store import UserFacts

    items = UserFacts(opened("kv", db, prefix), user).list_facts(pending=pending)
    rows = [
        {
            "id": i.key,
            "fact": i.value.get("fact"),
            "source": i.value.get("source"),
            "updated_at": i.updated_at.isoformat(),
        }
        for i in items
    ]
    if as_json:
        out.json(rows)
        return
    out.table(
        ("id", "fact", "source", "updated"),
        (
            (i.key, r["fact"], r["source"], _when(i.updated_at))
            for i, r in zip(items, rows, strict=True)
        ),
    )


@cli.command()
@database_options
def stats(db: str | None, prefix: str, as_json: bool) -> None:
    """Row counts and sizes of this package's tables."""
    from ..engine.schema import get_tables
    from ..operations.maintenance import table_stats

    found = database(db, prefix)
    rows = table_stats(found, get_tables(prefix))
    if as_json:
        out.json({"database": str(found.url), "tables": [r.__dict__ for r in rows]})
        return
    out.line(f"database {found.url}")
    out.table(("table", "rows", "bytes"), ((r.table, r.rows, r.bytes) for r in rows))


@cli.command()
@click.argument("session", required=False)
@click.option("--thread", default=None, help="Export a checkpointer thread instead.")
@click.option(
    "--format", "fmt", type=click.Choice(["json", "jsonl", "md"]), default="json", show_default=True
)
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="File.")
@db_option
@user_option
@prefix_option
def export(
    session: str | None,
    thread: str | None,
    fmt: str,
    output: str | None,
    db: str | None,
    user: str | None,
    prefix: str,
) -> None:
    """Export a SESSION (or --thread) as JSON, JSONL (one message per line) or Markdown."""
    from ..operations.export import render, session_document, thread_document

    if session is None and thread is None:
        raise click.UsageError("give a SESSION, or --thread THREAD")
    if session is not None and thread is not None:
        raise click.UsageError("give a SESSION or --thread THREAD, not both")
    doc: dict[str, Any]
    if thread is not None:
        doc = thread_document(opened("saver", db, prefix), thread)
    else:
        conversations = _session_store(db, prefix, str(session), user)
        doc = session_document(conversations, str(session), user_id=user)
    text = render(doc, fmt)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        err.line(f"wrote {count(len(doc['messages']), 'message')} to {output}")
    else:
        out.raw(text)
