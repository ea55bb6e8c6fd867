"""A settle the server refuses for good: both faces follow one rule - write the outcomes one
by one, drop only the one refused on its own (logged; its claim runs out) - so one bad
outcome never costs the others theirs, and never stalls the loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import mongomock
import pytest
from pymongo.errors import WriteError

from flowsched import AsyncMongoScheduler, MongoScheduler, ScheduleItem, ScheduleKind
from flowsched.clock import SystemClock

TIMER = ScheduleKind.TIMER
POLL = timedelta(milliseconds=20)


class Refusing:
    """A collection stand-in whose server refuses, for good, every delete naming ``bad`` (a
    word no claim token, hex, can hold)."""

    _PLAIN = frozenset({"database", "name", "full_name"})

    def __init__(self, inner: Any, bad: str) -> None:
        self._inner, self._bad = inner, bad
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name in self._PLAIN or not callable(attribute):
            return attribute
        if not name.startswith("delete"):
            return attribute

        def call(query: Any, *args: Any, **kwargs: Any) -> Any:
            if self._bad in repr(query):
                self.refused += 1
                raise WriteError("Document failed validation", code=121)
            return attribute(query, *args, **kwargs)

        return call


def _until(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not condition():
        time.sleep(0.01)
    return condition()


def _sync(collection: Refusing, ran: list[str]) -> Any:
    node = MongoScheduler(collection, node_id="n", poll_interval=POLL)  # type: ignore[arg-type]
    node.subscribe(TIMER, lambda item, attempt: ran.append(item.id))
    now = SystemClock().now()
    for item_id in ("refused", "good"):
        node.schedule(ScheduleItem(item_id, TIMER, now))
    with node:
        assert _until(lambda: collection.refused >= 1 and node._sweeper is not None)
        assert _until(lambda: not node._sweeper._finished and not node._sweeper._unwritten)
        return node._store.find("good")


def _async(collection: Refusing, ran: list[str]) -> Any:
    async def run() -> Any:
        node = AsyncMongoScheduler(collection, node_id="n", poll_interval=POLL)
        node.subscribe(TIMER, lambda item, attempt: ran.append(item.id))
        now = node.now()
        for item_id in ("refused", "good"):
            await node.schedule(ScheduleItem(item_id, TIMER, now))
        async with node:
            while collection.refused < 1:
                await asyncio.sleep(0.01)
            while node._sweeper._finished:  # kept and retried for ever before the one rule
                await asyncio.sleep(0.01)
            return await node._call("find", lambda: node._store.find_steps("good"))

    return asyncio.run(asyncio.wait_for(run(), 20))


@pytest.mark.parametrize("face", [_sync, _async], ids=["sync", "async"])
def test_one_refused_outcome_never_costs_the_others_theirs(
    face: Callable[[Refusing, list[str]], Any],
) -> None:
    collection = Refusing(mongomock.MongoClient(tz_aware=True)["flowsched"]["timers"], "refused")
    ran: list[str] = []
    assert face(collection, ran) is None  # "good" was completed: its outcome written
    assert sorted(ran) == ["good", "refused"]
