"""Start on claim (CONTRACT section 15, issues 37 and 40): a node claims only for its free
workers and starts what it claims, the start recorded by the claim itself (``claim.at``,
``claim_started`` in flowsched/mongo/timer_claims.py; the node core's ``start_on_claim``).
``history`` shows that attempt open from the recorded start, which precedes any cancel that
returns after the claim; an item waiting for a busy worker is not claimed - no start is
recorded, and a cancel of it wins; ``run_due`` claims each item right before its handler.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import pytest
from mongo_nodes import WAIT, eventually

from flowsched.clock import ManualClock, SystemClock
from flowsched.mongo import MongoScheduler
from flowsched.mongo.documents import bson_utc
from flowsched.port import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def _claim(collection: Any, item_id: str) -> dict[str, Any]:
    found = collection.find_one({"_id": item_id})
    return (found or {}).get("claim") or {}


def _started(collection: Any, item_id: str) -> datetime | None:
    """The start the item's claim recorded (``claim.at``), if any."""
    at = _claim(collection, item_id).get("at")
    return None if at is None else bson_utc(at)


class Running(NamedTuple):
    """A delivery of "job" under way on node "b" (its start recorded by the claim), and node
    "a" beside it; ``release`` lets the handler return, ``ran`` is what it was given."""

    node: MongoScheduler
    other: MongoScheduler
    recorded: datetime
    release: threading.Event
    ran: list[tuple[str, object]]


@contextmanager
def _running_job(collection: Any) -> Iterator[Running]:
    node = MongoScheduler(collection, node_id="b", workers=2)
    other = MongoScheduler(collection, node_id="a")
    running, release = threading.Event(), threading.Event()
    ran: list[tuple[str, object]] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, item.payload))
        running.set()
        release.wait(WAIT)

    node.subscribe(TIMER, handler)
    node.schedule(ScheduleItem("job", TIMER, SystemClock().now(), payload={"v": 1}))
    try:
        node.start()
        assert running.wait(WAIT)
        recorded = bson_utc(_claim(collection, "job")["at"])  # by the claim itself
        yield Running(node, other, recorded, release, ran)
    finally:
        release.set()
        node.close()
        other.close()


@pytest.mark.wire
def test_a_recorded_start_is_an_open_attempt_that_precedes_a_cancel(mongo_db: Any) -> None:
    with _running_job(mongo_db["timers"]) as (node, other, recorded, release, ran):
        [open_attempt] = node.history("job")
        assert (open_attempt.started, open_attempt.ended) == (recorded, None)
        assert other.cancel("job")  # returns after the claim: the delivery had started
        cancel_returned = mongo_db.command("hello")["localTime"].replace(tzinfo=UTC)
        assert recorded <= cancel_returned  # by the database's clock
        # The cancel removed the claim the open attempt was read from: it kept the attempt.
        [kept] = other.history("job")
        assert (kept.started, kept.ended, kept.node) == (recorded, None, "b")
        release.set()
        assert eventually(lambda: [a.ended is not None for a in other.history("job")] == [True])
        [attempt] = other.history("job")
        assert attempt.started == recorded  # the recorded start, not the handler's call
        assert attempt.ended is not None and attempt.ended >= recorded
        assert ran == [("job", {"v": 1})]


@pytest.mark.wire
def test_a_replace_that_meets_a_recorded_start_keeps_the_attempt_open(mongo_db: Any) -> None:
    collection = mongo_db["timers"]
    with _running_job(collection) as (_, other, recorded, release, ran):
        later = SystemClock().now() + timedelta(hours=1)
        other.schedule(ScheduleItem("job", TIMER, later, payload={"v": 2}))  # the replace
        assert collection.find_one({"_id": "job"})["payload"] == {"v": 2}
        [kept] = other.history("job")  # the old form's attempt, still open
        assert (kept.started, kept.ended) == (recorded, None)
        release.set()
        assert eventually(lambda: [a.ended is not None for a in other.history("job")] == [True])
        [attempt] = other.history("job")  # its outcome's record took the open one's place
        assert attempt.started == recorded
        assert other.exists("job") and ran == [("job", {"v": 1})]


def test_an_item_waiting_for_a_busy_worker_records_no_start_and_a_cancel_wins(
    make: Any, collection: Any
) -> None:
    # One worker, busy: the node claims nothing more (it claims for free workers only), so
    # the items due meanwhile carry no recorded start, and one cancelled while it waits
    # never starts; the other starts once the worker is free, its start recorded then.
    node = make(clock=SystemClock(), workers=1, poll_interval=timedelta(milliseconds=50))
    running, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append(item.id)
        if item.id == "busy":
            running.set()
            release.wait(WAIT)

    node.subscribe(TIMER, handler)
    now = SystemClock().now()
    node.schedule(ScheduleItem("busy", TIMER, now - timedelta(seconds=2)))
    node.schedule(ScheduleItem("dropped", TIMER, now - timedelta(seconds=1)))
    node.schedule(ScheduleItem("queued", TIMER, now))
    node.start()
    try:
        assert running.wait(WAIT)
        assert "at" in _claim(collection, "busy")  # a free worker: started on the claim
        assert "at" not in _claim(collection, "dropped")  # waits: no start recorded
        assert "at" not in _claim(collection, "queued")
        assert node.cancel("dropped")  # while it waits: it never starts
        release.set()
        assert eventually(lambda: ran == ["busy", "queued"])
        assert eventually(lambda: [a.ended is not None for a in node.history("queued")] == [True])
        assert node.history("dropped") == [] and ran == ["busy", "queued"]
    finally:
        release.set()


def test_run_due_claims_each_item_right_before_its_handler(
    make: Any, collection: Any, clock: ManualClock
) -> None:
    # run_due calls the handlers one after another and claims each item right before its
    # handler (one at a time, its start recorded then): while one handler runs the items
    # after it carry no claim, and a cancel of one of them from the handler wins.
    node = make()
    seen: dict[str, dict[str, Any]] = {}

    def handler(item: ScheduleItem, attempt: int) -> None:
        seen[item.id] = {n: _started(collection, n) for n in ("t-0", "t-1", "t-2")}
        if item.id == "t-0":
            assert node.cancel("t-2")

    node.subscribe(TIMER, handler)
    claimed_at = clock.now()
    for n in range(3):
        node.schedule(ScheduleItem(f"t-{n}", TIMER, claimed_at))
    assert node.run_due() == 2
    assert seen == {
        "t-0": {"t-0": claimed_at, "t-1": None, "t-2": None},
        "t-1": {"t-0": None, "t-1": claimed_at, "t-2": None},  # t-0 settled: gone
    }
    assert [a.started for a in node.history("t-0")] == [claimed_at]
    assert node.history("t-2") == []


def test_a_claim_that_takes_over_a_lost_run_records_its_own_start(
    make: Any, collection: Any, clock: ManualClock
) -> None:
    # An item still carrying the started claim of a node that died: the claim that takes it
    # over ends that run "lapsed" at its lease's end (its recorded start kept) and records
    # its own start; one death alone is not counted as a failure (attempt 0).
    node = make()
    ran: list[tuple[str, int]] = []
    node.subscribe(TIMER, lambda item, attempt: ran.append((item.id, attempt)))
    node.schedule(ScheduleItem("lost", TIMER, clock.now()))
    died_at = clock.now() - timedelta(seconds=30)
    lapsed = {"owner": "dead", "token": "t", "lease_until": clock.now(), "at": died_at}
    collection.update_one({"_id": "lost"}, {"$set": {"claim": lapsed}})
    assert node.run_due() == 1 and ran == [("lost", 0)]
    lost, run = node.history("lost")
    assert (lost.node, lost.started, lost.ended, lost.outcome) == (
        "dead",
        died_at,
        clock.now(),
        "lapsed",
    )
    assert (run.node, run.started, run.outcome) == (node.node_id, clock.now(), "succeeded")


def test_history_reads_the_recorded_start_over_the_claim_time() -> None:
    from flowsched.mongo.history import running_attempt

    at = datetime(2026, 3, 1, 12, tzinfo=UTC)
    started = at + timedelta(milliseconds=5)
    claim = {"owner": "n", "token": "t", "lease_until": at, "at": at}
    assert running_attempt({"claim": claim}).started == at  # queued, checked: claimed at
    recorded = running_attempt({"claim": {**claim, "started": started}})
    assert recorded is not None and recorded.started == started
