"""Fixtures of the checkpointer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langmem_sqlite import SQLSaver


@pytest.fixture
def saver(db_url: str, prefix: str) -> Iterator[SQLSaver]:
    """A saver on the current backend, its tables under the test's prefix."""
    yield SQLSaver(db_url, table_prefix=prefix)
