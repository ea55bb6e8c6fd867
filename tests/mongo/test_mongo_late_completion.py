"""``Observer.late_completion(item, attempt, late)`` reports the true time past the lease's
end, and is not called for a run whose item was replaced or cancelled meanwhile
(CONTRACT section 15). A renewal that finds a claim lost keeps its last known lease end."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from flowsched.clock import ManualClock
from flowsched.delivery import Completed, Observer
from flowsched.mongo import MongoScheduler
from flowsched.mongo.leases import HeldLeases, renew_held
from flowsched.mongo.settlement import Claim, Settlement
from flowsched.port import ScheduleItem, ScheduleKind

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TIMER = ScheduleKind.TIMER
LEASE = timedelta(seconds=10)


class Lates(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, timedelta]] = []

    def late_completion(self, item: ScheduleItem, attempt: int, late: timedelta) -> None:
        self.seen.append((item.id, attempt, late))


def _claimed(make: Callable[..., MongoScheduler]) -> tuple[MongoScheduler, list[Claim]]:
    a = make(node_id="a", lease=LEASE)
    a.subscribe(TIMER, lambda item, attempt: None)
    for item_id in ("taken", "replaced", "cancelled"):
        a.schedule(ScheduleItem(item_id, TIMER, START))
    return a, a._claimer.take(10).deliver


def test_a_run_whose_claim_was_taken_over_is_late_by_the_time_since_its_lease_ended(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    a, claims = _claimed(make)
    b = make(node_id="b", lease=LEASE)
    b.subscribe(TIMER, lambda item, attempt: None)
    leases = HeldLeases(LEASE)
    lease_until = START + LEASE
    leases.claimed_claims(claims, lease_until)
    clock.jump(LEASE + timedelta(seconds=1))  # a paused past its lease: b takes them over
    b._claimer.take(10)
    keys = [(c.item.id, c.token) for c in claims]
    renew_held(a._claims, leases, keys, clock.now())  # finds them all lost

    observer = Lates()
    done_at = clock.now() + timedelta(seconds=4)
    by_id = {c.item.id: c for c in claims}
    claim = by_id["taken"]
    settled = leases.finished(Settlement.of(claim, Completed()), claim, done_at, observer)

    assert settled.late
    assert observer.seen == [("taken", 0, done_at - lease_until)]  # 5 s, not 739,955 days


def test_a_run_whose_item_was_replaced_or_cancelled_is_no_late_completion(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    a, claims = _claimed(make)
    leases = HeldLeases(LEASE)
    leases.claimed_claims(claims, START + LEASE)
    clock.jump(LEASE + timedelta(seconds=1))
    a.schedule(ScheduleItem("replaced", TIMER, clock.now() + timedelta(hours=1)))
    assert a.cancel("cancelled")
    keys = [(c.item.id, c.token) for c in claims]
    renew_held(a._claims, leases, keys, clock.now())

    observer = Lates()
    outcomes: dict[str, Any] = {}
    for claim in claims:
        settlement = Settlement.of(claim, Completed())
        outcomes[claim.item.id] = leases.finished(settlement, claim, clock.now(), observer)

    assert observer.seen == []  # "taken" was renewed in time; the others are gone
    assert not outcomes["replaced"].late and not outcomes["cancelled"].late
