"""``Observer.late_completion(item, attempt, late)`` reports the true time past the lease's
end, and is not called for a run whose item was replaced or cancelled meanwhile
(CONTRACT section 15). Each run here outlives its lease inside its handler (a paused node);
another node's claim is played on the store (``scheduler.store``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from flowsched.clock import ManualClock
from flowsched.delivery import Observer
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind
from flowsched.routes import kind_route

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TIMER = ScheduleKind.TIMER
ROUTES = frozenset({kind_route(TIMER)})
LEASE = timedelta(seconds=10)


class Lates(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, timedelta]] = []

    def late_completion(self, item: ScheduleItem, attempt: int, late: timedelta) -> None:
        self.seen.append((item.id, attempt, late))


def test_a_run_whose_claim_was_taken_over_is_late_by_the_time_since_its_lease_ended(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    observer = Lates()
    a = make(node_id="a", lease=LEASE, observer=observer)
    b = make(node_id="b", lease=LEASE)

    def paused(item: ScheduleItem, attempt: int) -> None:
        clock.jump(LEASE + timedelta(seconds=1))  # a paused past its lease: b takes over
        assert [c.item.id for c in b.store.claim_due(ROUTES, b.node_id, LEASE, 10)] == ["x"]
        clock.jump(timedelta(seconds=4))

    a.subscribe(TIMER, paused)
    a.schedule(ScheduleItem("x", TIMER, START))
    assert a.run_due() == 1

    assert observer.seen == [("x", 0, timedelta(seconds=5))]  # 5 s, not 739,955 days
    assert not a.exists("x") and a.dead_letters() == []


def test_a_run_whose_item_was_replaced_or_cancelled_is_no_late_completion(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    observer = Lates()
    a = make(node_id="a", lease=LEASE, observer=observer)

    def paused(item: ScheduleItem, attempt: int) -> None:
        clock.jump(LEASE + timedelta(seconds=1))  # past its lease, then replaced/cancelled
        if item.id == "replaced":
            a.schedule(ScheduleItem("replaced", TIMER, clock.now() + timedelta(hours=1)))
        else:
            assert a.cancel("cancelled")

    a.subscribe(TIMER, paused)
    for item_id in ("replaced", "cancelled"):
        a.schedule(ScheduleItem(item_id, TIMER, START))
    assert a.run_due() == 2

    assert observer.seen == []
    assert a.exists("replaced") and not a.exists("cancelled")
