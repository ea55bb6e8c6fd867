"""Refusals every scheduler makes alike, on both faces (CONTRACT section 15): a callable
where a handler's name belongs in ``create_single_timer`` is a ``TypeError`` saying to
``register`` it and pass its name (it was a ``ValueError`` about a non-empty string)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from flowsched import (
    AsyncInMemoryScheduler,
    AsyncMongoScheduler,
    InMemoryScheduler,
    ManualClock,
    MongoScheduler,
)

mongomock = pytest.importorskip("mongomock")


def _collection() -> Any:
    return mongomock.MongoClient(tz_aware=True)["seams"]["timers"]


SYNC: dict[str, Callable[[ManualClock], Any]] = {
    "memory": lambda clock: InMemoryScheduler(clock=clock),
    "mongo": lambda clock: MongoScheduler(_collection(), clock=clock),
}
ASYNC: dict[str, Callable[[ManualClock], Any]] = {
    "async-memory": lambda clock: AsyncInMemoryScheduler(clock=clock),
    "async-mongo": lambda clock: AsyncMongoScheduler(_collection(), clock=clock),
}


def send_reminder(item: Any, attempt: int) -> None:
    """A handler a user passes where its name belongs."""


@pytest.mark.parametrize("adapter", list(SYNC))
def test_a_callable_for_a_handler_name_says_to_register_it(adapter: str) -> None:
    scheduler = SYNC[adapter](ManualClock())
    with pytest.raises(TypeError, match=r"register.*send_reminder.*pass that name"):
        scheduler.create_single_timer("r-1", timedelta(minutes=5), send_reminder)
    assert not scheduler.exists("r-1")


@pytest.mark.parametrize("adapter", list(ASYNC))
def test_a_callable_for_a_handler_name_says_to_register_it_async(adapter: str) -> None:
    async def scenario() -> None:
        scheduler = ASYNC[adapter](ManualClock())
        with pytest.raises(TypeError, match=r"register.*send_reminder.*pass that name"):
            await scheduler.create_single_timer("r-1", timedelta(minutes=5), send_reminder)
        assert not await scheduler.exists("r-1")

    asyncio.run(scenario())
