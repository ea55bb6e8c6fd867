"""The clock a node face counts due times from (flowsched/node/store_time.py): the given clock,
else the database's time where the store measures it, else the host's; and when the face
measures it itself (a process that schedules but does not fire)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowsched import ManualClock
from flowsched.clock import SystemClock
from flowsched.node.clock_filter import ClockFilter
from flowsched.node.store_time import DatabaseTime, face_clock
from flowsched.store import MemoryTimerStore, as_async
from flowsched.store.measured_clock import REFRESH, MeasuredClock

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class _Measuring:
    def __init__(self, node: ManualClock) -> None:
        self.time = MeasuredClock(None, None, node=node)


def test_a_given_clock_wins_and_a_store_without_a_measured_time_gives_the_host_s() -> None:
    clock = ManualClock(T0)
    assert face_clock(_Measuring(clock), clock) is clock
    assert isinstance(face_clock(MemoryTimerStore(clock), None), SystemClock)


def test_a_measured_store_gives_the_database_s_time_through_an_async_face_too() -> None:
    host = ManualClock(T0)
    store = _Measuring(host)
    ahead = T0 + timedelta(minutes=5)  # the server reads 5 min more than this host
    store.time.sample(host.monotonic(), host.monotonic() + 0.002, T0, ahead)
    time = face_clock(store, None)
    assert isinstance(time, DatabaseTime)
    assert abs(time.now() - (ahead + timedelta(milliseconds=1))) < timedelta(milliseconds=5)
    wrapped = MemoryTimerStore(host)
    wrapped.time = store.time  # type: ignore[attr-defined]
    assert isinstance(face_clock(as_async(wrapped), None), DatabaseTime)


def test_a_face_measures_when_no_sample_is_fresh_and_waits_after_a_failure() -> None:
    host = ManualClock(T0)
    measured = MeasuredClock(None, None, node=host)
    assert measured.stale(), "never measured: the face measures first"
    measured.sample(host.monotonic(), host.monotonic(), T0, T0)
    assert not measured.stale()
    host.jump(timedelta(seconds=REFRESH))
    assert measured.stale(), "30 s old: measured again"
    measured.postpone()
    assert not measured.stale(), "a failed measurement is not retried at every call"
    host.jump(timedelta(seconds=REFRESH))
    assert measured.stale()
    trusted = MeasuredClock(host, None)
    assert not trusted.stale(), "an injected clock is the truth: nothing to measure"


def test_the_error_carries_the_store_s_reading_precision() -> None:
    fine = ClockFilter(precision=timedelta(microseconds=1))
    coarse = ClockFilter()  # MongoDB's localTime: milliseconds
    for f in (fine, coarse):
        f.add(10.0, 10.002, T0, T0)
    _, fine_error = fine.bound(10.002, T0)
    _, coarse_error = coarse.bound(10.002, T0)
    assert fine_error == timedelta(milliseconds=1, microseconds=1), fine_error
    assert coarse_error == timedelta(milliseconds=2), coarse_error
