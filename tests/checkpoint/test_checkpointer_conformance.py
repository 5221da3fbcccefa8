"""langgraph-checkpoint-conformance on every database, through the async AND the sync methods.

The suite only calls ``a*`` methods; :class:`SyncDriven` routes each of them to the sync
method of the same saver (in a worker thread), so the same scenarios exercise both paths.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from langmem_sqlite import SQLSaver


class SyncDriven(SQLSaver):
    """A saver whose async methods call its sync methods."""

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.put, *args, **kwargs)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.to_thread(self.put_writes, *args, **kwargs)

    async def aget_tuple(self, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.get_tuple, *args, **kwargs)

    async def alist(self, *args: Any, **kwargs: Any) -> AsyncIterator[CheckpointTuple]:
        for item in await asyncio.to_thread(lambda: list(self.list(*args, **kwargs))):
            yield item

    async def adelete_thread(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.to_thread(self.delete_thread, *args, **kwargs)

    async def adelete_for_runs(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.to_thread(self.delete_for_runs, *args, **kwargs)

    async def acopy_thread(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.to_thread(self.copy_thread, *args, **kwargs)

    async def aprune(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.to_thread(self.prune, *args, **kwargs)


@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_conformance_all_capabilities(db_url: str, prefix: str, mode: str) -> None:
    cls = SQLSaver if mode == "async" else SyncDriven

    @checkpointer_test(name=f"SQLSaver-{mode}-{prefix}")
    async def factory() -> AsyncIterator[SQLSaver]:
        yield cls(db_url, table_prefix=prefix)

    report = await validate(factory)
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    problems = {
        name: (r.detected, r.tests_passed, r.failures)
        for name, r in report.results.items()
        if not (r.detected and r.passed)
    }
    assert not problems, problems
    assert sum(r.tests_passed for r in report.results.values()) >= 80
