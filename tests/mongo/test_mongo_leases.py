"""A claim whose lease has ended is never started, and a run that completes after its lease
ended is a late completion - logged, counted, settled as completed - never a failure."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched.clock import ManualClock
from flowsched.delivery import Completed
from flowsched.mongo import MongoScheduler
from flowsched.mongo.leases import HeldLeases, renew_held, start_margin
from flowsched.mongo.settlement import Settlement
from flowsched.observe import MetricsObserver
from flowsched.port import ScheduleItem, ScheduleKind

# The start of the `clock` fixture (tests/mongo/conftest.py). Not imported: `conftest` is
# ambiguous when pytest collects several test folders in one process.
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

TIMER = ScheduleKind.TIMER
LEASE = timedelta(seconds=10)


def test_a_handler_starts_only_with_a_fifth_of_its_lease_left_at_most_two_seconds() -> None:
    assert start_margin(timedelta(seconds=5)) == timedelta(seconds=1)
    assert start_margin(timedelta(seconds=30)) == timedelta(seconds=2)
    leases = HeldLeases(LEASE)
    leases.claimed([("a", "t1")], START + LEASE)
    assert leases.may_start(("a", "t1"), START + timedelta(seconds=7.9))
    assert not leases.may_start(("a", "t1"), START + timedelta(seconds=8))
    leases.renewed([("a", "t1")], START + 2 * LEASE)
    assert leases.may_start(("a", "t1"), START + timedelta(seconds=17))
    leases.lost([("a", "t1")])
    assert not leases.may_start(("a", "t1"), START) and leases.ended(("a", "t1"), START)


def test_a_renewal_that_misses_a_claim_marks_that_lease_lost(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    a, b = make(node_id="a", lease=LEASE), make(node_id="b", lease=LEASE)
    for item_id in ("kept", "taken"):
        a.schedule(ScheduleItem(item_id, TIMER, START))
    a.subscribe(TIMER, lambda item, attempt: None)
    b.subscribe(TIMER, lambda item, attempt: None)
    batch = a._claimer.take(10)
    leases = HeldLeases(LEASE)
    keys = [(c.item.id, c.token) for c in batch.deliver]
    assert batch.lease_until is not None
    leases.claimed(keys, batch.lease_until)
    clock.jump(LEASE + timedelta(seconds=1))  # a was paused past its lease
    b.schedule(ScheduleItem("taken", TIMER, clock.now()))  # replaced meanwhile: not a's

    renew_held(a._claims, leases, keys, clock.now())

    kept, taken = sorted(keys)
    assert leases.may_start(kept, clock.now())  # renewed: nobody else holds it
    assert not leases.may_start(taken, clock.now())


def test_run_due_gives_back_a_claim_whose_lease_ended_before_its_turn_and_runs_it_later(
    make: Callable[..., MongoScheduler], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = MetricsObserver()
    scheduler = make(lease=LEASE, observer=metrics)
    ran: list[tuple[str, Any]] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, clock.now()))
        if item.id == "a-slow":
            clock.advance(3 * LEASE)  # this run outlives its lease (and the next claim's)

    scheduler.subscribe(TIMER, handler)
    for item_id in ("a-slow", "b-next"):
        scheduler.schedule(ScheduleItem(item_id, TIMER, START))
    scheduler.start()
    with caplog.at_level(logging.WARNING, "flowsched.mongo"):
        clock.advance(timedelta(seconds=1))

    # b-next was claimed with a-slow; its lease ended while a-slow ran: given back, not run
    # on a lapsed claim, then claimed afresh and run once.
    assert ran == [("a-slow", START), ("b-next", START + 3 * LEASE)]
    messages = [r.getMessage() for r in caplog.records]
    assert any("'b-next' lapsed before its handler started" in m for m in messages)
    assert any("'a-slow' completed 20.0s after its lease ended" in m for m in messages)
    snapshot = metrics.snapshot()
    assert (snapshot.late_completions, snapshot.completed, snapshot.failed) == (1, 2, 0)
    assert not scheduler.exists("a-slow") and not scheduler.exists("b-next")


def test_a_late_completion_settles_its_generation_although_another_node_marked_its_start(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    a, b = make(node_id="a", lease=LEASE), make(node_id="b", lease=LEASE)
    for scheduler in (a, b):
        scheduler.subscribe(TIMER, lambda item, attempt: None)
    a.schedule(ScheduleItem("x", TIMER, START))
    (a_claim,) = a._claimer.take(10).deliver
    clock.jump(LEASE + timedelta(seconds=1))  # a's handler outlives its lease...
    (b_claim,) = b._claimer.take(10, mark=True).deliver  # ...b takes over, marks its start
    assert b_claim.suspect
    completed = Settlement.of(a_claim, Completed())

    a._claims.settle([completed], clock.now())  # on time, by token: matches nothing now
    document = a._store.find("x")
    assert document is not None and document["deliveries"] == 1  # would count as failed

    a._claims.settle([completed.settled_late()], clock.now())  # late: by generation
    assert a._store.find("x") is None  # completed, never to be counted as a failure
    b._claims.settle([Settlement.of(b_claim, Completed())], clock.now())  # b's: nothing
    assert a.dead_letters() == []


def test_a_late_completion_never_touches_a_replaced_generation(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    a = make(node_id="a", lease=LEASE)
    a.subscribe(TIMER, lambda item, attempt: None)
    a.schedule(ScheduleItem("x", TIMER, START))
    (claim,) = a._claimer.take(10).deliver
    replacement = a.schedule(ScheduleItem("x", TIMER, START + LEASE))
    a._claims.settle([Settlement.of(claim, Completed()).settled_late()], clock.now())
    assert a.get("x") == replacement
