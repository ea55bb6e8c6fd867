"""A claim whose lease has ended is never started, and a run that completes after its lease
ended is a late completion - logged, counted, settled as completed - never a failure.

The claims of other (paused, cut-off) nodes are played on the scheduler's own store
(``scheduler.store``), as the node core would send them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from flowsched.clock import ManualClock
from flowsched.delivery import Completed
from flowsched.mongo import MongoScheduler
from flowsched.observe import MetricsObserver
from flowsched.port import ScheduleItem, ScheduleKind
from flowsched.routes import kind_route
from flowsched.store import Settlement

# The start of the `clock` fixture (tests/mongo/conftest.py). Not imported: `conftest` is
# ambiguous when pytest collects several test folders in one process.
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

TIMER = ScheduleKind.TIMER
ROUTES = frozenset({kind_route(TIMER)})
LEASE = timedelta(seconds=10)


def test_a_renewal_that_misses_a_claim_marks_that_lease_lost(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    a, b = make(node_id="a", lease=LEASE), make(node_id="b", lease=LEASE)
    for item_id in ("kept", "taken"):
        a.schedule(ScheduleItem(item_id, TIMER, START))
    claims = a.store.claim_due(ROUTES, a.node_id, LEASE, 10)
    clock.jump(LEASE / 2 + timedelta(seconds=1))  # half the lease gone: a renews
    b.schedule(ScheduleItem("taken", TIMER, clock.now()))  # replaced meanwhile: not a's

    renewed = a.store.renew(claims, LEASE)

    assert [c.item.id for c in renewed] == ["kept"]
    assert renewed[0].lease_until == clock.now() + LEASE
    taken = next(c for c in claims if c.item.id == "taken")
    assert a.store.confirm_start([taken]) == []  # never started
    assert a.store.confirm_start(renewed) == renewed


def test_run_due_runs_a_claim_whose_lease_ended_while_another_ran_later_and_once(
    make: Callable[..., MongoScheduler], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = MetricsObserver()
    scheduler = make(lease=LEASE, observer=metrics)
    ran: list[tuple[str, datetime]] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, clock.now()))
        if item.id == "a-slow":
            clock.advance(3 * LEASE)  # this run outlives its lease (and the next claim's)

    scheduler.subscribe(TIMER, handler)
    for item_id in ("a-slow", "b-next"):
        scheduler.schedule(ScheduleItem(item_id, TIMER, START))
    scheduler.start()
    with caplog.at_level(logging.WARNING, "flowsched"):
        clock.advance(timedelta(seconds=1))

    # b-next did not start on a lapsed claim: it ran once, after a-slow, claimed afresh.
    assert ran == [("a-slow", START), ("b-next", START + 3 * LEASE)]
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        m.startswith("a-slow#") and "completed 20.000s after its lease ended" in m for m in messages
    ), messages
    snapshot = metrics.snapshot()
    assert (snapshot.late_completions, snapshot.completed, snapshot.failed) == (1, 2, 0)
    assert not scheduler.exists("a-slow") and not scheduler.exists("b-next")


def test_a_late_completion_settles_its_generation_although_another_node_started_it(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    # docs/explanation/reliability.md, "Pauses past the lease": the late completion of a
    # one-shot item settles its generation - the item ends completed, and successful runs
    # never move it towards the dead letter.
    a, b = make(node_id="a", lease=LEASE), make(node_id="b", lease=LEASE)
    a.schedule(ScheduleItem("x", TIMER, START))
    [a_claim] = a.store.claim_due(ROUTES, a.node_id, LEASE, 10)
    assert a.store.confirm_start([a_claim]) == [a_claim]
    clock.jump(LEASE + timedelta(seconds=1))  # a's handler outlives its lease...
    [b_claim] = b.store.claim_due(ROUTES, b.node_id, LEASE, 10)  # ...b takes over
    assert b.store.confirm_start([b_claim]) == [b_claim] and b_claim.lapsed == 1

    [late] = a.store.settle([Settlement(a_claim, Completed())])  # a's run succeeded, late

    assert late.applied and late.late == clock.now() - a_claim.lease_until
    assert not a.exists("x")  # completed, never to be counted as a lost run
    b.store.settle([Settlement(b_claim, Completed())])  # b's: nothing left to settle
    assert a.dead_letters() == [] and not a.exists("x")


def test_a_late_completion_never_touches_a_replaced_generation(
    make: Callable[..., MongoScheduler], clock: ManualClock
) -> None:
    a = make(node_id="a", lease=LEASE)
    a.schedule(ScheduleItem("x", TIMER, START))
    [claim] = a.store.claim_due(ROUTES, a.node_id, LEASE, 10)
    assert a.store.confirm_start([claim]) == [claim]
    replacement = a.schedule(ScheduleItem("x", TIMER, START + LEASE))
    clock.jump(LEASE + timedelta(seconds=1))
    [result] = a.store.settle([Settlement(claim, Completed())])
    assert not result.applied
    assert a.get("x") == replacement
