"""Dead-lettering writes two collections without a transaction; a settle repeated after an
error part-way (the sweeper retries unwritten outcomes) still leaves exactly one dead letter,
while a form cancelled before its last failure was written leaves none."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowsched.delivery import DeadLettered, RedeliveryPolicy
from flowsched.mongo.settlement import Settlement
from flowsched.port import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def died(scheduler: Any, clock: Any, item_id: str) -> Settlement:
    """Claim ``item_id`` and fail its last allowed attempt: the settlement to write."""
    if not scheduler._core.routes():
        scheduler.subscribe(TIMER, lambda item, attempt: None)
    scheduler.schedule(ScheduleItem(item_id, TIMER, clock.now()))
    [claim] = scheduler._claimer.take(10).deliver
    outcome = scheduler._core.failure(claim.item, claim.attempt, "boom")
    assert isinstance(outcome, DeadLettered)
    return Settlement.of(claim, outcome)


def test_a_settle_repeated_after_its_item_was_removed_keeps_the_dead_letter(make, clock):
    scheduler = make(redelivery=RedeliveryPolicy(max_attempts=1))
    first, second = died(scheduler, clock, "a"), died(scheduler, clock, "b")
    claims = scheduler._claims
    store = claims.store
    original = store.items.delete_one
    calls = {"n": 0}

    def delete_one_then_fail(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("network blip after a's item was removed")
        return result

    try:
        store.items.delete_one = delete_one_then_fail  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            claims.settle([first, second], clock.now())
    finally:
        store.items.delete_one = original  # type: ignore[method-assign]
    claims.settle([first, second], clock.now())  # the retry: a's item is already gone

    assert sorted(d.item.id for d in scheduler.dead_letters()) == ["a", "b"]
    assert not scheduler.exists("a") and not scheduler.exists("b")


def test_a_form_cancelled_before_its_death_was_written_leaves_no_dead_letter(make, clock):
    scheduler = make(redelivery=RedeliveryPolicy(max_attempts=1))
    settlement = died(scheduler, clock, "a")
    assert scheduler.cancel("a")
    scheduler._claims.settle([settlement], clock.now())
    assert scheduler.dead_letters() == []


def test_a_stale_last_failure_leaves_the_dead_letter_of_the_claim_that_took_over(make, clock):
    # Node a's lease ends (cut off); node b claims the item, fails its last attempt and
    # dead-letters it; a's own last failure then arrives: the timer stays a dead letter.
    lease = timedelta(seconds=30)
    policy = RedeliveryPolicy(max_attempts=1)
    a = make(redelivery=policy, lease=lease, node_id="a")
    b = make(redelivery=policy, lease=lease, node_id="b")
    stale = died(a, clock, "x")
    clock.jump(lease + timedelta(seconds=1))
    b.subscribe(TIMER, lambda item, attempt: None)
    [claim] = b._claimer.take(10).deliver
    taken = b._core.failure(claim.item, claim.attempt, "boom")
    b._claims.settle([Settlement.of(claim, taken)], clock.now())
    assert [d.item.id for d in b.dead_letters()] == ["x"] and not b.exists("x")
    a._claims.settle([stale], clock.now())
    assert [d.item.id for d in b.dead_letters()] == ["x"], (
        "the timer was lost: a stale settle removed the dead letter another claim wrote"
    )
