"""The errors the execution layer raises of its own."""

from __future__ import annotations

__all__ = ["DatabaseUnavailableError"]


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
