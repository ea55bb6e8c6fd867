"""A claim checks its candidates and sorts the documents it won in slices, with a pause (one
turn of the loop on ``AsyncMongoScheduler``) between them, so that no callback does a whole
batch's. Shut down at a pause of the sort, the node gives every claim of the batch back
unrun, and the next node runs each once. On mongomock: the pauses are the driver's
``await asyncio.sleep(0)``, the same on the wire."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from async_kit import mongomock_collection, until  # noqa: E402

from flowsched import AsyncMongoScheduler, MongoScheduler, ScheduleItem, ScheduleKind  # noqa: E402
from flowsched.mongo import claimed_batch, claims  # noqa: E402
from flowsched.mongo.commands import Breather, Steps, drive  # noqa: E402

TIMER = ScheduleKind.TIMER
FAST = timedelta(milliseconds=50)


@pytest.fixture
def collection() -> Any:
    return mongomock_collection()


def _counting(steps: Steps[Any], pauses: list[Breather]) -> Steps[Any]:
    """``steps`` passed through, its pauses noted."""
    try:
        op = next(steps)
        while True:
            if isinstance(op, Breather):
                pauses.append(op)
            op = steps.send((yield op))
    except StopIteration as stop:
        return stop.value


def _pauses(collection: Any, count: int) -> int:
    """How many pauses one claim of ``count`` due documents makes (the sync driver passes
    over them)."""
    node = MongoScheduler(collection, node_id="counting")
    node.subscribe(TIMER, lambda item, attempt: None)
    for n in range(count):
        node.schedule(ScheduleItem(f"c-{n:03d}", TIMER, node.now()))
    pauses: list[Breather] = []
    batch = drive(_counting(node._claimer.take_steps(count), pauses), node._store)
    assert len(batch.deliver) == count
    return len(pauses)


def test_a_claim_pauses_between_slices_of_its_batch(collection: Any) -> None:
    # Between slices of the candidates it checks, and of the documents it won and sorts.
    check, sort = claims.CHECK_SLICE, claimed_batch.SORT_SLICE
    count = 2 * max(check, sort) + 1
    assert _pauses(collection, count) == (count - 1) // check + (count - 1) // sort
    assert _pauses(collection.database[f"{collection.name}_2"], min(check, sort)) == 0


@pytest.mark.asyncio
async def test_a_shutdown_while_a_claim_sorts_its_batch_gives_every_claim_back(
    collection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The firing task is cancelled (the node shuts down) as the claim sorts the last
    # document before its first pause: the pause raises, the sort is finished without
    # pausing, and every claim is given back (Release) when the node closes. Nothing ran,
    # nothing is left claimed or counted, and the next node runs each item once.
    count = claimed_batch.SORT_SLICE + 10
    first = AsyncMongoScheduler(collection, node_id="first", poll_interval=FAST)
    ran: Counter[str] = Counter()

    async def record(item: ScheduleItem, attempt: int) -> None:
        ran[item.id] += 1

    first.subscribe(TIMER, record)
    now = first.now()
    for n in range(count):
        await first.schedule(ScheduleItem(f"t-{n:02d}", TIMER, now))
    sort = claimed_batch.BatchClaimer._sort
    sorted_count = 0

    def sort_then_stop(self: Any, *args: Any) -> None:
        nonlocal sorted_count
        sort(self, *args)
        sorted_count += 1
        if sorted_count == claimed_batch.SORT_SLICE:
            for task in asyncio.all_tasks():
                if task.get_name() == "flowsched-mongo-firing":
                    task.cancel()

    monkeypatch.setattr(claimed_batch.BatchClaimer, "_sort", sort_then_stop)
    await first.start()
    assert await until(lambda: sorted_count >= count)  # the rest sorted, unpaused
    await first.aclose()
    monkeypatch.undo()
    assert sorted_count == count and not ran
    left = list(collection.find({}))
    assert len(left) == count
    assert all(doc["claim"] is None and doc["deliveries"] == 0 for doc in left)

    async with AsyncMongoScheduler(collection, node_id="second", poll_interval=FAST) as second:
        second.subscribe(TIMER, record)
        assert await until(lambda: len(ran) == count)
    assert set(ran.values()) == {1}
