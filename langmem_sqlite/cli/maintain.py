"""Commands that maintain a database: retention, vacuum, migrations, copying to another one."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import click

from ..defaults import DEFAULT_PREFIX, MAX_DAYS
from .base import (
    FiniteRange,
    cli,
    count_range,
    database,
    database_options,
    db_option,
    json_option,
    opened,
    prefix_option,
    readable_url,
    refused,
    url,
    user_option,
)
from .output import count, err, out


@cli.command()
@click.option(
    "--older-than",
    "days",
    type=FiniteRange(min=0, max=MAX_DAYS),
    required=True,
    help="Days (0 to 100000000).",
)
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@db_option
@user_option
@prefix_option
@json_option
def prune(
    days: float, dry_run: bool, db: str | None, user: str | None, prefix: str, as_json: bool
) -> None:
    """Retention: delete sessions and threads idle for more than --older-than days."""
    from ..operations.maintenance import prune as run_prune

    write = not dry_run
    report = run_prune(
        opened("store", db, prefix, write=write),
        opened("saver", db, prefix, write=write),
        days,
        user_id=user,
        dry_run=dry_run,
    )
    if as_json:
        out.json(report.__dict__)
        return
    verb = "would delete" if dry_run else "deleted"
    sessions, threads = count(len(report.sessions), "session"), count(len(report.threads), "thread")
    out.line(f"{verb} {sessions} and {threads}")
    for name in (*report.sessions, *report.threads):
        out.line(f"  {name}")


_FORGET_KINDS = (
    "sessions",
    "messages",
    "summaries",
    "threads",
    "checkpoints",
    "facts",
    "store_items",
)


@cli.command(name="forget-user")
@click.argument("user")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Delete without asking (needed when stdin is not a terminal, e.g. in scripts).",
)
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    help="Store namespace prefix of the user's items, labels joined by '/', {user_id} for the "
    "user (repeatable; default: users/{user_id}).",
)
@click.option("--thread", "threads", multiple=True, help="Also delete this thread (repeatable).")
@click.option("--no-vacuum", is_flag=True, help="SQLite: skip rewriting the file (VACUUM).")
@database_options
def forget_user(
    user: str,
    dry_run: bool,
    yes: bool,
    namespaces: tuple[str, ...],
    threads: tuple[str, ...],
    no_vacuum: bool,
    db: str | None,
    prefix: str,
    as_json: bool,
) -> None:
    """Delete everything stored about USER: sessions, messages, summaries, checkpointer
    threads, store items and facts; on SQLite, leave no copy in the file or its WAL.

    It counts first, and on a terminal asks before deleting (--yes: without asking). A user
    of whom nothing is stored is reported, and nothing is done.
    """
    from ..operations.erasure import DEFAULT_STORE_PREFIXES
    from ..operations.erasure import forget_user as run_forget

    prefixes = [tuple(n.split("/")) for n in namespaces] or list(DEFAULT_STORE_PREFIXES)

    def forget(where: Any, dry: bool) -> Any:
        return run_forget(
            where,
            user,
            dry_run=dry,
            table_prefix=prefix,
            store_prefixes=prefixes,
            thread_ids=threads,
            vacuum=not no_vacuum,
        )

    reading = database(db, prefix)
    report = forget(reading, True)
    found = (report.sessions, report.checkpoints, report.facts, report.store_items)
    if not dry_run and not any(found):
        if as_json:
            out.json(report.as_dict())
        nothing = f"nothing stored about user {user!r} in {reading.location()}: nothing deleted"
        (err if as_json else out).line(nothing)
        return
    if not dry_run:
        if not yes:
            if not sys.stdin.isatty():
                raise click.ClickException(
                    f"forget-user deletes user {user!r}'s data for good: pass --yes to confirm "
                    "(stdin is not a terminal to ask on)"
                )
            what = ", ".join(
                (
                    count(report.sessions, "session"),
                    count(report.threads, "thread"),
                    count(report.facts, "fact"),
                    count(report.store_items, "other store item"),
                )
            )
            question = f"delete {what} of user {user!r} in {reading.location()}?"
            if not click.confirm(question, err=True):
                raise click.ClickException("not confirmed: nothing deleted")
        report = forget(database(db, prefix, write=True), False)
    if as_json:
        out.json(report.as_dict())
    else:
        out.line(f"{'would delete' if dry_run else 'deleted'} for user {user!r}:")
        out.table(("kind", "count"), ((k, getattr(report, k)) for k in _FORGET_KINDS))
        if report.vacuumed:
            out.line("SQLite file rewritten (VACUUM) and its write-ahead log emptied")
    for ns in report.other_namespaces:
        label = "/".join(ns)
        err.line(f"kept: namespace {label} names the user (add --namespace {shlex.quote(label)})")
    if report.unreadable_threads:
        threads_ = count(report.unreadable_threads, "thread")
        err.line(f"{threads_} with encrypted metadata, not searched")
    if report.wal_emptied is False:
        raise click.ClickException("a reader kept the write-ahead log busy: run again")


def _file_bytes(unit: Any) -> int | None:
    """The SQLite file's size (None on servers); also checks that the database answers."""
    if unit.connection.dialect.name != "sqlite":
        unit.exec_driver_sql("SELECT 1")
        return None
    pages = unit.exec_driver_sql("PRAGMA page_count").scalar_one()
    return int(pages) * int(unit.exec_driver_sql("PRAGMA page_size").scalar_one())


@cli.command()
@click.option("--full", is_flag=True, help="VACUUM (rewrites the file) instead of incremental.")
@database_options
def vacuum(full: bool, db: str | None, prefix: str, as_json: bool) -> None:
    """Give freed space back to the OS (SQLite; a no-op on servers)."""
    checkpointer = opened("saver", db, prefix, write=True)
    before = checkpointer.db.run(_file_bytes)
    checkpointer.vacuum(full=full)
    after = checkpointer.db.run(_file_bytes)
    where = str(checkpointer.db.url)
    if as_json:
        out.json({"database": where, "bytes_before": before, "bytes_after": after})
    elif before is None:
        out.line(f"nothing to do on {where} (the server reclaims space itself)")
    else:
        out.line(f"vacuumed {where}: {before:,} -> {after:,} bytes")


@cli.command()
@database_options
def migrate(db: str | None, prefix: str, as_json: bool) -> None:
    """Create or upgrade the schema to the latest version."""
    from ..engine import get_database
    from ..engine.migrations import LATEST_VERSION, ensure_schema
    from ..engine.schema import get_tables

    database = get_database(url(db))
    ensure_schema(database, get_tables(prefix))
    if as_json:
        out.json({"database": str(database.url), "version": LATEST_VERSION})
    else:
        out.line(f"schema at version {LATEST_VERSION} in {database.url}")


@cli.command(name="copy")
@click.option("--from", "source", required=True, help="The database to copy (URL or SQLite path).")
@click.option(
    "--to",
    "target",
    required=True,
    help="Where to copy it: a SQLite file is created if missing; a server database too, where "
    "the login may create one.",
)
@click.option("--user", default=None, help="Copy only this user's sessions, threads and facts.")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="The source's prefix.")
@click.option("--to-prefix", default=None, help="The target's table prefix (default: the same).")
@click.option(
    "--batch-size",
    type=count_range(1, 100_000),
    default=500,
    show_default=True,
    help="Rows a page (1 to 100000).",
)
@json_option
def copy_(
    source: str,
    target: str,
    user: str | None,
    prefix: str,
    to_prefix: str | None,
    batch_size: int,
    as_json: bool,
) -> None:
    """Copy a whole database (or one --user) to another, between any two of SQLite,
    PostgreSQL and MariaDB/MySQL.

    Every table is copied in pages by primary key; what the target already holds is kept, so
    running again copies nothing and an interrupted copy resumes. Every page is read back and
    compared. The source is only read.
    """
    from ..operations.copy import copy_database

    try:
        report = copy_database(
            readable_url(source, "--from"),
            target,
            table_prefix=prefix,
            target_prefix=to_prefix,
            user_id=user,
            batch_size=batch_size,
            progress=not as_json,
        )
    except (LookupError, ValueError) as e:  # refused (no such user, no tables, ...)
        raise refused(e) from e
    if as_json:
        out.json(report.as_dict())
        return
    out.table(
        ("table", "rows", "copied", "already there", "verified"),
        (
            (t.table, t.rows, t.copied, t.present, "yes" if t.verified else t.note or "no")
            for t in report.tables
        ),
    )
    check = "verified by reading back" if report.verified else "NOT verified"
    out.line(
        f"copied {count(report.copied, 'row')} ({report.present} already there) of "
        f"{report.rows} from {report.source} to {report.target}; {check}"
    )
