"""The one retry rule: which failures re-run a transaction, how often, and for how long.

Every public call of the package runs its transactions through `Attempts`, whatever the
database, the driver or the path (sync, async in a worker thread, or a caller's
`AsyncEngine`). A failure is *transient* when the database's dialect object
(`fault`) names its kind:

* `Fault.CONNECT`: the server refused the connection or is not ready yet (starting up,
  recovering, shutting down);
* `Fault.LOST`: an open connection died (reset, closed, killed by an administrator);
* `Fault.BUSY`: contention (a locked SQLite file, a deadlock, a serialization failure).

Transient failures re-run the whole transaction, with growing pauses, until the call's deadline
([`DEFAULT_RETRY_SECONDS`][langmem_sqlite.engine.DEFAULT_RETRY_SECONDS] after it started, or
`retry_seconds`); then the call raises
[`DatabaseUnavailableError`][langmem_sqlite.engine.DatabaseUnavailableError] (the busy kind
re-raises the database's own error). Until a database has been reached once by this process, a
connection failure is not retried: a server that is not there, or a wrong URL, fails at once.

Re-running is safe because every write is idempotent or guarded: checkpoint rows are upserts of
the same values, blobs and ordinary writes are insert-if-absent, store writes are upserts of the
same value, and appends to a chat history carry a write token (see `langmem_sqlite.history.sql`).
"""

from __future__ import annotations

import enum
import os
import random
import time
from typing import Any, Protocol

from sqlalchemy import exc

from .errors import DatabaseUnavailableError

__all__ = ["DEFAULT_RETRY_SECONDS", "Attempts", "Fault", "default_retry_seconds"]

DEFAULT_RETRY_SECONDS = 30.0
"""How long a call keeps retrying transient failures (`$LANGMEM_SQLITE_RETRY_SECONDS`
overrides it for the process; `get_database(..., retry_seconds=...)` for one database)."""

_FIRST_PAUSE = 0.05
_LONGEST_PAUSE = 1.0


class Fault(enum.Enum):
    """The kinds of transient failure (see the module documentation)."""

    CONNECT = "connect"
    LOST = "lost"
    BUSY = "busy"


class _Target(Protocol):
    """What `Attempts` needs of a database."""

    reached: bool
    retry_seconds: float

    def fault(self, error: BaseException) -> Fault | None: ...

    def safe_url(self) -> str: ...


def default_retry_seconds() -> float:
    """[`DEFAULT_RETRY_SECONDS`][langmem_sqlite.engine.DEFAULT_RETRY_SECONDS], or
    `$LANGMEM_SQLITE_RETRY_SECONDS` when set."""
    text = os.environ.get("LANGMEM_SQLITE_RETRY_SECONDS")
    if not text:
        return DEFAULT_RETRY_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 <= value <= 86_400):
        raise ValueError(
            f"LANGMEM_SQLITE_RETRY_SECONDS: expected seconds from 0 to 86400, got {text!r}"
        )
    return value


def _first_line(error: BaseException) -> str:
    orig: Any = getattr(error, "orig", None) or error
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


class Attempts:
    """The retries of one call: create one per call, and ask `pause` after each failure."""

    __slots__ = ("_db", "_deadline", "_start", "count")

    def __init__(self, db: _Target) -> None:
        self._db = db
        self._start = time.monotonic()
        self._deadline = self._start + db.retry_seconds
        self.count = 0

    def pause(self, error: exc.DBAPIError) -> float:
        """Seconds to wait before the next try; raises instead when `error` is not transient
        (itself), or when the deadline has passed or the database was never reached
        ([`DatabaseUnavailableError`][langmem_sqlite.engine.DatabaseUnavailableError], or the
        database's error for contention)."""
        db = self._db
        kind = db.fault(error)
        self.count += 1
        if kind is None:
            raise error
        now = time.monotonic()
        if kind is not Fault.BUSY and not db.reached:
            raise DatabaseUnavailableError(
                f"cannot connect to the database {db.safe_url()}: {_first_line(error)}",
                url=db.safe_url(),
                attempts=self.count,
                waited=now - self._start,
            ) from error
        if now >= self._deadline:
            if kind is Fault.BUSY:
                raise error
            raise DatabaseUnavailableError(
                f"the database {db.safe_url()} was unavailable for "
                f"{now - self._start:.1f} s ({self.count} attempts; retry_seconds="
                f"{db.retry_seconds:g}): {_first_line(error)}",
                url=db.safe_url(),
                attempts=self.count,
                waited=now - self._start,
            ) from error
        pause = min(_FIRST_PAUSE * 2 ** min(self.count - 1, 10), _LONGEST_PAUSE)
        return min(pause * (0.5 + random.random()), self._deadline - now)
