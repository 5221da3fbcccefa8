"""`langmem-sqlite import`: chat histories and LangGraph savers of the packages this one
replaces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from .base import (
    cli,
    database_options,
    opened,
    refused,
    with_options,
)
from .output import count, out


@cli.group(name="import")
def import_() -> None:
    """Import from langchain-community chat histories and LangGraph Sqlite/Postgres savers."""


def _report(report: Any, as_json: bool) -> None:
    if as_json:
        out.json(report.as_dict())
    else:
        out.line(f"{report.kind}: {report.summary()}")
        missing = report.details.get("threads_without_user")
        if missing:
            out.line(
                f"{count(missing, 'thread')} without a user in the metadata: imported without one"
            )


@import_.command(name="history")
@click.argument("source")
@click.option("--table", default="message_store", show_default=True, help="Source table.")
@click.option("--as-user", default=None, help="User id for the imported sessions.")
@database_options
def import_history(
    source: str, table: str, as_user: str | None, db: str | None, prefix: str, as_json: bool
) -> None:
    """SOURCE (URL or SQLite path) with a langchain-community SQLChatMessageHistory table."""
    from ..operations.importers import import_chat_history

    try:
        report = import_chat_history(
            source,
            opened("store", db, prefix, create=True),
            table=table,
            user_id=as_user,
            progress=not as_json,
        )
    except (FileNotFoundError, LookupError, ValueError) as e:
        raise refused(e) from e
    _report(report, as_json)


def _import_saver(
    opener: Callable[[str], Any],
    location: str,
    only: tuple[str, ...],
    db: str | None,
    **kw: Any,
) -> None:
    from ..operations.importers import import_checkpoints, source_thread_ids

    if kw["as_user"] is not None and kw["user_key"] is not None:
        raise click.UsageError("give --as-user or --user-key, not both")
    try:
        ids = source_thread_ids(location)  # also checks that it is a checkpointer database
        with opener(location) as source:
            report = import_checkpoints(
                source,
                opened("saver", db, kw["prefix"], create=True),
                list(only) or ids,
                user_id=kw["as_user"],
                user_key=kw["user_key"],
                progress=not kw["as_json"],
            )
    except (FileNotFoundError, LookupError, ValueError) as e:
        raise refused(e) from e
    _report(report, kw["as_json"])


saver_options = [
    click.option("--thread", "only", multiple=True, help="Import only this thread (repeatable)."),
    click.option("--as-user", default=None, help="The user the imported threads belong to."),
    click.option(
        "--user-key",
        default=None,
        metavar="KEY",
        help="Take each thread's user from this key of its checkpoints' metadata.",
    ),
    database_options,
]


@import_.command(name="sqlite-saver")
@click.argument("path")
@with_options(saver_options)
def import_sqlite_saver(path: str, only: tuple[str, ...], db: str | None, **kw: Any) -> None:
    """A langgraph-checkpoint-sqlite (SqliteSaver) file at PATH."""
    from ..operations.importers import open_sqlite_saver

    _import_saver(open_sqlite_saver, path, only, db, **kw)


@import_.command(name="postgres-saver")
@click.argument("url")
@with_options(saver_options)
def import_postgres_saver(url: str, only: tuple[str, ...], db: str | None, **kw: Any) -> None:
    """A langgraph-checkpoint-postgres (PostgresSaver) database at URL."""
    from ..operations.importers import open_postgres_saver

    _import_saver(open_postgres_saver, url, only, db, **kw)
