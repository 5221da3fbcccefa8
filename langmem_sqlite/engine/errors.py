"""The errors the execution layer raises of its own."""

from __future__ import annotations

__all__ = ["DatabaseUnavailableError"]


class DatabaseUnavailableError(ConnectionError):
    """The database could not be reached: at the first connection of a process (no retries:
    the server is not there, or the URL is wrong), or for longer than the retry deadline of a
    server that was reachable before (a restart or an outage that outlasted it).

    The message names the database with its password hidden, and the driver's last error; that
    error is also the `__cause__`.

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
