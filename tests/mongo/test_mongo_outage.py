"""Outages: calls fail clearly after a bounded wait; the node's firing loop never dies."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pymongo
import pytest
from pymongo.errors import AutoReconnect

from flowsched.clock import SystemClock
from flowsched.port import ScheduleItem, ScheduleKind, SchedulerUnavailable

WAIT = 20.0
QUICK = timedelta(milliseconds=300)


class Flaky:
    """A collection stand-in that fails every call while ``down`` (like a lost connection)."""

    _PLAIN = frozenset({"database", "name", "full_name"})

    def __init__(self, inner: Any, error: Exception) -> None:
        self._inner = inner
        self._error = error
        self.down = False
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name in self._PLAIN or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                self.failures += 1
                raise self._error
            return attribute(*args, **kwargs)

        return call


def item(item_id: str = "t") -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, SystemClock().now())


def test_calls_during_an_outage_raise_scheduler_unavailable(make, collection):
    flaky = Flaky(collection, AutoReconnect("connection refused"))
    scheduler = make(collection=flaky, op_timeout=QUICK)
    scheduler.schedule(item("kept"))
    flaky.down = True
    for call in (
        lambda: scheduler.schedule(item()),
        lambda: scheduler.cancel("kept"),
        lambda: scheduler.cancel_flow("f"),
        lambda: scheduler.exists("kept"),
    ):
        with pytest.raises(SchedulerUnavailable, match=r"within op_timeout=0.3s"):
            call()
    assert flaky.failures > 4  # each call retried before giving up
    flaky.down = False
    assert scheduler.exists("kept") and not scheduler.exists("t")


def test_an_unreachable_server_gives_scheduler_unavailable():
    client: Any = pymongo.MongoClient(
        "mongodb://127.0.0.1:9/?directConnection=true", serverSelectionTimeoutMS=200
    )
    try:
        from flowsched.mongo import MongoScheduler

        scheduler = MongoScheduler(client["db"]["timers"], op_timeout=QUICK)
        with pytest.raises(SchedulerUnavailable, match=r"schedule\('t'\)"):
            scheduler.schedule(item())
    finally:
        client.close()


@pytest.mark.parametrize(
    "error", [AutoReconnect("connection reset"), RuntimeError("unexpected")], ids=repr
)
def test_the_sweeper_survives_errors_and_delivers_after_recovery(make, collection, error):
    flaky = Flaky(collection, error)
    poll = timedelta(milliseconds=50)
    scheduler = make(collection=flaky, clock=SystemClock(), poll_interval=poll)
    fired = threading.Event()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.set())
    scheduler.schedule(item())
    flaky.down = True
    scheduler.start()
    deadline = time.monotonic() + WAIT
    while flaky.failures < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert flaky.failures >= 3 and not fired.is_set()
    flaky.down = False
    assert fired.wait(WAIT)
    # The node still fires: an item scheduled after the recovery is delivered too.
    again = threading.Event()
    scheduler.register("again", lambda item, attempt: again.set())
    scheduler.create_single_timer("after", timedelta(0), "again")
    assert again.wait(WAIT)


class RefusingDeletes(Flaky):
    """Deletes - alone or in a batch of writes, as a settle sends them - fail with a permanent
    write error (as a validation rule would) while ``down``."""

    def __getattr__(self, name: str) -> Any:
        if not name.startswith(("delete", "bulk_write")):
            return getattr(self._inner, name)
        return super().__getattr__(name)


def test_a_write_refused_for_good_does_not_stall_the_sweep(make, collection):
    from pymongo.errors import WriteError

    from flowsched.delivery import RedeliveryPolicy

    refusing = RefusingDeletes(collection, WriteError("Document failed validation", code=121))
    refusing.down = True
    fast = RedeliveryPolicy(initial=timedelta(milliseconds=50), maximum=timedelta(seconds=1))
    scheduler = make(
        collection=refusing,
        clock=SystemClock(),
        poll_interval=timedelta(milliseconds=50),
        lease=timedelta(milliseconds=600),
        redelivery=fast,
    )
    attempts: list[int] = []
    second = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        attempts.append(attempt)
        if len(attempts) == 2:
            refusing.down = False
            second.set()

    scheduler.subscribe(ScheduleKind.TIMER, handler)
    scheduler.schedule(item())
    with scheduler:
        # The completion is refused; the claim is let go, its lease runs out, and the item
        # comes round again as a lost claim: run again (marked started this time), with the
        # same attempt - the lost run was a fresh claim, never marked, so never counted.
        assert second.wait(WAIT)
        deadline = time.monotonic() + WAIT
        while collection.count_documents({}) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert attempts == [0, 0]
    assert collection.count_documents({}) == 0
