"""The store's clock: microseconds since the epoch, and back to an aware `datetime`.

Read through this module (`clock.now_us()`), so that tests can move time forward for every
part of the store at once."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

__all__ = ["dt", "now_us"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def now_us() -> int:
    """Now, in microseconds since the epoch."""
    return time.time_ns() // 1000


def dt(us: int) -> datetime:
    """The UTC `datetime` of `us` microseconds since the epoch."""
    return _EPOCH + timedelta(0, us // 1_000_000, us % 1_000_000)  # positional: 0.1 us less
