"""The one retry rule: which failures re-run a unit of work, how often, and for how long.

A failure is transient when the database's rules object (`Rules.fault`) names its
[`Fault`][langmem_sqlite.engine.Fault]: it re-runs the whole unit, with growing pauses, until
the call's deadline (`retry_seconds`), then raises
[`DatabaseUnavailableError`][langmem_sqlite.engine.DatabaseUnavailableError]. Until a database
has been reached once by this process, a failure to connect is not retried. Re-running is safe
because every write is idempotent or guarded (upserts of the same values, insert-if-absent, the
history's write token).
"""

from __future__ import annotations

import enum
import logging
import os
import random
import time
from typing import Any, Protocol

from sqlalchemy import exc

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())  # quiet unless the application shows warnings

DEFAULT_RETRY_SECONDS = 30.0
"""How long a call keeps retrying transient failures (`$LANGMEM_SQLITE_RETRY_SECONDS`
overrides it for the process; `get_database(..., retry_seconds=...)` for one database)."""

NOTICE_AFTER_SECONDS = 1.0
"""How long a call fails before it logs that it is waiting for the database (one warning per
database in a span of its retry deadline: calls that wait together make one)."""

_FIRST_PAUSE = 0.05
_LONGEST_PAUSE = 1.0


class DatabaseUnavailableError(ConnectionError):
    """The database could not be used: at the first connection of a process (no retries: the
    server is not there or does not answer within the connect timeout, the database does not
    exist, the file is not a database or its directory is missing), or for longer than the
    retry deadline (a restart or an outage that outlasted it, a SQLite file whose write lock
    another process kept).

    The message names the database with its password hidden, and why (the driver's last error,
    or in words such as "another process holds its write lock"); the driver's error is the
    `__cause__` (none when the call waited for this process's other writers).

    Attributes:
        url: the database URL, password hidden.
        attempts: how many times the operation was tried.
        waited: seconds spent trying.
    """

    def __init__(self, message: str, *, url: str, attempts: int, waited: float) -> None:
        super().__init__(message)
        self.url = url
        self.attempts = attempts
        self.waited = waited


class Fault(enum.Enum):
    """The kinds of transient failure: the server refused the connection or is not ready
    (`CONNECT`), an open connection died (`LOST`), contention such as a locked SQLite file,
    a deadlock or a serialization failure (`BUSY`)."""

    CONNECT = "connect"
    LOST = "lost"
    BUSY = "busy"


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


class _Target(Protocol):
    """What the retries of a call read and note on their database (a `Database`)."""

    rules: Any
    url: Any
    retry_seconds: float
    reached: bool
    busy: str | None
    noticed_at: float

    def safe_url(self) -> str: ...


class Attempts:
    """The retries of one call: create one per call, and ask `pause` after each failure."""

    __slots__ = ("_db", "_deadline", "_start", "count")

    def __init__(self, db: _Target) -> None:
        self._db = db
        self._start = time.monotonic()
        self._deadline = self._start + db.retry_seconds
        self.count = 0

    def left(self) -> float:
        """Seconds until the deadline (0 once it has passed)."""
        return max(self._deadline - time.monotonic(), 0.0)

    def pause(self, error: exc.DBAPIError) -> float:
        """Seconds to wait before the next try.

        Raises:
            exc.DBAPIError: `error` itself, when it is not transient on a database reached
                before.
            DatabaseUnavailableError: the database was never reached (a connection could not
                be opened), or the deadline has passed.
        """
        db = self._db
        kind = db.rules.fault(error)
        self.count += 1
        if kind is None and db.reached:
            raise error
        why = db.rules.reason(db.url, error, kind) or _first_line(error)
        if kind is not Fault.BUSY and not db.reached:
            raise DatabaseUnavailableError(
                f"cannot open the database {db.safe_url()}: {why}",
                url=db.safe_url(),
                attempts=self.count,
                waited=time.monotonic() - self._start,
            ) from error
        now = time.monotonic()
        if kind is Fault.BUSY:
            db.busy = why
        if now >= self._deadline:
            raise self.expired(why) from error
        if now - self._start >= NOTICE_AFTER_SECONDS and now - db.noticed_at > db.retry_seconds:
            db.noticed_at = now
            logger.warning(
                "waiting for the database %s: %s (for up to %g s)",
                db.safe_url(),
                why,
                db.retry_seconds,
            )
        pause = min(_FIRST_PAUSE * 2 ** min(self.count - 1, 10), _LONGEST_PAUSE)
        return min(pause * (0.5 + random.random()), self._deadline - now)

    def expired(self, why: str) -> DatabaseUnavailableError:
        """The error that ends the call at its deadline; `why` says what kept it waiting."""
        db = self._db
        waited = time.monotonic() - self._start
        return DatabaseUnavailableError(
            f"the database {db.safe_url()} was unavailable for {waited:.1f} s "
            f"(retry_seconds={db.retry_seconds:g}): {why}",
            url=db.safe_url(),
            attempts=self.count,
            waited=waited,
        )
