"""Import results and the progress bar shared by the importers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ImportMismatchError", "ImportReport", "progress_bar", "source_engine"]


class ImportMismatchError(ValueError):
    """The target already holds data that differs from the source (nothing was overwritten)."""


@dataclass
class ImportReport:
    """Counts of one import run; `verified` means every item was read back equal."""

    kind: str
    containers: int = 0
    """Sessions or threads found in the source (see
    [`container`][langmem_sqlite.operations.importers.ImportReport.container])."""
    imported: int = 0
    """Messages or checkpoints written by this run (see
    [`item`][langmem_sqlite.operations.importers.ImportReport.item])."""
    skipped: int = 0
    """Already present in the target (an earlier, possibly interrupted, run)."""
    writes: int = 0
    """Pending writes copied (checkpoints only)."""
    verified: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    container: str = "sessions"
    """What [`containers`][langmem_sqlite.operations.importers.ImportReport.containers] counts:
    `"sessions"` or `"threads"`."""
    item: str = "messages"
    """What [`imported`][langmem_sqlite.operations.importers.ImportReport.imported] and
    [`skipped`][langmem_sqlite.operations.importers.ImportReport.skipped] count: `"messages"` or
    `"checkpoints"`."""

    def summary(self) -> str:
        """One line for people, e.g. `2 threads found, 7 checkpoints imported, ...`."""
        writes = f", {self.writes} pending writes" if self.item == "checkpoints" else ""
        check = "verified by reading back" if self.verified else "NOT verified"
        return (
            f"{self.containers} {self.container} found, {self.imported} {self.item} imported, "
            f"{self.skipped} already there{writes}; {check}"
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
            "verified": self.verified,
        }


class _NoBar:
    def advance(self, n: int = 1) -> None:
        pass


class _Bar:
    def __init__(self, progress: Any, task: Any) -> None:
        self.progress, self.task = progress, task

    def advance(self, n: int = 1) -> None:
        self.progress.advance(self.task, n)


@contextmanager
def progress_bar(label: str, total: int, show: bool) -> Iterator[Any]:
    """A rich progress bar on stderr (or a no-op) with `advance(n)`."""
    if not show:
        yield _NoBar()
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=False) as progress:
        yield _Bar(progress, progress.add_task(label, total=total))


def source_engine(source: Any) -> Any:
    """A SQLAlchemy `Engine` reading `source`: SQLite files are opened read-only (an import
    never changes the file it reads, not even its journal mode); other URLs, engines and
    [`Database`][langmem_sqlite.Database] objects go through
    [`get_database`][langmem_sqlite.get_database]."""
    import sqlalchemy as sa

    from ...engine import get_database
    from ...engine.dialects import dialect_class

    path: str | None = None
    if isinstance(source, Path):
        path = str(source)
    elif isinstance(source, str) and "://" not in source:
        path = source
    elif isinstance(source, str):  # a URL: the file of an embedded database, if it is one
        found = sa.make_url(source)
        path = dialect_class(found).file_path(found)
    if path is None:
        return get_database(source).sync_engine
    if not Path(path).is_file():
        raise FileNotFoundError(f"source: no SQLite file {path!r}")
    uri = f"{Path(path).absolute().as_uri().replace('file://', 'file:', 1)}?mode=ro"
    return sa.create_engine("sqlite://", creator=lambda: _connect_ro(uri), poolclass=sa.NullPool)


def _connect_ro(uri: str) -> Any:
    import sqlite3

    return sqlite3.connect(uri, uri=True)
