"""`langmem-sqlite chat --tour`: a scripted offline chat in two processes on a new database."""

from __future__ import annotations

import shlex
import subprocess
import sys
from itertools import count
from pathlib import Path
from typing import NamedTuple

from sqlalchemy.engine import make_url

from ..engine import get_database
from ..engine.dialects import rules_class
from ..engine.schema import DEFAULT_PREFIX, get_tables
from ..operations.maintenance import table_stats

FIRST_RUN = """\
Hi, my name is Ada.
I live in Lyon.
I like green tea.
I am planning a trip to the Alps next month.
The trip is for hiking, mostly in the Vanoise park.
I will travel by train from Lyon.
/summary
/facts
"""

SECOND_RUN = """\
What is my name?
/history 4
/new
Where do I live?
What do I like?
"""

_OPTIONS = ["--user", "ada", "--offline", "--max-tokens", "800", "--trigger-tokens", "300"]
_EXPECTED = (
    "summary of",
    "Your name is Ada (found in",
    "You live in Lyon (found in long-term facts)",
    "You like green tea (found in long-term facts)",
)


def _create(path: Path) -> bool:
    """Create the empty SQLite file `path`; False if it or a journal of it exists."""
    if any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm", "-journal")):
        return False
    try:
        path.touch(exist_ok=False)  # an exclusive create: two tours never share a file
    except FileExistsError:
        return False
    except OSError as e:
        raise ValueError(f"cannot create {path}: {e.strerror}") from e
    return True


class _Start(NamedTuple):
    target: str  # the chat processes' --db
    place: str  # "file" or "database"
    detail: str  # the file's absolute path, or the URL without its password
    shown: str  # the closing hint's --db, without a password


def _start(db: str | None, prefix: str) -> _Start:
    """Claim a new database for the tour (`ValueError` if it is not new)."""
    tables = get_tables(prefix)
    if db is None:
        names = ("langmem-tour.db" if n == 1 else f"langmem-tour-{n}.db" for n in count(1))
        name = next(name for name in names if _create(Path(name).absolute()))
        return _Start(name, "file", str(Path(name).absolute()), name)
    database = get_database(db)
    url = database.url
    if url.get_backend_name() == "sqlite":
        file = rules_class(url).file_path(url)
        if not file:
            raise ValueError(
                f"{db} is an in-memory database; the tour needs one that outlives a process"
            )
        if file.startswith("file:"):  # a URI filename
            file = file[len("file:") :].split("?", 1)[0]
        path = Path(file).absolute()
        if not _create(path):
            raise ValueError(
                f"{path} exists already; the tour writes only to a file it creates "
                "(leave out --db to let it pick a new name)"
            )
        return _Start(db, "file", str(path), db)
    shown = make_url(db).render_as_string(hide_password=True)
    try:
        stats = table_stats(database, tables)
    finally:
        database.dispose()
    if any(s.rows for s in stats if s.table != tables.migrations.name):
        raise ValueError(
            f"the {prefix} tables of {shown} already hold data; the tour writes only to empty "
            "ones (give another --prefix or database)"
        )
    return _Start(db, "database", shown, shown)


def run_tour(db: str | None = None, *, prefix: str = DEFAULT_PREFIX) -> int:
    """Run both processes on a new database; 0 if all was recalled.

    Process 1 chats (facts remembered, a summary written) and exits; process 2 continues the
    conversation cold, then opens a new session where only the facts carry over.

    Args:
        db: a SQLite path or a database URL: a file that does not exist yet, or a server
            database whose tables (with `prefix`) hold no rows. `None`: `langmem-tour.db` in
            the current directory, or `langmem-tour-2.db`, ... if that exists.
        prefix: the table prefix.

    Raises:
        ValueError: `db` holds data or is in memory, or `prefix` is not a table prefix
            (nothing is written).
    """
    start = _start(db, prefix)
    print(f"Memory {start.place}: {start.detail}")
    seen = ""
    argv = [sys.executable, "-m", "langmem_sqlite", "chat", "--db", start.target]
    argv += ["--prefix", prefix, *_OPTIONS, "--script", "-"]
    for n, (title, script) in enumerate(
        (("a new conversation", FIRST_RUN), ("after a restart", SECOND_RUN)), start=1
    ):
        print(f"\n=== process {n}: {title} ===")
        proc = subprocess.run(argv, input=script, capture_output=True, text=True, check=False)
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        seen += proc.stdout
    missing = [e for e in _EXPECTED if e not in seen]
    if missing:
        print(f"\nFAILED: expected {missing}")
        return 1
    again = f"langmem-sqlite chat --db {shlex.quote(start.shown)}"
    if prefix != DEFAULT_PREFIX:
        again += f" --prefix {prefix}"
    print(
        f"\nThe second process continued the conversation from the {start.place}, and a new "
        f"session recalled the long-term facts. Chat yourself: {again} --user ada"
    )
    return 0
