"""A settle the server refuses for good: both faces follow one rule (the node core's, as
on every store) - write the outcomes one by one, drop only the one refused on its own
(logged; its claim runs out) - so one bad outcome never costs the others theirs, and never
stalls the loop: an item scheduled afterwards still fires and is written."""

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
    """A collection stand-in whose server refuses, for good, every write naming ``bad`` (a
    word no claim token, hex, can hold): a delete, or a batch of writes holding one."""

    _PLAIN = frozenset({"database", "name", "full_name"})
    _WRITES = ("delete", "bulk_write")

    def __init__(self, inner: Any, bad: str) -> None:
        self._inner, self._bad = inner, bad
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name in self._PLAIN or not callable(attribute):
            return attribute
        if not name.startswith(self._WRITES):
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


def _sync(collection: Refusing, ran: list[str]) -> bool:
    """Whether ``good`` and, scheduled after the refusal, ``later`` were both written."""
    node = MongoScheduler(collection, node_id="n", poll_interval=POLL)  # type: ignore[arg-type]
    node.subscribe(TIMER, lambda item, attempt: ran.append(item.id))
    now = SystemClock().now()
    for item_id in ("refused", "good"):
        node.schedule(ScheduleItem(item_id, TIMER, now))
    with node:
        assert _until(lambda: collection.refused >= 1 and not node.exists("good"))
        node.schedule(ScheduleItem("later", TIMER, node.now()))
        assert _until(lambda: not node.exists("later"))
        return node.exists("refused") and not node.exists("good")


def _async(collection: Refusing, ran: list[str]) -> bool:
    async def run() -> bool:
        node = AsyncMongoScheduler(collection, node_id="n", poll_interval=POLL)
        node.subscribe(TIMER, lambda item, attempt: ran.append(item.id))
        now = node.now()
        for item_id in ("refused", "good"):
            await node.schedule(ScheduleItem(item_id, TIMER, now))
        async with node:
            while collection.refused < 1 or await node.exists("good"):
                await asyncio.sleep(0.01)
            await node.schedule(ScheduleItem("later", TIMER, node.now()))
            while await node.exists("later"):
                await asyncio.sleep(0.01)
            return await node.exists("refused") and not await node.exists("good")

    return asyncio.run(asyncio.wait_for(run(), 20))


@pytest.mark.parametrize("face", [_sync, _async], ids=["sync", "async"])
def test_one_refused_outcome_never_costs_the_others_theirs(
    face: Callable[[Refusing, list[str]], Any],
) -> None:
    collection = Refusing(mongomock.MongoClient(tz_aware=True)["flowsched"]["timers"], "refused")
    ran: list[str] = []
    # "good" and "later" completed (their outcomes written); "refused" is kept, its claim
    # running out (delivered again then), never dropped with the others.
    assert face(collection, ran) is True
    assert sorted(ran) == ["good", "later", "refused"]
