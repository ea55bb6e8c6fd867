"""``MongoScheduler``'s sweeper writes outcomes while it claims the next batch, as the
asyncio node does: a slow settle (its delete, then the history) no longer holds the claim."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from mongo_nodes import WAIT, eventually

from flowsched.clock import SystemClock
from flowsched.port import ScheduleItem, ScheduleKind

ITEMS = 20


def test_the_next_claim_runs_while_outcomes_are_written(make: Any, collection: Any) -> None:
    # Batches of one and many items due: the node is behind, so every turn claims. The
    # first settle that writes outcomes waits for a claim to end meanwhile: on a loop that
    # settles and then claims, none can, and it gives up.
    scheduler = make(clock=SystemClock(), batch_size=1, poll_interval=timedelta(seconds=5))
    claims = scheduler._claims
    claim_steps, settle_steps = claims.claim_steps, claims.settle_steps
    settling, claim_ended, overlapped = threading.Event(), threading.Event(), threading.Event()

    def claim(*args: Any, **kwargs: Any) -> Any:
        claimed = yield from claim_steps(*args, **kwargs)
        if getattr(scheduler._sweeper, "_settling", None):  # outcomes written this turn
            settling.wait(WAIT / 4)  # (the settle's thread may not have begun yet)
        claim_ended.set()
        return claimed

    def settle(batch: Any, *args: Any, **kwargs: Any) -> Any:
        if batch and not settling.is_set():
            claim_ended.clear()
            settling.set()
            if claim_ended.wait(WAIT / 4):
                overlapped.set()
        return (yield from settle_steps(batch, *args, **kwargs))

    claims.claim_steps, claims.settle_steps = claim, settle
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    now = SystemClock().now()
    for n in range(ITEMS):
        scheduler.schedule(ScheduleItem(f"t-{n:02}", ScheduleKind.TIMER, now))
    with scheduler:
        assert eventually(lambda: collection.count_documents({}) == 0)
    assert overlapped.is_set()
    assert sorted(fired) == [f"t-{n:02}" for n in range(ITEMS)]
