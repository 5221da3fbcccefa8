"""The command group, the options every command shares, and the entry point.

Only `click` is imported here: `--help` and `--version` load no database code (each
command imports what it needs when it runs).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from .. import __version__
from .output import err, out

__all__ = [
    "DEFAULT_PREFIX",
    "INT64_MAX",
    "MAX_DAYS",
    "FiniteRange",
    "cli",
    "count_range",
    "db_option",
    "json_option",
    "kv_store",
    "limit_option",
    "main",
    "prefix_option",
    "readable_url",
    "saver",
    "store",
    "url",
    "user_option",
    "with_options",
]

DEFAULT_PREFIX = "langmem_"
"""The default table prefix (`langmem_sqlite.engine.schema.DEFAULT_PREFIX`, without importing
it)."""

INT64_MAX = 2**63 - 1
"""The largest integer every supported database stores (`langmem_sqlite.validation.INT64_MAX`,
without importing it): the upper bound of counts given on the command line."""

MAX_DAYS = 100_000_000
"""The largest number of days the retention commands take
(`langmem_sqlite.history.store.MAX_DAYS`, without importing it)."""


class FiniteRange(click.FloatRange):
    """A `click.FloatRange` that also refuses `nan` (which no range comparison
    catches): a bad value is a usage error naming the option."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


def count_range(low: int = 1, high: int = INT64_MAX) -> click.IntRange:
    """An integer option from `low` to `high` (default: up to `INT64_MAX`)."""
    return click.IntRange(min=low, max=high)


db_option = click.option(
    "--db",
    default=None,
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


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Every command takes --db and --prefix; listings take --json. "
    "'langmem-sqlite COMMAND --help' describes one.",
)
@click.version_option(__version__, "--version", "-V", prog_name="langmem-sqlite")
def cli() -> None:
    """Chat with memory, and inspect, maintain and move langmem-sqlite databases."""


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
    from ..engine.dialects import dialect_class

    target = url(db)
    found = get_database(target).url
    path = dialect_class(found).file_path(found)
    if path not in (None, "", ":memory:"):
        if path.startswith("file:"):  # a URI filename
            path = path[len("file:") :].split("?", 1)[0]
        if not os.path.isfile(path):
            raise click.ClickException(
                f"{option}: no SQLite database at {path} (chat, migrate and import create one)"
            )
    return target


def store(db: str | None, prefix: str, *, create: bool = False) -> Any:
    """A [`ConversationStore`][langmem_sqlite.ConversationStore] on `--db`."""
    from ..history.store import ConversationStore

    return ConversationStore(url(db) if create else readable_url(db), table_prefix=prefix)


def saver(db: str | None, prefix: str, *, create: bool = False) -> Any:
    """A [`SQLSaver`][langmem_sqlite.SQLSaver] on `--db`."""
    from ..checkpoint import SQLSaver

    return SQLSaver(url(db) if create else readable_url(db), table_prefix=prefix)


def kv_store(db: str | None, prefix: str, *, create: bool = False) -> Any:
    """A [`SQLStore`][langmem_sqlite.SQLStore] on `--db`."""
    from ..store import SQLStore

    return SQLStore(url(db) if create else readable_url(db), table_prefix=prefix)


def _one_line(e: BaseException) -> str:
    """A library error on one line (SQLAlchemy's statement and parameters left out)."""
    return " ".join(str(e).split("[SQL:")[0].split())


def main(argv: list[str] | None = None) -> Any:
    """Entry point: one-line errors and a non-zero exit instead of tracebacks."""
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
        err.line(f"error: {type(e).__name__}: {_one_line(e)}")
        sys.exit(1)
    finally:
        out.stream.flush()
