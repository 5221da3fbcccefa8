"""Plans: operations written once for sync and async callers, as generators.

A plan yields requests (a unit of work for the database, a batch for the store, a prompt for
the summarizer) and receives each answer; [`drive`][langmem_sqlite.plans.drive] answers them
with a sync function, [`adrive`][langmem_sqlite.plans.adrive] with an async one. An exception
raised while answering is thrown into the plan at its `yield`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

Q = TypeVar("Q")
A = TypeVar("A")
T = TypeVar("T")


def drive(plan: Generator[Q, A, T], answer: Callable[[Q], A]) -> T:
    """Run `plan` to its end, answering each request with `answer(request)`; return its value."""
    try:
        request = next(plan)
        while True:
            try:
                reply: Any = answer(request)
            except Exception as e:
                request = plan.throw(e)
            else:
                request = plan.send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(plan: Generator[Q, A, T], answer: Callable[[Q], Awaitable[A]]) -> T:
    """The async twin of [`drive`][langmem_sqlite.plans.drive]: `answer` is awaited."""
    try:
        request = next(plan)
        while True:
            try:
                reply: Any = await answer(request)
            except Exception as e:
                request = plan.throw(e)
            else:
                request = plan.send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
