"""The ``langmem-sqlite`` command line: chat with memory, look inside a database, maintain it.

Examples::

    langmem-sqlite chat --tour                  # a scripted offline chat, restarted
    langmem-sqlite chat --db chat.db --user ada # talk (ChatOpenAI with OPENAI_API_KEY)
    langmem-sqlite users --db chat.db
    langmem-sqlite history s1 --db chat.db --limit 10 --json
    langmem-sqlite export s1 --db chat.db --format md
    langmem-sqlite prune --older-than 90 --dry-run --db chat.db
    langmem-sqlite forget-user ada --dry-run --db chat.db
    langmem-sqlite import history sqlite:///old.db --db chat.db
    langmem-sqlite migrate --db postgresql://user@host/db

Every listing prints a table, or JSON with ``--json``. Errors are one line on stderr with a
non-zero exit status.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .conversation_store import ConversationStore, default_connection
from .db import get_database
from .migrate import LATEST_VERSION, ensure_schema
from .schema import DEFAULT_PREFIX, get_tables

__all__ = ["cli", "main"]

_out = Console()
_err = Console(stderr=True)

db_option = click.option(
    "--db",
    default=None,
    help="Database URL or SQLite path (default: $LANGMEM_SQLITE_URL or langmem.db).",
)
prefix_option = click.option(
    "--prefix", default=DEFAULT_PREFIX, show_default=True, help="Table prefix."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
limit_option = click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N.")
user_option = click.option("--user", default=None, help="The user id.")


def _with(options: list[Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator applying click ``options`` in order (as if stacked top to bottom)."""

    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


listing_options = _with([db_option, user_option, limit_option, prefix_option, json_option])
"""``--db --user --limit --prefix --json``, the options of every listing."""


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _url(db: str | None) -> str:
    return db or default_connection()


def _store(db: str | None, prefix: str) -> ConversationStore:
    return ConversationStore(_url(db), table_prefix=prefix)


def _saver(db: str | None, prefix: str) -> Any:
    from .checkpoint import SQLSaver

    return SQLSaver(_url(db), table_prefix=prefix)


def _kv_store(db: str | None, prefix: str) -> Any:
    from .store import SQLStore

    return SQLStore(_url(db), table_prefix=prefix)


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, default=str, ensure_ascii=False, indent=2))


def _table(columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> None:
    table = Table(*columns)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console = Console() if sys.stdout.isatty() else Console(width=200)  # pipes: whole cells
    console.print(table)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Chat with memory, and inspect and maintain langmem-sqlite databases."""


# -- chat -------------------------------------------------------------------------------------


def _lines(script: str) -> Iterable[str]:
    if script == "-":
        return sys.stdin.read().splitlines()
    path = Path(script)
    if not path.is_file():
        raise click.BadParameter(f"no such file {script!r}", param_hint="--script")
    return path.read_text(encoding="utf-8").splitlines()


def _interactive(echo: Callable[[str], None]) -> Iterable[str]:
    with contextlib.suppress(ImportError):  # line editing and history for input()
        import readline  # noqa: F401
    while True:
        try:
            yield input("you> ")
        except EOFError:
            echo("")
            return


@cli.command()
@db_option
@click.option("--user", default="me", show_default=True, help="Whose memory.")
@click.option("--session", default=None, help="Session id (default: continue the latest).")
@click.option("--script", default=None, help="Read turns and /commands from FILE ('-': stdin).")
@click.option("--model", default=None, help="Model name (default gpt-4o-mini).")
@click.option("--base-url", default=None, help="An OpenAI-compatible server (e.g. a local one).")
@click.option("--offline", is_flag=True, help="Use the offline stand-in even with a key.")
@click.option("--max-tokens", type=click.IntRange(min=200), default=None, help="Input budget.")
@click.option(
    "--trigger-tokens", type=click.IntRange(min=100), default=None, help="Summarize past this."
)
@click.option("--tour", is_flag=True, help="Run a scripted offline chat twice on a fresh file.")
@prefix_option
def chat(
    db: str | None,
    user: str,
    session: str | None,
    script: str | None,
    model: str | None,
    base_url: str | None,
    offline: bool,
    max_tokens: int | None,
    trigger_tokens: int | None,
    tour: bool,
    prefix: str,
) -> None:
    """A terminal chat whose memory (thread, summary, facts) lives in the database.

    Without OPENAI_API_KEY or --base-url it says so and uses a rule-based offline stand-in
    (not an LLM). Commands: /summary /history /facts /remember /forget /new /session /help.
    """
    if tour:
        from .chat.tour import run_tour

        sys.exit(run_tour(db or "langmem-tour.db"))
    from .chat.app import banner, open_chat, run_lines

    chat_session, chosen = open_chat(
        _url(db),
        user=user,
        session=session,
        model=model,
        base_url=base_url,
        offline=offline,
        max_tokens=max_tokens,
        trigger_tokens=trigger_tokens,
        prefix=prefix,
    )
    banner(chat_session, chosen, click.echo)
    if script is not None:
        run_lines(chat_session, _lines(script), click.echo, show_input=True)
    elif sys.stdin.isatty():
        run_lines(chat_session, _interactive(click.echo), click.echo, show_input=False)
    else:  # piped input is a script
        run_lines(chat_session, sys.stdin.read().splitlines(), click.echo, show_input=True)


# -- inspection -------------------------------------------------------------------------------


@cli.command()
@db_option
@prefix_option
@json_option
def users(db: str | None, prefix: str, as_json: bool) -> None:
    """List users, with their sessions, checkpointer threads and facts."""
    from .maintenance import list_users

    rows = list_users(_store(db, prefix), _saver(db, prefix), _kv_store(db, prefix))
    if as_json:
        _print_json(rows)
        return
    _table(
        ("user", "sessions", "threads", "facts"),
        ((r["user_id"], r["sessions"], r["threads"], r["facts"]) for r in rows),
    )


@cli.command()
@listing_options
def sessions(
    db: str | None, user: str | None, limit: int | None, prefix: str, as_json: bool
) -> None:
    """List sessions (conversation tables), most recently active first."""
    rows = _store(db, prefix).list_sessions(user, limit=limit)
    if as_json:
        _print_json([r.__dict__ for r in rows])
        return
    _table(
        ("user", "session", "title", "messages", "tokens", "last active"),
        (
            (r.user_id, r.session_id, r.title, r.message_count, r.token_total, _when(r.updated_at))
            for r in rows
        ),
    )


@cli.command()
@listing_options
def threads(
    db: str | None, user: str | None, limit: int | None, prefix: str, as_json: bool
) -> None:
    """List checkpointer threads, most recently updated first."""
    meta = {"user_id": user} if user is not None else None
    rows = _saver(db, prefix).list_threads(metadata=meta, limit=limit)
    if as_json:
        _print_json([r.__dict__ for r in rows])
        return
    _table(
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

    from .counting import resolve_message_counter

    store = _store(db, prefix)
    if store.get_session(session, user_id=user) is None:
        raise click.ClickException(
            f"no session {session!r}" + (f" of user {user!r}" if user else "")
        )
    msgs = store.get_messages(session, user_id=user, limit=limit)
    summary = store.get_summary(session, user_id=user)
    counter = resolve_message_counter(None)
    if as_json:
        _print_json(
            {
                "session_id": session,
                "user_id": user,
                "summary": summary,
                "messages": [{**message_to_dict(m), "tokens": counter(m)} for m in msgs],
            }
        )
        return
    if summary:
        _out.print(f"[bold]summary[/bold]: {summary}", highlight=False)
    for m in msgs:
        _out.print(f"[bold]{m.type:>6}[/bold] ({counter(m):>4} tok) {m.text}", highlight=False)


@cli.command()
@click.argument("thread")
@db_option
@limit_option
@prefix_option
@json_option
def checkpoints(thread: str, db: str | None, limit: int | None, prefix: str, as_json: bool) -> None:
    """Show a thread's checkpoints, newest first."""
    saver = _saver(db, prefix)
    rows = []
    for t in saver.list({"configurable": {"thread_id": thread}}, limit=limit):
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
        _print_json(rows)
        return
    _table(rows[0].keys(), (r.values() for r in rows))


@cli.command()
@db_option
@click.option("--user", required=True, help="Whose facts.")
@click.option("--pending", is_flag=True, help="Candidates waiting for confirmation instead.")
@prefix_option
@json_option
def facts(db: str | None, user: str, pending: bool, prefix: str, as_json: bool) -> None:
    """Show the long-term facts remembered about a user."""
    from .store import UserFacts

    items = UserFacts(_kv_store(db, prefix), user).list_facts(pending=pending)
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
        _print_json(rows)
        return
    _table(("id", "fact", "source", "updated"), (r.values() for r in rows))


@cli.command()
@db_option
@prefix_option
@json_option
def stats(db: str | None, prefix: str, as_json: bool) -> None:
    """Row counts and sizes of this package's tables."""
    from .maintenance import table_stats

    database = get_database(_url(db))
    rows = table_stats(database, get_tables(prefix))
    if as_json:
        _print_json({"database": str(database.url), "tables": [r.__dict__ for r in rows]})
        return
    _out.print(f"database {database.url}", highlight=False)
    _table(("table", "rows", "bytes"), ((r.table, r.rows, r.bytes) for r in rows))


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
    from .export import render, session_document, thread_document

    if (session is None) == (thread is None):
        raise click.UsageError("give a SESSION or --thread, not both")
    if thread is not None:
        doc = thread_document(_saver(db, prefix), thread)
    else:
        doc = session_document(_store(db, prefix), str(session), user_id=user)
    text = render(doc, fmt)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        _err.print(f"wrote {len(doc['messages'])} messages to {output}", highlight=False)
    else:
        click.echo(text, nl=False)


# -- maintenance ------------------------------------------------------------------------------


@cli.command()
@click.option("--older-than", "days", type=click.FloatRange(min=0), required=True, help="Days.")
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@db_option
@user_option
@prefix_option
@json_option
def prune(
    days: float, dry_run: bool, db: str | None, user: str | None, prefix: str, as_json: bool
) -> None:
    """Retention: delete sessions and threads idle for more than --older-than days."""
    from .maintenance import prune as run_prune

    report = run_prune(_store(db, prefix), _saver(db, prefix), days, user_id=user, dry_run=dry_run)
    if as_json:
        _print_json(report.__dict__)
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{verb} {len(report.sessions)} sessions and {len(report.threads)} threads")
    for name in (*report.sessions, *report.threads):
        click.echo(f"  {name}")


# forget-user: one self-contained block over langmem_sqlite.erasure.forget_user


@cli.command(name="forget-user")
@click.argument("user")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    help="Store namespace prefix of the user's items, labels joined by '/', {user_id} for the "
    "user (repeatable; default: users/{user_id}).",
)
@click.option("--thread", "threads", multiple=True, help="Also delete this thread (repeatable).")
@click.option("--no-vacuum", is_flag=True, help="SQLite: skip rewriting the file (VACUUM).")
@db_option
@prefix_option
@json_option
def forget_user(
    user: str,
    dry_run: bool,
    namespaces: tuple[str, ...],
    threads: tuple[str, ...],
    no_vacuum: bool,
    db: str | None,
    prefix: str,
    as_json: bool,
) -> None:
    """Delete everything stored about USER: sessions, messages, summaries, checkpointer
    threads, store items and facts; on SQLite, leave no copy in the file or its WAL."""
    from .erasure import DEFAULT_STORE_PREFIXES
    from .erasure import forget_user as run_forget

    prefixes = [tuple(n.split("/")) for n in namespaces] or list(DEFAULT_STORE_PREFIXES)
    report = run_forget(
        _url(db),
        user,
        dry_run=dry_run,
        table_prefix=prefix,
        store_prefixes=prefixes,
        thread_ids=threads,
        vacuum=not no_vacuum,
    )
    if as_json:
        _print_json(report.as_dict())
    else:
        verb = "would delete" if dry_run else "deleted"
        click.echo(f"{verb} for user {user!r}:")
        _table(
            ("kind", "count"),
            (
                (kind, getattr(report, kind))
                for kind in (
                    "sessions",
                    "messages",
                    "summaries",
                    "threads",
                    "checkpoints",
                    "facts",
                    "store_items",
                )
            ),
        )
        if report.vacuumed:
            click.echo("SQLite file rewritten (VACUUM) and its write-ahead log emptied")
    for ns in report.other_namespaces:
        _err.print(f"kept: namespace {'/'.join(ns)} names the user (add --namespace)")
    if report.unreadable_threads:
        _err.print(f"{report.unreadable_threads} threads have encrypted metadata, not searched")
    if report.wal_emptied is False:
        raise click.ClickException("a reader kept the write-ahead log busy: run again")


def _file_bytes(conn: Any) -> int | None:
    """The SQLite file's size in pages (None on servers; also checks the database answers)."""
    import sqlalchemy as sa

    if conn.dialect.name != "sqlite":
        conn.execute(sa.select(sa.literal(1)))
        return None
    pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
    return int(pages) * int(conn.exec_driver_sql("PRAGMA page_size").scalar_one())


@cli.command()
@click.option("--full", is_flag=True, help="VACUUM (rewrites the file) instead of incremental.")
@db_option
@prefix_option
@json_option
def vacuum(full: bool, db: str | None, prefix: str, as_json: bool) -> None:
    """Give freed space back to the OS (SQLite; a no-op on servers)."""
    saver = _saver(db, prefix)
    before = saver.db.run(_file_bytes)
    saver.vacuum(full=full)
    after = saver.db.run(_file_bytes)
    if as_json:
        _print_json({"database": str(saver.db.url), "bytes_before": before, "bytes_after": after})
    elif before is None:
        click.echo(f"nothing to do on {saver.db.url} (the server reclaims space itself)")
    else:
        click.echo(f"vacuumed {saver.db.url}: {before:,} -> {after:,} bytes")


@cli.command()
@db_option
@prefix_option
@json_option
def migrate(db: str | None, prefix: str, as_json: bool) -> None:
    """Create or upgrade the schema to the latest version (and on PostgreSQL the store's
    pgvector table, whose first use would otherwise upgrade it)."""
    from .store.sql import upgrade_pgvector

    database = get_database(_url(db))
    tables = get_tables(prefix)
    ensure_schema(database, tables)
    pgvector = database.run(upgrade_pgvector, tables, write=True)
    if as_json:
        doc = {
            "database": str(database.url),
            "version": LATEST_VERSION,
            "pgvector_upgraded": pgvector,
        }
        _print_json(doc)
    else:
        click.echo(f"schema at version {LATEST_VERSION} in {database.url}")
        if pgvector:
            click.echo("pgvector table upgraded (namespace column, HNSW indexes built again)")


# -- importers --------------------------------------------------------------------------------


@cli.group(name="import")
def import_() -> None:
    """Import from langchain-community chat histories and LangGraph Sqlite/Postgres savers."""


def _report(report: Any, as_json: bool) -> None:
    if as_json:
        _print_json(report.as_dict())
        return
    click.echo(
        f"{report.kind}: {report.containers} found, {report.imported} imported, "
        f"{report.skipped} already there, {report.writes} writes; "
        f"{'verified by reading back' if report.verified else 'NOT verified'}"
    )


@import_.command(name="history")
@click.argument("source")
@click.option("--table", default="message_store", show_default=True, help="Source table.")
@click.option("--as-user", default=None, help="User id for the imported sessions.")
@db_option
@prefix_option
@json_option
def import_history(
    source: str, table: str, as_user: str | None, db: str | None, prefix: str, as_json: bool
) -> None:
    """SOURCE (URL or SQLite path) with a langchain-community SQLChatMessageHistory table."""
    from .importers import import_chat_history

    report = import_chat_history(
        source, _store(db, prefix), table=table, user_id=as_user, progress=not as_json
    )
    _report(report, as_json)


def _import_saver(
    opener: Callable[[str], Any], location: str, only: tuple[str, ...], db: str | None, **kw: Any
) -> None:
    from .importers import import_checkpoints, source_thread_ids

    ids = list(only) or source_thread_ids(location)
    with opener(location) as source:
        report = import_checkpoints(
            source, _saver(db, kw["prefix"]), ids, progress=not kw["as_json"]
        )
    _report(report, kw["as_json"])


saver_options = [
    click.option("--thread", "only", multiple=True, help="Import only this thread (repeatable)."),
    db_option,
    prefix_option,
    json_option,
]


@import_.command(name="sqlite-saver")
@click.argument("path")
@_with(saver_options)
def import_sqlite_saver(path: str, only: tuple[str, ...], db: str | None, **kw: Any) -> None:
    """A langgraph-checkpoint-sqlite (SqliteSaver) file at PATH."""
    from .importers import open_sqlite_saver

    _import_saver(open_sqlite_saver, path, only, db, **kw)


@import_.command(name="postgres-saver")
@click.argument("url")
@_with(saver_options)
def import_postgres_saver(url: str, only: tuple[str, ...], db: str | None, **kw: Any) -> None:
    """A langgraph-checkpoint-postgres (PostgresSaver) database at URL."""
    from .importers import open_postgres_saver

    _import_saver(open_postgres_saver, url, only, db, **kw)


def main(argv: list[str] | None = None) -> Any:
    """Entry point: one-line errors and a non-zero exit instead of tracebacks."""
    try:
        return cli.main(args=argv, prog_name="langmem-sqlite", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except (click.Abort, KeyboardInterrupt):
        _err.print("aborted")
        sys.exit(130)
    except click.ClickException as e:
        _err.print(f"error: {e.format_message()}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except Exception as e:  # everything the library raises: one line, no traceback
        text = " ".join(str(e).split("[SQL:")[0].split())
        _err.print(f"error: {type(e).__name__}: {text}", highlight=False, soft_wrap=True)
        sys.exit(1)
