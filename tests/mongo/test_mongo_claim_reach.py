"""The claim query reads the oldest due items first, batch after batch, and never skips an
older one - even one scheduled, due long before the rest, while a backlog is being claimed.

After a full batch the claim's first query stops at a *reach* (``ClaimReach``: a server
that reads a whole index range before its limit would read the backlog on every claim);
the last tests drive it alone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flowsched.mongo.commands import Find
from flowsched.mongo.timer_query import ClaimReach
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


# -- the reach itself: how far the first query of a claim reads --------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def claim(reach: ClaimReach, due: list[datetime], horizon: datetime, limit: int) -> int:
    """Run one claim query of ``reach`` over the ``ready_at`` values ``due`` (the found are
    removed, as a claim moves them out of range); how many ``find``s it took."""
    steps, reply, finds = reach.steps(ROUTES, [0], horizon, limit), None, 0
    try:
        while True:
            find = steps.send(reply)
            assert isinstance(find, Find)
            ready = find.filter["ready_at"]
            hit = [
                d for d in due if d <= ready["$lte"] and ("$gt" not in ready or d > ready["$gt"])
            ]
            reply, finds = [{"ready_at": d} for d in sorted(hit)[: find.limit]], finds + 1
    except StopIteration as done:
        for doc in done.value:
            due.remove(doc["ready_at"])
    return finds


def test_after_a_small_claim_a_full_batch_is_still_read_in_one_query() -> None:
    # A burst due 1 ms apart, all due by the horizon: a batch of 100, a wave of 8, then
    # 100 again. The reach after the 8 spans two batches at their pace (200 ms), so the
    # third claim's first query finds its 100; a reach of twice the 8's span (14 ms) found
    # 14 and read the rest of the backlog in a second query.
    due = [T0 + n * MS for n in range(2000)]
    reach, horizon = ClaimReach(), T0 + timedelta(seconds=2)
    assert [claim(reach, due, horizon, n) for n in (100, 8, 100)] == [1, 1, 1]
    assert due[0] == T0 + 208 * MS  # none skipped: the oldest first, every time


def test_past_the_reach_a_second_query_reads_on_to_the_horizon() -> None:
    due = [T0 + n * MS for n in range(10)] + [T0 + timedelta(seconds=1) + n * MS for n in range(20)]
    reach, horizon = ClaimReach(), T0 + timedelta(seconds=2)
    assert claim(reach, due, horizon, 10) == 1
    assert claim(reach, due, horizon, 10) == 2  # nothing within 20 ms: read on
    assert due == [T0 + timedelta(seconds=1) + n * MS for n in range(10, 20)]
