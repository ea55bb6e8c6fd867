"""Push wake-up: a node hears of another node's schedule at once instead of at its next poll.

On the wire server (a single-node replica set: it has change streams) and on mongomock
(none: the node polls only, and says so once). Every wait is on an event with a generous
timeout far below the poll interval, so a pass cannot come from polling.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from pymongo import MongoClient

from flowsched.clock import SystemClock
from flowsched.mongo import MongoScheduler, change_stream
from flowsched.mongo.change_stream import PIPELINE, WakeUp
from flowsched.port import ScheduleItem, ScheduleKind

POLL = timedelta(hours=1)  # polling alone would fire nothing within the test
WAIT = 20.0


@pytest.fixture
def timers(mongo_uri: str, mongo_db: Any) -> Any:
    client: Any = MongoClient(mongo_uri, tz_aware=True)
    yield client[mongo_db.name]["timers"]
    client.close()


def node(collection: Any, name: str, **options: Any) -> MongoScheduler:
    return MongoScheduler(collection, node_id=name, poll_interval=POLL, **options)


@pytest.mark.wire
def test_an_item_another_node_schedules_fires_long_before_the_next_poll(timers):
    fired: dict[str, threading.Event] = {"first": threading.Event(), "near": threading.Event()}
    writer = node(timers, "writer")  # handles nothing, never started: it only schedules
    sweeper = node(timers, "sweeper")
    sweeper.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired[item.id].set())
    with sweeper:
        writer.schedule(ScheduleItem("first", ScheduleKind.TIMER, SystemClock().now()))
        assert fired["first"].wait(WAIT)  # the sweeper has polled; its next poll is an hour on
        assert sweeper._wakeup is not None and sweeper._wakeup.watching.wait(WAIT)
        near = SystemClock().now() + timedelta(milliseconds=300)
        writer.schedule(ScheduleItem("near", ScheduleKind.TIMER, near))
        assert fired["near"].wait(WAIT)
    assert not writer.exists("near")


@pytest.mark.wire
def test_a_node_that_does_not_handle_the_kind_is_not_woken(timers):
    # Its sweeper would claim nothing: the event is dropped on the client.
    writer = node(timers, "writer")
    other = node(timers, "other")
    other.subscribe(ScheduleKind.ACTION_RETRY, lambda item, attempt: None)
    with other:
        wakeup = other._wakeup
        assert wakeup is not None and wakeup.watching.wait(WAIT)
        pokes: list[object] = []
        wakeup._poke = pokes.append
        writer.schedule(ScheduleItem("t", ScheduleKind.TIMER, SystemClock().now()))
        writer.schedule(ScheduleItem("r", ScheduleKind.ACTION_RETRY, SystemClock().now()))
        assert _eventually(lambda: wakeup.events >= 2)
    assert len(pokes) == 1


@pytest.mark.wire
def test_claims_and_renewals_are_filtered_out_on_the_server(timers):
    # The stream carries what can make an item ready (schedules, settles), never the claim
    # and lease-renewal writes that every sweep makes.
    with timers.watch(PIPELINE, max_await_time_ms=200) as stream:
        timers.replace_one({"_id": "a"}, {"_id": "a", "kind": "TIMER", "claim": None}, upsert=True)
        timers.update_one({"_id": "a"}, {"$set": {"claim": {"token": "x", "lease_until": 1}}})
        timers.update_one({"_id": "a"}, {"$set": {"claim.lease_until": 2}})
        timers.update_one({"_id": "a"}, {"$set": {"claim": None, "ready_at": 3}})
        seen = []
        while len(seen) < 2:
            change = stream.try_next()
            if change is not None:
                seen.append(change["operationType"])
        assert stream.try_next() is None
    assert seen == ["insert", "update"]


@pytest.mark.wire
def test_a_stream_that_ends_is_opened_again(timers):
    fired = {name: threading.Event() for name in ("first", "after")}
    writer = node(timers, "writer")
    sweeper = node(timers, "sweeper")
    sweeper.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired[item.id].set())
    with sweeper:
        writer.schedule(ScheduleItem("first", ScheduleKind.TIMER, SystemClock().now()))
        assert fired["first"].wait(WAIT)
        wakeup = sweeper._wakeup
        assert wakeup is not None and wakeup.watching.wait(WAIT)
        broken = wakeup._stream
        broken.close()  # the stream ends under the node (as on an invalidate or an error)
        assert _eventually(lambda: wakeup._stream not in (None, broken))
        soon = SystemClock().now() + timedelta(milliseconds=300)
        writer.schedule(ScheduleItem("after", ScheduleKind.TIMER, soon))
        assert fired["after"].wait(WAIT)


def paused_wakeup(timers: Any, sweeping: threading.Event, pokes: list[object]) -> WakeUp:
    return WakeUp(
        timers,
        pokes.append,
        lambda document: True,
        max_await=timedelta(milliseconds=50),
        paused=sweeping.is_set,
    )


@pytest.mark.wire
def test_while_the_node_sweeps_the_stream_is_left_unread_then_opened_from_now(timers, monkeypatch):
    # A node claiming back to back reads nothing from its stream (each read would have the
    # server filter the whole burst); after a long pause it starts from now and sweeps.
    monkeypatch.setattr(change_stream, "REOPEN_AFTER", 0.5)
    sweeping = threading.Event()
    pokes: list[object] = []
    wakeup = paused_wakeup(timers, sweeping, pokes)
    wakeup.start()
    try:
        assert wakeup.watching.wait(WAIT)
        sweeping.set()
        time.sleep(0.3)  # a getMore in flight when the sweep began has come back by now
        for n in range(3):
            timers.insert_one({"_id": f"during-{n}", "kind": "TIMER", "claim": None})
        time.sleep(0.5)
        assert wakeup.watching.is_set() and wakeup.events == 0  # open, unread
        first = wakeup._stream
        sweeping.clear()
        assert _eventually(lambda: pokes == [None])  # one sweep for whatever came meanwhile
        assert _eventually(lambda: wakeup._stream not in (None, first))
        assert wakeup.events == 0  # the writes made while it swept were never read
        due = SystemClock().now()
        timers.insert_one({"_id": "after", "kind": "TIMER", "claim": None, "ready_at": due})
        assert _eventually(lambda: wakeup.events == 1)
        assert len(pokes) == 2 and pokes[1] is not None
    finally:
        wakeup.stop()


@pytest.mark.wire
def test_after_a_short_pause_the_stream_is_read_on_where_it_stopped(timers, monkeypatch):
    # A trickle of timers does not reopen the stream over and over.
    monkeypatch.setattr(change_stream, "REOPEN_AFTER", 30.0)
    sweeping = threading.Event()
    pokes: list[object] = []
    wakeup = paused_wakeup(timers, sweeping, pokes)
    wakeup.start()
    try:
        assert wakeup.watching.wait(WAIT)
        sweeping.set()
        time.sleep(0.3)
        first = wakeup._stream
        due = SystemClock().now()
        timers.insert_one({"_id": "during", "kind": "TIMER", "claim": None, "ready_at": due})
        time.sleep(0.3)
        assert wakeup.events == 0
        sweeping.clear()
        assert _eventually(lambda: wakeup.events == 1)  # read on: the write is not lost
        assert wakeup._stream is first and len(pokes) == 1 and pokes[0] is not None
    finally:
        wakeup.stop()


def test_without_change_streams_the_node_polls_and_says_so_once(make, caplog):
    # mongomock has no change streams.
    caplog.set_level(logging.INFO, logger="flowsched.mongo")
    scheduler = make(clock=SystemClock(), poll_interval=timedelta(milliseconds=50))
    fired = threading.Event()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.set())
    with scheduler:
        scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, SystemClock().now()))
        assert fired.wait(WAIT)
    notes = [r for r in caplog.records if "push wake-up unavailable" in r.getMessage()]
    assert len(notes) == 1


def test_push_wakeup_can_be_turned_off(make):
    scheduler = make(clock=SystemClock(), push_wakeup=False)
    with scheduler:
        assert scheduler._wakeup is None


def _eventually(condition: Any, timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())
