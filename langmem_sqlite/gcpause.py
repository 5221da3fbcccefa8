"""Pausing Python's cyclic garbage collector around work that builds many short-lived objects.

Decoding a long conversation or writing a batch of a thousand items makes thousands of small
containers that live until the work ends, and none of them form cycles. While they are alive
the collector's young-generation passes promote them, and every few such batches a full
collection runs over the whole process (70 ms, measured in a process holding 150,000 tracked
objects, against 40 ms for the batch itself). Paused, the objects are freed by reference
counting before the collector ever sees them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused(pause: bool = True) -> Iterator[None]:
    """Disable the cyclic collector for the block (if ``pause`` and it was enabled), then
    enable it again; a collector disabled by the application stays disabled."""
    enabled = pause and gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
