"""Dead-lettering writes two collections without a transaction; a settle repeated after an
error part-way (the node retries the outcomes it could not write) still leaves exactly one
dead letter, while a form cancelled before its last failure was written leaves none. The
settles are the node's, sent to the scheduler's own store (``scheduler.store``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowsched import OutcomeUnknown
from flowsched.delivery import DeadLettered, RedeliveryPolicy
from flowsched.port import ScheduleItem, ScheduleKind
from flowsched.records import DeadLetter
from flowsched.routes import kind_route
from flowsched.store import Settlement

errors = pytest.importorskip("pymongo.errors")

TIMER = ScheduleKind.TIMER
ROUTES = frozenset({kind_route(TIMER)})
LEASE = timedelta(seconds=30)


class LosesOneReply:
    """The collection, but the next ``delete_one`` applies and then loses its reply."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.lose_next_delete = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._collection, name)
        if name != "delete_one" or not self.lose_next_delete:
            return method
        self.lose_next_delete = False

        def applied_then_lost(*args: Any, **kwargs: Any) -> Any:
            method(*args, **kwargs)
            raise errors.AutoReconnect("network blip after the item was removed")

        return applied_then_lost


def died(scheduler: Any, clock: Any, item_id: str) -> Settlement:
    """Claim ``item_id``, start it and fail its last allowed attempt: the settlement."""
    scheduler.schedule(ScheduleItem(item_id, TIMER, clock.now()))
    [claim] = scheduler.store.claim_due(ROUTES, scheduler.node_id, LEASE, 1)
    assert scheduler.store.confirm_start([claim]) == [claim]
    return Settlement(claim, DeadLettered(DeadLetter(claim.item, 1, "Boom: no", clock.now())))


def test_a_settle_repeated_after_its_item_was_removed_keeps_the_dead_letter(
    make, clock, collection
):
    faulty = LosesOneReply(collection)
    scheduler = make(collection=faulty, redelivery=RedeliveryPolicy(max_attempts=1))
    first, second = died(scheduler, clock, "a"), died(scheduler, clock, "b")
    faulty.lose_next_delete = True
    with pytest.raises(OutcomeUnknown):
        scheduler.store.settle([first, second])
    results = scheduler.store.settle([first, second])  # the retry: a's item is already gone

    assert all(r.applied for r in results), results
    assert sorted(d.item.id for d in scheduler.dead_letters()) == ["a", "b"]
    assert not scheduler.exists("a") and not scheduler.exists("b")


def test_a_form_cancelled_before_its_death_was_written_leaves_no_dead_letter(make, clock):
    scheduler = make(redelivery=RedeliveryPolicy(max_attempts=1))
    settlement = died(scheduler, clock, "a")
    assert scheduler.cancel("a")
    [result] = scheduler.store.settle([settlement])
    assert not result.applied
    assert scheduler.dead_letters() == []


def test_a_stale_last_failure_leaves_the_dead_letter_of_the_claim_that_took_over(make, clock):
    # Node a's lease ends (cut off); node b claims the item, fails its last attempt and
    # dead-letters it; a's own last failure then arrives: the timer stays a dead letter.
    policy = RedeliveryPolicy(max_attempts=1)
    a = make(redelivery=policy, lease=LEASE, node_id="a")
    b = make(redelivery=policy, lease=LEASE, node_id="b")
    stale = died(a, clock, "x")
    clock.jump(LEASE + timedelta(seconds=1))
    [claim] = b.store.claim_due(ROUTES, b.node_id, LEASE, 1)
    taken = DeadLettered(DeadLetter(claim.item, 1, "Boom: again", clock.now()))
    [done] = b.store.settle([Settlement(claim, taken)])
    assert done.applied
    assert [d.item.id for d in b.dead_letters()] == ["x"] and not b.exists("x")
    [result] = a.store.settle([stale])
    assert not result.applied
    assert [d.item.id for d in b.dead_letters()] == ["x"], (
        "the timer was lost: a stale settle removed the dead letter another claim wrote"
    )
