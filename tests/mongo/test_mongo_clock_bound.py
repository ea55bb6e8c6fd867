"""Never early (CONTRACT section 15): the node's estimate of the database's clock carries its
error bound (a sample is worth at most half its round trip; the best recent samples are
kept, as NTP's clock filter does), due times are judged on the safe side of it, and a host
with no skew gets no skew warning. Measured with an injected ``hello`` on a ManualClock:
no real sleeps, node and server on one clock (no skew)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import mongomock
import pytest

from flowsched.clock import ManualClock
from flowsched.mongo import MongoScheduler
from flowsched.mongo.server_clock import ServerClock, due_now, lease_now
from flowsched.port import ScheduleItem, ScheduleKind

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TIMER = ScheduleKind.TIMER


class HostClock:
    """A host's clock over ``base``: not a ManualClock (no ``attach``), so a face built on it
    measures the database's time."""

    def __init__(self, base: ManualClock) -> None:
        self.base = base

    def now(self) -> datetime:
        return self.base.now()

    def monotonic(self) -> float:
        return self.base.monotonic()


class Hello:
    """``database.command("hello")`` on the node's own clock (no skew). ``held``: seconds
    the request is held on its way *to* the server, so the server reads its clock at the end
    of the round trip (the worst case for a midpoint estimate: it then looks ``held / 2``
    ahead). Each reply takes 2 ms more besides."""

    def __init__(self, node: ManualClock) -> None:
        self.node = node
        self.held = 0.0

    def __call__(self, name: str) -> dict[str, Any]:
        self.node.jump(timedelta(seconds=self.held + 0.001))
        reply = {"ok": 1, "localTime": self.node.now().replace(tzinfo=None)}
        self.node.jump(timedelta(milliseconds=1))
        return reply


def test_a_sample_from_a_held_hello_alone_is_judged_on_the_safe_side() -> None:
    node = ManualClock(T0)
    hello = Hello(node)
    hello.held = 3.0
    clock = ServerClock(node, hello, measure=True)
    clock.refresh()

    assert clock.now() > node.now() + timedelta(seconds=1)  # the midpoint is 1.5 s ahead...
    assert clock.error >= timedelta(seconds=1.5)  # ...and says how far it may be off
    assert due_now(clock) <= node.now()  # so an item is never due early by the server
    assert lease_now(clock) >= node.now()  # and a lease never looks longer than it is


def test_one_slow_round_trip_does_not_displace_a_good_sample() -> None:
    node = ManualClock(T0)
    hello = Hello(node)
    clock = ServerClock(node, hello, measure=True)
    clock.refresh()  # a good sample: 2 ms round trip
    node.advance(timedelta(seconds=30))
    hello.held = 3.0  # the first hello after a server restart, say
    clock.refresh()

    assert abs(clock.now() - node.now()) <= timedelta(milliseconds=3)
    assert clock.error <= timedelta(milliseconds=5)
    assert due_now(clock) <= node.now() <= lease_now(clock)


def test_a_held_hello_on_a_host_with_no_skew_warns_of_no_skew(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = ManualClock(T0)
    hello = Hello(node)
    hello.held = 3.0
    clock = ServerClock(node, hello, measure=True, owner="n1")
    with caplog.at_level(logging.WARNING, "flowsched.mongo"):
        clock.refresh()
    assert [r.getMessage() for r in caplog.records if "NTP" in r.getMessage()] == []


def test_a_large_error_is_measured_again_soon() -> None:
    node = ManualClock(T0)
    hello = Hello(node)
    hello.held = 3.0
    clock = ServerClock(node, hello, measure=True)
    clock.refresh()
    node.advance(timedelta(seconds=6))
    assert clock.due()  # not 30 s later: the bound is too wide to keep


@pytest.mark.parametrize("held", [0.0, 3.0])
def test_no_delivery_starts_before_its_due_time_by_the_server_clock(held: float) -> None:
    node = ManualClock(T0)
    hello = Hello(node)
    collection = mongomock.MongoClient(tz_aware=True)["flowsched"]["timers"]
    scheduler = MongoScheduler(collection, clock=node, server_time=True, node_id="n")
    scheduler._time._command = hello  # the server's clock is the node's: no skew
    started: list[tuple[datetime, datetime]] = []  # (due, server time at the start)
    scheduler.subscribe(TIMER, lambda item, attempt: started.append((item.due, node.now())))
    for n in range(20):
        due = T0 + timedelta(seconds=1 + n * 0.25)
        scheduler.schedule(ScheduleItem(f"t{n}", TIMER, due))
    hello.held = held  # every hello from now on
    for _ in range(60):
        node.jump(timedelta(milliseconds=100))
        scheduler._time._next = 0.0  # measure before every claim: many slow samples
        scheduler.run_due()

    assert len(started) == 20
    assert [start for due, start in started if start < due] == []


def test_the_async_face_starts_nothing_before_its_due_time_after_held_hellos(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from flowsched import AsyncMongoScheduler
    from flowsched.store import measured_clock

    node = ManualClock(T0)
    hello = Hello(node)
    collection = mongomock.MongoClient(tz_aware=True)["flowsched"]["timers"]
    # A host clock that is no ManualClock (it has no attach): the database's time is
    # measured (a ManualClock is trusted as it is), and run_due claims inline.
    scheduler = AsyncMongoScheduler(collection, node_id="a", clock=HostClock(node))
    store = getattr(scheduler.store, "sync", scheduler.store)  # mongomock: run inline
    store.steps.roles.database.command = hello
    started: list[tuple[datetime, datetime]] = []
    scheduler.subscribe(TIMER, lambda item, attempt: started.append((item.due, node.now())))

    async def run() -> None:
        for n in range(20):
            due = T0 + timedelta(seconds=1 + n * 0.25)
            await scheduler.schedule(ScheduleItem(f"t{n}", TIMER, due))
        hello.held = 3.0
        monkeypatch.setattr(measured_clock, "REFRESH", 0.0)  # measure before every claim
        for _ in range(60):
            node.jump(timedelta(milliseconds=100))
            await scheduler.run_due()

    asyncio.run(run())
    assert len(started) == 20
    assert [start for due, start in started if start < due] == []
