"""The "now" a node core is given: the store's time, by one rule for both drivers and the
simulation (flowsched/node/store_time.py), never the node's own clock on a skewed host."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from flowsched import ManualClock, ScheduleItem, ScheduleKind
from flowsched.drivers.asyncio import AsyncioDriver
from flowsched.drivers.threads import ThreadDriver
from flowsched.node.actions import Action
from flowsched.node.core import NodeCore, NodeSettings
from flowsched.node.store_time import core_clock
from flowsched.outcomes import Completed, Outcome
from flowsched.store import MemoryTimerStore, as_async
from flowsched.store.measured_clock import MeasuredClock
from flowsched.store.records import Claim

START = datetime(2026, 1, 1, tzinfo=UTC)
SKEW = timedelta(minutes=5)  # the node's clock is 5 min ahead of the store's
ROUTE = "h:work"


class SpyCore(NodeCore):
    """Records every "now" the driver gives the core."""

    def __init__(self) -> None:
        super().__init__(
            NodeSettings("n1", lease=timedelta(seconds=10)), lambda: frozenset({ROUTE})
        )
        self.seen: list[datetime] = []

    def next_action(self, now: datetime) -> Action:
        self.seen.append(now)
        return super().next_action(now)


def _store_and_node() -> tuple[MemoryTimerStore, ManualClock]:
    store = MemoryTimerStore(ManualClock(START))
    store.put(ScheduleItem("a", ScheduleKind.TIMER, START, handler="work"))
    return store, ManualClock(START + SKEW)


def _done(claim: Claim) -> Outcome:
    return Completed()


def test_the_thread_driver_gives_the_core_the_stores_time_not_the_nodes() -> None:
    store, node_clock = _store_and_node()
    core = SpyCore()
    driver = ThreadDriver(
        core, store, _done, core.routes, node_clock, shutdown_timeout=timedelta(seconds=1)
    )
    assert driver.run_inline() == 1
    assert core.seen and set(core.seen) == {START}, f"the core saw {set(core.seen)}"
    assert not store.exists("a")


def test_the_asyncio_driver_gives_the_core_the_stores_time_not_the_nodes() -> None:
    store, node_clock = _store_and_node()
    core = SpyCore()

    async def done(claim: Claim) -> Outcome:
        return Completed()

    async def main() -> int:
        driver = AsyncioDriver(
            core,
            as_async(store),
            done,
            core.routes,
            node_clock,
            shutdown_timeout=timedelta(seconds=1),
        )
        return await driver.run_inline()

    assert asyncio.run(main()) == 1
    assert core.seen and set(core.seen) == {START}, f"the core saw {set(core.seen)}"


class _Measured:
    """A store that measures its database's clock, as MongoTimerStore does."""

    def __init__(self, time: MeasuredClock) -> None:
        self.time = time


class _Host:
    """A host's clocks: its wall clock off the truth by ``skew`` (which may step), its
    monotonic clock the truth's."""

    def __init__(self, truth: ManualClock, skew: timedelta) -> None:
        self.truth = truth
        self.skew = skew

    def now(self) -> datetime:
        return self.truth.now() + self.skew

    def monotonic(self) -> float:
        return self.truth.monotonic()


def test_a_measuring_store_gives_the_measured_time_carried_on_the_monotonic_clock() -> None:
    truth = ManualClock(START)
    host = _Host(truth, SKEW)  # the host is 5 min ahead
    measured = MeasuredClock(None, truth.now, node=host)
    now = core_clock(_Measured(measured), host)
    measured.now()  # one sample (a zero round trip on manual clocks)
    assert abs(now() - truth.now()) <= timedelta(milliseconds=2), now()
    truth.jump(timedelta(seconds=7))
    host.skew -= timedelta(hours=1)  # the host's wall clock steps back an hour
    assert abs(now() - truth.now()) <= timedelta(milliseconds=2), now()


def test_a_store_without_a_clock_leaves_the_drivers() -> None:
    node = ManualClock(START + SKEW)
    assert core_clock(object(), node)() == START + SKEW
