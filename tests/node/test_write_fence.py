"""The deadline a node scheduler's writes carry (flowsched.node.write_fence): in the store's
clock, on the early side of its error bound, plus op_timeout; none for a store without an
op_timeout."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from flowsched import ManualClock, SchedulerUnavailable
from flowsched.node.write_fence import REFRESH, WriteFence
from flowsched.store import MemoryTimerStore, as_async

START = datetime(2030, 1, 1, tzinfo=UTC)
LIMIT = timedelta(seconds=2)


class SqlStore:
    """A store that compares in its database (no clock of its own) and gives up after
    ``op_timeout``; its ``now()`` is the database's time, ``skew`` ahead of the node's."""

    def __init__(self, node: ManualClock, skew: timedelta, op_timeout: timedelta | None) -> None:
        self.node, self.skew, self.op_timeout = node, skew, op_timeout
        self.clock = None
        self.asked = 0
        self.down = False

    def now(self) -> datetime:
        self.asked += 1
        if self.down:
            raise SchedulerUnavailable("now: no reply")
        return self.node.now() + self.skew


SLACK = timedelta(milliseconds=500)  # the real time a call takes on a loaded host


def test_a_store_without_op_timeout_gets_no_deadline() -> None:
    clock = ManualClock(START)
    assert WriteFence(MemoryTimerStore(clock), clock).deadline(clock.now, time.monotonic()) is None
    assert (
        WriteFence(SqlStore(clock, timedelta(0), None), clock).deadline(clock.now, time.monotonic())
        is None
    )


def test_a_store_with_its_own_clock_is_fenced_by_it() -> None:
    node, store_clock = ManualClock(START), ManualClock(START + timedelta(hours=1))
    store = SqlStore(node, timedelta(0), LIMIT)
    store.clock = store_clock  # type: ignore[assignment]
    assert (
        WriteFence(store, node).deadline(store.now, time.monotonic()) == store_clock.now() + LIMIT
    )
    assert store.asked == 0


def test_a_database_clock_is_measured_once_then_carried_and_refreshed() -> None:
    node = ManualClock(START)
    store = SqlStore(node, timedelta(minutes=5), LIMIT)  # the database runs 5 min ahead
    fence = WriteFence(store, node)
    first = fence.deadline(store.now, time.monotonic())
    assert store.asked == 1
    assert first is not None
    assert abs(first - (START + timedelta(minutes=5) + LIMIT)) < SLACK
    assert first <= START + timedelta(minutes=5) + LIMIT  # the early side
    node.advance(timedelta(seconds=1))
    carried = fence.deadline(store.now, time.monotonic())
    assert carried is not None
    assert abs(carried - (first + timedelta(seconds=1))) < timedelta(milliseconds=1)
    assert store.asked == 1  # carried on the monotonic clock, not measured again
    node.advance(timedelta(seconds=REFRESH))
    fence.deadline(store.now, time.monotonic())
    assert store.asked == 2


def test_a_failed_measurement_keeps_the_samples_or_sends_nothing() -> None:
    node = ManualClock(START)
    store = SqlStore(node, timedelta(0), LIMIT)
    store.down = True
    with pytest.raises(SchedulerUnavailable):
        WriteFence(store, node).deadline(store.now, time.monotonic())
    store.down = False
    fence = WriteFence(store, node)
    fence.deadline(store.now, time.monotonic())
    node.advance(timedelta(seconds=REFRESH + 1))
    store.down = True
    later = fence.deadline(store.now, time.monotonic())
    assert later is not None
    assert abs(later - (node.now() + LIMIT)) < SLACK


def test_the_async_face_measures_through_the_async_store() -> None:
    node = ManualClock(START)
    store = SqlStore(node, timedelta(minutes=-3), LIMIT)

    async def now() -> datetime:
        return store.now()

    deadline = asyncio.run(WriteFence(store, node).deadline_async(now, time.monotonic()))
    assert deadline is not None
    assert abs(deadline - (START - timedelta(minutes=3) + LIMIT)) < SLACK


def test_an_async_face_over_a_sync_store_is_looked_through() -> None:
    clock = ManualClock(START)
    fenced = WriteFence(as_async(MemoryTimerStore(clock)), clock)
    assert fenced.op_timeout is None
