"""Import results and the progress bar shared by the importers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any


class ImportMismatchError(ValueError):
    """The target already holds data that differs from the source (nothing was overwritten)."""


@dataclass
class ImportReport:
    """Counts of one import run; `verified` means every item was read back equal."""

    kind: str
    containers: int = 0
    """Sessions or threads found in the source (see `container`)."""
    imported: int = 0
    """Messages or checkpoints written by this run (see `item`)."""
    skipped: int = 0
    """Already present in the target (an earlier, possibly interrupted, run)."""
    writes: int = 0
    """Pending writes copied (checkpoints only)."""
    writes_present: int = 0
    """Pending writes of checkpoints already in the target (checkpoints only)."""
    verified: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    container: str = "sessions"
    """What `containers` counts: `"sessions"` or `"threads"`."""
    item: str = "messages"
    """What `imported` and `skipped` count: `"messages"` or `"checkpoints"`."""

    def summary(self) -> str:
        """One line for people, e.g. `2 threads found, 7 checkpoints imported, 0 already
        there, pending writes: 9 imported, 0 already present; verified by reading back`."""

        def count(n: int, plural: str) -> str:
            return f"{n} {plural[:-1] if n == 1 else plural}"

        writes = ""
        if self.item == "checkpoints":
            writes = (
                f", pending writes: {self.writes} imported, {self.writes_present} already present"
            )
        check = "verified by reading back" if self.verified else "NOT verified"
        return (
            f"{count(self.containers, self.container)} found, "
            f"{count(self.imported, self.item)} imported, {self.skipped} already there{writes}; "
            f"{check}"
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "kind": self.kind,
            "containers": self.containers,
            self.container: self.containers,
            "imported": self.imported,
            "skipped": self.skipped,
            "writes": self.writes,
            "writes_present": self.writes_present,
            "verified": self.verified,
        }


@contextmanager
def progress_bar(label: str, total: int, show: bool) -> Iterator[Callable[..., None]]:
    """A rich progress bar on stderr (hidden unless `show`): yields its `advance(n=1)`."""
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), disable=not show) as progress:
        yield partial(progress.advance, progress.add_task(label, total=total))


def source_name(conn: Any) -> str:
    """The source for messages: a SQLite file's path, else its URL (password hidden)."""
    from ...engine.dialects import rules_for

    url = conn.engine.url
    path: str | None = rules_for(conn.engine).file_path(url)
    return path or str(url.render_as_string(hide_password=True))


@contextmanager
def source_connection(source: Any) -> Iterator[Any]:
    """A SQLAlchemy `Connection` reading `source` (a URL, a path, an `Engine` or a
    [`Database`][langmem_sqlite.Database]) through
    [`reading_database`][langmem_sqlite.engine.reading_database]: a SQLite file keeps
    its journal mode and is never written. A source given as a URL or a path has its
    connections closed when the block ends, so that a SQLite file and its directory are left as
    they were found (no `-wal` or `-shm` file).

    Raises:
        FileNotFoundError: `source` names a SQLite file that does not exist.
    """
    import os

    from sqlalchemy.engine import URL

    from ...engine.opening import reading_database

    opened = isinstance(source, str | os.PathLike | URL)
    db = reading_database(source)
    path = db.rules.file_path(db.url)
    if opened and path and not os.path.isfile(path):
        raise FileNotFoundError(f"source: no SQLite file at {path}")
    try:
        with db.sync_engine.connect() as conn:
            yield conn
    finally:
        if opened:
            db.dispose()
