"""The package's clock: every timestamp is read here, so tests can move time for all."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

DAY_MS = 86_400_000

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def now_us() -> int:
    """Now, in microseconds since the epoch."""
    return time.time_ns() // 1000


def now_ms() -> int:
    """Now, in milliseconds since the epoch."""
    return now_us() // 1000


def dt(us: int) -> datetime:
    """The UTC `datetime` of `us` microseconds since the epoch."""
    return _EPOCH + timedelta(0, us // 1_000_000, us % 1_000_000)
