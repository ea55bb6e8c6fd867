"""The background sweeper does not run a claimed item this node cancelled or replaced
while it waited for a worker: once ``cancel`` or ``schedule`` has returned here, the old
form is never delivered, and the skipped claim leaves no trace (no lease, no lost count).

Real clock, one worker (so ``b`` waits in the queue behind a held ``a``); every wait is on
an event with a generous timeout.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from flowsched.clock import SystemClock
from flowsched.port import ScheduleItem, ScheduleKind

WAIT = 20.0  # seconds: generous, for a loaded 2-core machine
TIMER = ScheduleKind.TIMER


class Queued:
    """``a`` and ``b`` claimed in one batch; ``a`` holds the only worker until released."""

    def __init__(self, make, flow_id: str | None = None) -> None:
        self.scheduler = make(clock=SystemClock(), workers=1, poll_interval=timedelta(hours=1))
        self.a_running, self.release = threading.Event(), threading.Event()
        self.seen: list[tuple[str, object]] = []
        self.delivered = {"b": threading.Event(), "c": threading.Event()}
        self.scheduler.subscribe(TIMER, self.handler)
        now = SystemClock().now()
        self.scheduler.schedule(ScheduleItem("a", TIMER, now))
        self.scheduler.schedule(ScheduleItem("b", TIMER, now, flow_id, payload={"v": 1}))

    def handler(self, item: ScheduleItem, attempt: int) -> None:
        self.seen.append((item.id, (item.payload or {}).get("v")))
        if item.id == "a":
            self.a_running.set()
            self.release.wait(WAIT)
        else:
            self.delivered[item.id].set()

    def finish_a_then_deliver_c(self) -> None:
        """Let ``a`` finish, then prove the worker went on by delivering a later item ``c``."""
        self.release.set()
        self.scheduler.schedule(ScheduleItem("c", TIMER, SystemClock().now()))
        assert self.delivered["c"].wait(WAIT)


def test_an_item_cancelled_while_queued_is_not_delivered(make):
    queued = Queued(make)
    with queued.scheduler as scheduler:
        assert queued.a_running.wait(WAIT)
        assert scheduler.cancel("b")
        queued.finish_a_then_deliver_c()
        assert ("b", 1) not in queued.seen
        assert not scheduler.exists("b")


def test_an_item_replaced_while_queued_is_delivered_only_in_its_new_form(make, collection):
    queued = Queued(make)
    with queued.scheduler as scheduler:
        assert queued.a_running.wait(WAIT)
        scheduler.schedule(ScheduleItem("b", TIMER, SystemClock().now(), payload={"v": 2}))
        queued.finish_a_then_deliver_c()
        assert queued.delivered["b"].wait(WAIT)
        assert [entry for entry in queued.seen if entry[0] == "b"] == [("b", 2)]


def test_an_item_whose_flow_was_cancelled_while_queued_is_not_delivered(make):
    queued = Queued(make, flow_id="f")
    with queued.scheduler as scheduler:
        assert queued.a_running.wait(WAIT)
        assert scheduler.cancel_flow("f") == 1
        queued.finish_a_then_deliver_c()
        assert ("b", 1) not in queued.seen


def test_a_replacement_due_later_keeps_no_claim_from_the_skipped_delivery(make, collection):
    queued = Queued(make)
    with queued.scheduler as scheduler:
        assert queued.a_running.wait(WAIT)
        later = SystemClock().now() + timedelta(hours=1)
        scheduler.schedule(ScheduleItem("b", TIMER, later, payload={"v": 2}))
        queued.finish_a_then_deliver_c()
    document = collection.find_one({"_id": "b"})
    assert document["claim"] is None
    assert document["deliveries"] == 0
    assert document["payload"] == {"v": 2}
