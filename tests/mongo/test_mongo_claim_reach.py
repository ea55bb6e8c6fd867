"""The claim query reads the oldest due items first, batch after batch, and never skips an
older one - even one scheduled, due long before the rest, while a backlog is being claimed.

(The sweepers' claim query stopped at a "reach" after a full batch, ``mongo/candidates.py``;
the MongoDB timer store's claim is one ``find`` sorted by ``ready_at`` with the batch's
limit, so there is no reach to test: what stays is that no older item is skipped.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flowsched.port import ScheduleItem, ScheduleKind
from flowsched.routes import kind_route

TIMER = ScheduleKind.TIMER
MS = timedelta(milliseconds=1)
LEASE = timedelta(seconds=30)
ROUTES = [kind_route("TIMER")]


def backlog(scheduler: Any, clock: Any, count: int, prefix: str = "t") -> None:
    """``count`` items due 1 ms apart, all due by the time the test claims."""
    start = clock.now() - timedelta(seconds=10)
    for n in range(count):
        scheduler.schedule(ScheduleItem(f"{prefix}-{n:03}", TIMER, start + n * MS))


def test_a_backlog_is_claimed_oldest_first_batch_after_batch(make, clock):
    scheduler = make()
    backlog(scheduler, clock, 35)
    store = scheduler.store
    taken = [
        [claim.item.id for claim in store.claim_started(ROUTES, "n", LEASE, 10)] for _ in range(4)
    ]
    assert taken == [[f"t-{n:03}" for n in range(k, min(k + 10, 35))] for k in (0, 10, 20, 30)]
    assert store.claim_started(ROUTES, "n", LEASE, 10) == []


def test_an_item_older_than_the_backlog_is_never_skipped(make, clock):
    scheduler = make()
    backlog(scheduler, clock, 100)
    store = scheduler.store
    assert len(store.claim_started(ROUTES, "n", LEASE, 10)) == 10
    old = clock.now() - timedelta(hours=1)  # scheduled meanwhile, due long before the rest
    scheduler.schedule(ScheduleItem("old", TIMER, old))
    second = store.claim_started(ROUTES, "n", LEASE, 10)
    assert [claim.item.id for claim in second] == ["old"] + [f"t-{n:03}" for n in range(10, 19)]


def test_everything_due_is_delivered_whatever_the_spread(make, clock):
    scheduler = make(batch_size=10)
    fired: list[str] = []
    scheduler.subscribe(TIMER, lambda item, attempt: fired.append(item.id))
    backlog(scheduler, clock, 10)  # a dense batch 0..9 ms, the same instants again, later
    backlog(scheduler, clock, 30, prefix="u")
    far = clock.now() - timedelta(seconds=1)  # and one item long after the rest
    scheduler.schedule(ScheduleItem("far", TIMER, far))
    assert scheduler.run_due() == 41
    assert fired[-1] == "far" and len(set(fired)) == 41
    assert scheduler.store.claim_started(ROUTES, "n", LEASE, 10) == []
