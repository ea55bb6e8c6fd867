"""Start on claim (CONTRACT section 15, issues 37 and 40): a claim whose handler starts at
once records the start in the database (``claim.started``, flowsched.mongo.claim_start);
``history`` shows that attempt open from the recorded start, which precedes any cancel that
returns after the claim; a claim that waits in the queue records nothing and is checked
before its handler (flowsched.mongo.start_check)."""

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
        recorded = bson_utc(_claim(collection, "job")["started"])  # by the claim itself
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


def test_a_claim_waiting_for_a_busy_worker_records_no_start_and_is_checked(
    make: Any, collection: Any
) -> None:
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
    node.schedule(ScheduleItem("busy", TIMER, now - timedelta(seconds=1)))
    node.schedule(ScheduleItem("queued", TIMER, now))
    node.start()
    try:
        assert running.wait(WAIT)
        assert eventually(lambda: bool(_claim(collection, "queued")))  # claimed, queued
        assert "started" in _claim(collection, "busy")  # a free worker: started on the claim
        assert "started" not in _claim(collection, "queued")  # waits: not started
        sweeper = node._sweeper
        assert sweeper is not None and sweeper._checks.checks == 0
        release.set()
        assert eventually(lambda: ran == ["busy", "queued"])
        assert sweeper._checks.checks == 1  # the queued claim was checked (one find)
    finally:
        release.set()


def test_run_due_records_no_start_on_the_claim(make: Any, clock: ManualClock) -> None:
    # run_due calls the handlers of its batch one after another: none starts on the claim,
    # each is checked right before its handler (flowsched.mongo.start_check).
    node = make()
    seen: dict[str, Any] = {}

    def handler(item: ScheduleItem, attempt: int) -> None:
        seen[item.id] = _claim(node._store.items, item.id).get("started")

    node.subscribe(TIMER, handler)
    claimed_at = clock.now()
    for n in range(3):
        node.schedule(ScheduleItem(f"t-{n}", TIMER, claimed_at))
    assert node.run_due() == 3
    assert seen == {"t-0": None, "t-1": None, "t-2": None}
    assert [a.started for a in node.history("t-0")] == [claimed_at]


def test_a_suspect_claim_records_no_start_on_the_claim(make: Any, clock: ManualClock) -> None:
    # An item still carrying an earlier claim (its node died): its start is marked and
    # checked before its handler, as before - the claim records none.
    node = make()
    node.subscribe(TIMER, lambda item, attempt: None)
    node.schedule(ScheduleItem("lost", TIMER, clock.now()))
    lapsed = {"owner": "dead", "token": "t", "lease_until": clock.now(), "at": clock.now()}
    node._store.items.update_one({"_id": "lost"}, {"$set": {"claim": lapsed}})
    claimed = node._claimer.take(10, start=10)
    [claim] = claimed.deliver
    assert claim.suspect and claim.started is None
    assert "started" not in _claim(node._store.items, "lost")


def test_history_reads_the_recorded_start_over_the_claim_time() -> None:
    from flowsched.mongo.history import running_attempt

    at = datetime(2026, 3, 1, 12, tzinfo=UTC)
    started = at + timedelta(milliseconds=5)
    claim = {"owner": "n", "token": "t", "lease_until": at, "at": at}
    assert running_attempt({"claim": claim}).started == at  # queued, checked: claimed at
    recorded = running_attempt({"claim": {**claim, "started": started}})
    assert recorded is not None and recorded.started == started
