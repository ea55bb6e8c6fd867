"""A claim waiting in a node's queue is not a started delivery (CONTRACT section 15): node B
(one worker, busy) has claimed an item in a batch; node A cancels or replaces it; B must
never run the old form (a claim is started as it is taken, for a free worker only, or
confirmed right before its handler: ``flowsched.node.core``)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from mongo_nodes import WAIT, eventually

from flowsched.clock import ManualClock, SystemClock
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def _busy_node(make: Any) -> tuple[MongoScheduler, list[tuple[str, Any]], threading.Event]:
    node = make(
        clock=SystemClock(), node_id="b", workers=1, poll_interval=timedelta(milliseconds=50)
    )
    ran: list[tuple[str, Any]] = []
    running, release = threading.Event(), threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, item.payload))
        if item.id == "busy":
            running.set()
            release.wait(WAIT)

    node.subscribe(TIMER, handler)
    now = SystemClock().now()
    node.schedule(ScheduleItem("busy", TIMER, now - timedelta(seconds=1)))
    node.schedule(ScheduleItem("victim", TIMER, now, payload={"form": "old"}))
    node.start()
    assert running.wait(WAIT)
    # Claimed in a batch and queued behind the busy worker, or (the node starts on claim,
    # for free workers only) still unclaimed: either way not started.
    return node, ran, release


@pytest.mark.parametrize("change", ["cancel", "replace"])
def test_a_cancel_or_replace_on_another_node_wins_over_a_queued_claim(
    make: Any, change: str
) -> None:
    node, ran, release = _busy_node(make)
    other = make(clock=SystemClock(), node_id="a")
    try:
        if change == "cancel":
            assert other.cancel("victim")
        else:
            later = SystemClock().now() + timedelta(milliseconds=200)
            other.schedule(ScheduleItem("victim", TIMER, later, payload={"form": "new"}))
        release.set()
        if change == "cancel":
            assert eventually(lambda: not node.exists("busy"))  # the worker is free again
        else:
            assert eventually(lambda: ("victim", {"form": "new"}) in ran)
    finally:
        release.set()
        node.close()
    assert ("victim", {"form": "old"}) not in ran


def test_run_due_checks_each_claim_before_its_handler(make: Any, clock: ManualClock) -> None:
    node = make(node_id="b")
    other = make(node_id="a")
    ran: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append(item.id)
        if item.id == "first":
            assert other.cancel("second")  # another node, between the claim and the second start

    node.subscribe(TIMER, handler)
    node.schedule(ScheduleItem("first", TIMER, clock.now()))
    node.schedule(ScheduleItem("second", TIMER, clock.now()))  # one batch with "first"
    node.start()
    clock.advance(timedelta(seconds=1))
    assert ran == ["first"]
