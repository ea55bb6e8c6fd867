"""A node claims due items oldest first, in batches, and only kinds it has handlers for."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from mongo_nodes import WAIT

from flowsched import SchedulerUnavailable
from flowsched.clock import SystemClock
from flowsched.port import ScheduleItem, ScheduleKind
from flowsched.routes import kind_route


def test_run_due_delivers_every_due_item_across_several_batches(make, clock, collection):
    scheduler = make(batch_size=7)
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    for n in range(30):
        scheduler.schedule(ScheduleItem(f"t-{n:02}", ScheduleKind.TIMER, clock.now()))
    scheduler.schedule(ScheduleItem("later", ScheduleKind.TIMER, clock.now() + timedelta(1)))
    assert scheduler.run_due() == 30
    assert sorted(fired) == [f"t-{n:02}" for n in range(30)]
    assert [d["_id"] for d in collection.find()] == ["later"]


def test_a_claim_takes_at_most_batch_size_items(make, clock, collection):
    scheduler = make(batch_size=4, clock=SystemClock(), poll_interval=timedelta(hours=1))
    fired: list[str] = []
    done = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        fired.append(item.id)
        if len(fired) == 10:
            done.set()

    scheduler.subscribe(ScheduleKind.TIMER, handler)
    for n in range(10):
        scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, SystemClock().now()))
    # The store's claim takes at most its limit, oldest first ...
    store = scheduler.store
    claims = store.claim_started([kind_route("TIMER")], "other", timedelta(seconds=30), 4)
    assert [c.item.id for c in claims] == ["t-0", "t-1", "t-2", "t-3"]
    assert collection.count_documents({"claim": None}) == 6
    store.release(claims)
    # ... and a started node never asks for more than batch_size at a time.
    asked: list[int] = []
    claim = store.claim_started

    def recording(routes: Any, owner: str, lease: timedelta, limit: int) -> Any:
        asked.append(limit)
        return claim(routes, owner, lease, limit)

    store.claim_started = recording  # type: ignore[method-assign]
    with scheduler:
        assert done.wait(WAIT)
    assert sorted(fired) == [f"t-{n}" for n in range(10)]
    assert asked and max(asked) <= 4


@pytest.mark.parametrize("batch_size", [1, 100])
def test_items_are_delivered_oldest_due_first(make, clock, batch_size):
    scheduler = make(batch_size=batch_size)
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    start = clock.now()
    for name, offset in [("third", 3), ("first", 1), ("second", 2)]:
        due = start + timedelta(seconds=offset)
        scheduler.schedule(ScheduleItem(name, ScheduleKind.TIMER, due))
    clock.advance(timedelta(seconds=3))
    scheduler.run_due()
    assert fired == ["first", "second", "third"]


def test_items_of_unsubscribed_kinds_stay_unclaimed(make, clock, collection):
    scheduler = make()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    scheduler.schedule(ScheduleItem("retry", ScheduleKind.ACTION_RETRY, clock.now()))
    assert scheduler.run_due() == 0
    assert collection.find_one({"_id": "retry"})["claim"] is None

    other = make()
    other.subscribe(ScheduleKind.ACTION_RETRY, lambda item, attempt: None)
    assert other.run_due() == 1
    assert not other.exists("retry")


def test_nothing_is_due_before_the_manual_clock_moves(make, clock):
    scheduler = make()
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, clock.now() + timedelta(seconds=1)))
    assert scheduler.run_due() == 0
    clock.advance(timedelta(seconds=1))  # not started: the clock does not drive it
    assert fired == []
    assert scheduler.run_due() == 1 and fired == ["t"]


def test_once_started_on_a_manual_clock_advance_delivers(make, clock):
    scheduler = make()
    writer = make()  # never started: it only schedules
    seen: list[tuple[str, object]] = []
    scheduler.subscribe(
        ScheduleKind.TIMER, lambda item, attempt: seen.append((item.id, clock.now()))
    )
    scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, clock.now() + timedelta(seconds=1)))
    scheduler.start()  # no background thread with a ManualClock: attached to it instead
    clock.advance(timedelta(seconds=5))
    assert seen == [("t", clock.now() - timedelta(seconds=4))]
    assert scheduler.run_due() == 0
    scheduler.close()
    with pytest.raises(SchedulerUnavailable, match="is closed"):  # as every scheduler
        scheduler.schedule(ScheduleItem("u", ScheduleKind.TIMER, clock.now()))
    writer.schedule(ScheduleItem("u", ScheduleKind.TIMER, clock.now()))
    clock.advance(timedelta(seconds=1))  # closed: detached from the clock
    assert [item_id for item_id, _ in seen] == ["t"]
    assert writer.exists("u")


def test_the_store_tells_when_the_next_item_falls_due(make, clock):
    # A claim that comes back short is followed by one next-due query (the node core's
    # FindNextDue): the node then sleeps until that item, not until its next poll.
    scheduler = make()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    soon = clock.now() + timedelta(milliseconds=400)
    later = clock.now() + timedelta(5)
    scheduler.schedule(ScheduleItem("soon", ScheduleKind.TIMER, soon))
    scheduler.schedule(ScheduleItem("later", ScheduleKind.TIMER, later))
    store, routes = scheduler.store, [kind_route("TIMER")]
    assert store.claim_started(routes, "n", timedelta(seconds=30), 10) == []  # not due yet
    assert store.next_due(routes) == soon
    assert store.next_wake(routes) == soon  # a ManualClock is trusted: no error bound
    assert store.next_due(routes, soon) == later
    assert store.next_due([kind_route("ACTION_RETRY")]) is None
