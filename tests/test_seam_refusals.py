"""Refusals every scheduler makes alike, on both faces (CONTRACT section 15):

* a callable where a handler's name belongs in ``create_single_timer`` is a ``TypeError``
  saying to ``register`` it and pass its name (it was a ``ValueError`` about a non-empty
  string);
* a payload MongoDB or PostgreSQL cannot store exactly (an integer beyond 64 bits, a NUL
  character) is a ``ValueError`` naming where it is, on every adapter (``InMemoryScheduler``
  accepted ``{"n": 2**70}``, so code tested in memory failed in production)."""

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


UNSTORABLE = [
    ({"n": 2**70}, r"payload\['n'\] = 1180591620717411303424 is an integer beyond signed 64"),
    ({"a": [{"n": -(2**63) - 1}]}, r"payload\['a'\]\[0\]\['n'\] = -9223372036854775809"),
    ({"note": "a\x00b"}, r"payload\['note'\] holds a NUL character"),
    ({"a\x00b": 1}, r"payload has a key with a NUL character"),
]


@pytest.mark.parametrize("adapter", list(SYNC))
@pytest.mark.parametrize(("arg", "message"), UNSTORABLE)
def test_every_adapter_refuses_what_a_database_cannot_store(
    adapter: str, arg: dict[str, Any], message: str
) -> None:
    scheduler = SYNC[adapter](ManualClock())
    with pytest.raises(ValueError, match=message):
        scheduler.create_single_timer("t-1", timedelta(minutes=5), "h", arg)
    assert not scheduler.exists("t-1")


@pytest.mark.parametrize("adapter", list(ASYNC))
@pytest.mark.parametrize(("arg", "message"), UNSTORABLE)
def test_every_async_adapter_refuses_what_a_database_cannot_store(
    adapter: str, arg: dict[str, Any], message: str
) -> None:
    async def scenario() -> None:
        scheduler = ASYNC[adapter](ManualClock())
        with pytest.raises(ValueError, match=message):
            await scheduler.create_single_timer("t-1", timedelta(minutes=5), "h", arg)
        assert not await scheduler.exists("t-1")

    asyncio.run(scenario())


@pytest.mark.parametrize("adapter", list(SYNC))
def test_the_edges_of_64_bits_and_long_digit_strings_are_stored(adapter: str) -> None:
    scheduler = SYNC[adapter](ManualClock())
    arg = {"max": 2**63 - 1, "min": -(2**63), "iban": "12345678901234567890123"}
    stored = scheduler.create_single_timer("t-1", timedelta(minutes=5), "h", arg)
    assert stored.payload == arg and scheduler.get("t-1").payload == arg
