"""A started node: fires on its own, wakes early, renews leases, closes cleanly.

Real clock, short intervals; every wait is on an event with a generous timeout.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from mongo_nodes import WAIT, eventually

from flowsched.clock import SystemClock
from flowsched.port import ScheduleItem, ScheduleKind


def background(make, **options):
    options.setdefault("poll_interval", timedelta(milliseconds=50))
    return make(clock=SystemClock(), **options)


def test_due_items_fire_in_the_background(make):
    scheduler = background(make)
    fired: set[str] = set()
    done = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        fired.add(item.id)
        if len(fired) == 3:
            done.set()

    scheduler.subscribe(ScheduleKind.TIMER, handler)
    with scheduler:
        for n in range(3):
            scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, SystemClock().now()))
        assert done.wait(WAIT)
        assert eventually(lambda: not any(scheduler.exists(f"t-{n}") for n in range(3)))


def test_scheduling_an_item_due_before_the_next_poll_wakes_the_sweeper(make):
    scheduler = background(make, poll_interval=timedelta(hours=1))
    fired = {name: threading.Event() for name in ("first", "near")}
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired[item.id].set())
    with scheduler:
        now = SystemClock().now()
        scheduler.schedule(ScheduleItem("first", ScheduleKind.TIMER, now))
        assert fired["first"].wait(WAIT)  # the first poll has run; the next is an hour away
        near = SystemClock().now() + timedelta(milliseconds=200)
        scheduler.schedule(ScheduleItem("near", ScheduleKind.TIMER, near))
        assert fired["near"].wait(WAIT)


def test_an_item_scheduled_while_a_claim_query_runs_is_not_left_for_the_next_poll(make):
    # The claim query has already read the collection when "near" is written: the plan made
    # from its answer (next poll in an hour) must still honour the wake-up "near" asked for.
    scheduler = background(make, poll_interval=timedelta(hours=1))
    fired = threading.Event()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.set())
    store = scheduler.store  # the node's claim-lane calls: its claims and next-due queries
    once: list[bool] = []

    def after_the_read(call):
        def answered(*args, **kwargs):
            answer = call(*args, **kwargs)
            if not once:  # the first one has read the collection: "near" is not in it
                once.append(True)
                near = SystemClock().now() + timedelta(milliseconds=200)
                scheduler.schedule(ScheduleItem("near", ScheduleKind.TIMER, near))
            return answer

        return answered

    for name in ("claim_started", "next_due", "next_wake"):
        setattr(store, name, after_the_read(getattr(store, name)))
    with scheduler:
        assert fired.wait(WAIT)


def test_a_long_handler_keeps_renewing_its_lease(make, collection):
    scheduler = background(make, lease=timedelta(seconds=1.5))
    started, release = threading.Event(), threading.Event()

    def slow(item: ScheduleItem, attempt: int) -> None:
        started.set()
        release.wait(WAIT)

    scheduler.subscribe(ScheduleKind.TIMER, slow)
    with scheduler:
        scheduler.schedule(ScheduleItem("slow", ScheduleKind.TIMER, SystemClock().now()))
        assert started.wait(WAIT)
        first = collection.find_one({"_id": "slow"})["claim"]
        leases = {first["lease_until"]}

        def renewed_twice() -> bool:
            claim = collection.find_one({"_id": "slow"})["claim"]
            assert claim["token"] == first["token"]  # still this delivery's claim
            leases.add(claim["lease_until"])
            return len(leases) >= 3

        assert eventually(renewed_twice)
        release.set()
        assert eventually(lambda: not scheduler.exists("slow"))


def test_close_waits_for_running_handlers_and_gives_back_queued_claims(make, collection):
    scheduler = background(make, workers=1, batch_size=10)
    calls: list[str] = []
    started, release = threading.Event(), threading.Event()

    def blocking(item: ScheduleItem, attempt: int) -> None:
        calls.append(item.id)
        started.set()
        release.wait(WAIT)

    scheduler.subscribe(ScheduleKind.TIMER, blocking)
    now = SystemClock().now()
    for n in range(5):
        scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, now))
    scheduler.start()
    assert started.wait(WAIT)
    closer = threading.Thread(target=scheduler.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # a handler is still running
    release.set()
    closer.join(WAIT)
    assert not closer.is_alive()

    assert len(calls) == 1 and not scheduler.exists(calls[0])
    left = list(collection.find())
    assert len(left) == 4
    assert all(d["claim"] is None and d["deliveries"] == d["attempts"] == 0 for d in left)


def test_an_observer_that_raises_does_not_strand_the_item(make):
    from flowsched.delivery import Observer, RedeliveryPolicy

    class Flaky(Observer):
        calls = 0

        def fired(self, item: ScheduleItem, attempt: int, lateness: timedelta) -> None:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("metrics backend down")

    fast = RedeliveryPolicy(initial=timedelta(milliseconds=50), maximum=timedelta(seconds=1))
    scheduler = background(make, observer=Flaky(), redelivery=fast)
    delivered = threading.Event()
    attempts: list[int] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        attempts.append(attempt)
        delivered.set()

    scheduler.subscribe(ScheduleKind.TIMER, handler)
    with scheduler:
        scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, SystemClock().now()))
        assert delivered.wait(WAIT)
        assert eventually(lambda: not scheduler.exists("t"))
    assert attempts == [0]  # the observer's error changed nothing: delivered first time
