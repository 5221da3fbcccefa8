"""The command group, the options every command shares, and the entry point.

Only `click` is imported here: `--help` and `--version` load no database code (each
command imports what it needs when it runs).
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import shlex
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from .. import __version__
from ..defaults import DEFAULT_PREFIX, INT64_MAX
from .output import err, out


class FiniteRange(click.FloatRange):
    """A `click.FloatRange` that also refuses `nan` (which no range comparison
    catches): a bad value is a usage error naming the option."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


class _AtLeast(click.IntRange):
    """A [`click.IntRange`][click.IntRange] with a lower bound only (its help reads
    `x>=1`) that still refuses counts above [`INT64_MAX`][langmem_sqlite.defaults.INT64_MAX]."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number > INT64_MAX:
            self.fail(
                f"{number} is above the largest count a database stores ({INT64_MAX}).", param, ctx
            )
        return number


def count_range(low: int = 1, high: int = INT64_MAX) -> click.IntRange:
    """An integer option from `low` to `high` (default: up to
    [`INT64_MAX`][langmem_sqlite.defaults.INT64_MAX], which the help leaves unsaid)."""
    return _AtLeast(min=low) if high == INT64_MAX else click.IntRange(min=low, max=high)


_given: dict[str, Any] = {"db": None, "debug": False}
"""What this run's command line said that its error path needs: `--db` and `--debug`."""


def _remember_db(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    _given["db"] = value
    return value


db_option = click.option(
    "--db",
    default=None,
    callback=_remember_db,
    help="Database URL or SQLite path (default: $LANGMEM_SQLITE_URL or langmem.db).",
)
prefix_option = click.option(
    "--prefix", default=DEFAULT_PREFIX, show_default=True, help="Table prefix."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
limit_option = click.option("--limit", type=count_range(), default=None, help="At most N.")
user_option = click.option("--user", default=None, help="The user id.")


def with_options(options: list[Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator applying click `options` in order (as if stacked top to bottom)."""

    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


database_options = with_options([db_option, prefix_option, json_option])
"""`--db --prefix --json`, the options of a command on one database."""


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Every command takes --db and --prefix; listings take --json. "
    "'langmem-sqlite COMMAND --help' describes one.",
)
@click.version_option(__version__, "--version", "-V", prog_name="langmem-sqlite")
@click.option(
    "--debug",
    is_flag=True,
    envvar="LANGMEM_SQLITE_DEBUG",
    help="On an error, print its traceback (also $LANGMEM_SQLITE_DEBUG=1).",
)
def cli(debug: bool) -> None:
    """Chat with memory, and inspect, maintain and move langmem-sqlite databases."""
    _given["debug"] = debug


def url(db: str | None) -> str:
    """The database named by `--db` (default: `$LANGMEM_SQLITE_URL` or `langmem.db`)."""
    from ..defaults import default_connection

    return db or default_connection()


def readable_url(db: str | None, option: str = "--db") -> str:
    """`url`, refusing a SQLite file that does not exist: commands that only read (or
    clean up) never create a database.

    Raises:
        click.ClickException: no such SQLite file.
    """
    from ..engine import get_database
    from ..engine.dialects import rules_class

    target = url(db)
    found = get_database(target).url
    path = rules_class(found).file_path(found)
    if path not in (None, "", ":memory:"):
        if path.startswith("file:"):  # a URI filename
            path = path[len("file:") :].split("?", 1)[0]
        if not os.path.isfile(path):
            raise click.ClickException(
                f"{option}: no SQLite database at {path} (chat, migrate and import create one)"
            )
    return target


def database(db: str | None, prefix: str, *, write: bool = False) -> Any:
    """The database of `--db`, opened only to read it (with `write`: for a command that
    deletes), once the package's tables with `--prefix` are found there at the latest
    version. Nothing is created or migrated: a command that reads leaves the database as it
    found it (see [`reading_database`][langmem_sqlite.engine.reading_database]).

    Raises:
        click.ClickException: no such SQLite file, no such tables (naming the prefixes of
            tables that are there), or a schema of another version.
    """
    from ..engine import get_database
    from ..engine.migrations import SchemaNotReadyError, SchemaTooNewError, ensure_schema
    from ..engine.opening import reading_database
    from ..engine.schema import get_tables

    target = readable_url(db)
    reading = reading_database(target)
    try:
        ensure_schema(reading, get_tables(prefix))
    except SchemaNotReadyError as e:
        message = str(e)
        if e.other_prefixes:
            hint = f": add --prefix {shlex.quote(e.other_prefixes[0])})"
            message = message.removesuffix(")") + hint
        raise click.ClickException(message) from e
    except SchemaTooNewError as e:
        raise click.ClickException(str(e)) from e
    if not write:
        return reading
    reading.dispose()  # its connections are not needed by the job that writes
    return get_database(target)


_KINDS = {
    "store": ("..history.store", "ConversationStore"),
    "saver": ("..checkpoint", "SQLSaver"),
    "kv": ("..store", "SQLStore"),
}


def opened(
    kind: str, db: str | None, prefix: str, *, create: bool = False, write: bool = False
) -> Any:
    """A [`ConversationStore`][langmem_sqlite.ConversationStore] (`kind` "store"),
    [`SQLSaver`][langmem_sqlite.SQLSaver] ("saver") or [`SQLStore`][langmem_sqlite.SQLStore]
    ("kv") on the [`database`][langmem_sqlite.cli.base.database] of `--db`, or with `create`
    on one where it creates its tables."""
    module, name = _KINDS[kind]
    cls = getattr(importlib.import_module(module, __package__), name)
    return cls(url(db) if create else database(db, prefix, write=write), table_prefix=prefix)


def refused(e: Exception) -> click.ClickException:
    """A job the library refused (no such file, table, thread or user; data that differs), as
    one sentence: without the library's argument name in front of it."""
    text = str(e)
    for argument in ("source: ", "target: ", "table: ", "thread_ids: ", "user_id: "):
        text = text.removeprefix(argument)
    return click.ClickException(text)


def _database() -> tuple[str, str | None]:
    """The database this run named (`--db`, else the default), password hidden, and the
    password."""
    target = url(_given["db"])
    if "://" not in target:
        return target, None
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(target)
    except ArgumentError:
        return target, None
    return parsed.render_as_string(hide_password=True), parsed.password


def _sentence(e: BaseException) -> str:
    """A library error as one line: its message without its class name (of SQLAlchemy's
    errors, the driver's message, without statement, parameters or link, and the database
    named)."""
    orig = getattr(e, "orig", None)
    text = str(orig if isinstance(orig, BaseException) else e)
    line = " ".join(text.split("[SQL:")[0].split("(Background on this error at:")[0].split())
    line = line or "the command failed without a message (--debug shows where)"
    name, password = _database()
    if password:
        line = line.replace(password, "***")
    from sqlalchemy.exc import SQLAlchemyError

    # the package's own errors name what they are about; SQLAlchemy's name no database
    return f"{line} (database {name})" if isinstance(e, SQLAlchemyError) else line


class _Notices(logging.Handler):
    """Prints what the library logs on stderr, a line each (e.g. that a call waits for a
    database another process has locked)."""

    def emit(self, record: logging.LogRecord) -> None:
        err.line(record.getMessage())


_notices = _Notices(logging.WARNING)


def main(argv: list[str] | None = None) -> Any:
    """Entry point: one-line errors and a non-zero exit instead of tracebacks (`--debug` or
    `$LANGMEM_SQLITE_DEBUG=1`: the traceback)."""
    _given.update(db=None, debug=False)
    logging.getLogger("langmem_sqlite.engine.retry").addHandler(_notices)  # once, however often
    try:
        return cli.main(args=argv, prog_name="langmem-sqlite", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as e:  # a bare `langmem-sqlite`: the usage
        click.echo(e.ctx.get_help())
        sys.exit(0)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except (click.Abort, KeyboardInterrupt):
        err.line("aborted")
        sys.exit(130)
    except click.ClickException as e:
        err.line(f"error: {' '.join(e.format_message().split())}")
        sys.exit(e.exit_code)
    except Exception as e:  # everything the library raises: one line, no traceback
        if _given["debug"]:
            traceback.print_exc()
        else:
            err.line(f"error: {_sentence(e)}")
        sys.exit(1)
    finally:
        out.stream.flush()
