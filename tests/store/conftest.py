"""Fixtures of the store tests."""

from __future__ import annotations

import pytest

from langmem_sqlite import SQLStore


@pytest.fixture
def store(db_url: str, prefix: str) -> SQLStore:
    """A store on the current backend, its tables under the test's prefix."""
    return SQLStore(db_url, table_prefix=prefix)
