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


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _store(db: str | None, prefix: str) -> ConversationStore:
    return ConversationStore(db or default_connection(), table_prefix=prefix)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Inspect and maintain langmem-sqlite memory databases."""


@cli.command()
@click.option(
    "--db", default="langmem-demo.db", show_default=True, help="SQLite file for the demo."
)
def demo(db: str) -> None:
    """Hold a short conversation in a SQLite file, restart, and read it back."""
    from .demo import run_demo

    sys.exit(run_demo(db))


@cli.command()
@db_option
@user_option
@limit_option
@prefix_option
@json_option
def sessions(
    db: str | None, user: str | None, limit: int | None, prefix: str, as_json: bool
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


@cli.command()
@click.argument("session")
@db_option
@user_option
@limit_option
@prefix_option
@json_option
def history(
    session: str, db: str | None, user: str | None, limit: int | None, prefix: str, as_json: bool
) -> None:
    """Show a session's messages in order (the last --limit N)."""
    msgs = _store(db, prefix).get_messages(session, user_id=user, limit=limit)
    if as_json:
        from langchain_core.messages import messages_to_dict

        _out.print_json(json.dumps(messages_to_dict(msgs), default=str, ensure_ascii=False))
        return
    for m in msgs:
        _out.print(f"[bold]{m.type:>6}[/bold] {m.text}", markup=True, highlight=False)


@cli.command()
@db_option
@prefix_option
def migrate(db: str | None, prefix: str) -> None:
    """Create or upgrade the schema to the latest version."""
    database = get_database(db or default_connection())
    ensure_schema(database, get_tables(prefix))
    _out.print(f"schema at version {LATEST_VERSION} in {database.url!r}")


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
