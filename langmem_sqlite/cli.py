"""The ``langmem-sqlite`` command line: look inside a memory database, run the demo.

Examples::

    langmem-sqlite demo                      # a conversation that survives a restart
    langmem-sqlite sessions --db chat.db     # sessions, most recent first
    langmem-sqlite history s1 --db chat.db --limit 10 --json
    langmem-sqlite migrate --db postgresql://user@host/db
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from .conversation_store import ConversationStore, default_connection
from .db import get_database
from .migrate import LATEST_VERSION, ensure_schema
from .schema import DEFAULT_PREFIX, get_tables

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Inspect and maintain langmem-sqlite memory databases.",
)
_out = Console()
_err = Console(stderr=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", help="Database URL or SQLite path (default: $LANGMEM_SQLITE_URL or langmem.db)."
    ),
]
PrefixOption = Annotated[str, typer.Option("--prefix", help="Table prefix.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _store(db: str | None, prefix: str) -> ConversationStore:
    return ConversationStore(db or default_connection(), table_prefix=prefix)


@app.command()
def demo(
    db: Annotated[str, typer.Option("--db", help="SQLite file for the demo.")] = "langmem-demo.db",
) -> None:
    """Hold a short conversation in a SQLite file, restart, and read it back."""
    from .demo import run_demo

    raise typer.Exit(run_demo(db))


@app.command()
def sessions(
    db: DbOption = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this user's sessions.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1)] = None,
    prefix: PrefixOption = DEFAULT_PREFIX,
    as_json: JsonOption = False,
) -> None:
    """List sessions, most recently active first."""
    rows = _store(db, prefix).list_sessions(user, limit=limit)
    if as_json:
        _out.print_json(json.dumps([r.__dict__ for r in rows], default=str))
        return
    table = Table("user", "session", "title", "messages", "tokens", "last active")
    for r in rows:
        table.add_row(
            r.user_id or "",
            r.session_id,
            r.title or "",
            str(r.message_count),
            str(r.token_total),
            _when(r.updated_at),
        )
    _out.print(table)


@app.command()
def history(
    session: Annotated[str, typer.Argument(help="Session id.")],
    db: DbOption = None,
    user: Annotated[str | None, typer.Option("--user", help="The session's user.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the last N.")] = None,
    prefix: PrefixOption = DEFAULT_PREFIX,
    as_json: JsonOption = False,
) -> None:
    """Show a session's messages in order."""
    store = _store(db, prefix)
    msgs = store.get_messages(session, user_id=user, limit=limit)
    if as_json:
        from langchain_core.messages import messages_to_dict

        _out.print_json(json.dumps(messages_to_dict(msgs), default=str, ensure_ascii=False))
        return
    for m in msgs:
        _out.print(f"[bold]{m.type:>6}[/bold] {m.text}", markup=True, highlight=False)


@app.command()
def migrate(db: DbOption = None, prefix: PrefixOption = DEFAULT_PREFIX) -> None:
    """Create or upgrade the schema to the latest version."""
    database = get_database(db or default_connection())
    ensure_schema(database, get_tables(prefix))
    _out.print(f"schema at version {LATEST_VERSION} in {database.url!r}")


def main(argv: list[str] | None = None) -> Any:
    """Entry point: one-line errors and a non-zero exit instead of tracebacks."""
    try:
        return app(args=argv, standalone_mode=False)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        _err.print("aborted")
        sys.exit(130)
    except Exception as e:  # click usage errors and everything the library raises
        import click

        if isinstance(e, click.ClickException):
            _err.print(f"error: {e.format_message()}", highlight=False)
            sys.exit(e.exit_code)
        text = " ".join(str(e).split("[SQL:")[0].split())
        _err.print(f"error: {type(e).__name__}: {text}", highlight=False, soft_wrap=True)
        sys.exit(1)
