"""Per-handler limits (CONTRACT section 18): ``register(name, handler, *, redelivery=,
timeout=)`` on the four scheduler classes. A run past its time limit counts as failed
(``"timed_out"``) and is redelivered by the handler's policy: an ``async def`` handler is
cancelled, a thread is abandoned and its late result ignored.

Time limits run on the real clock (they bound how long a handler holds a worker); every wait
here is "eventually", with bounds far above the limits."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest
from history_faces import Face, face_fixture  # noqa: F401  (the fixture "face")

from flowsched import InMemoryScheduler, RedeliveryPolicy, ScheduleItem, ScheduleKind
from flowsched.observe import MetricsObserver

S = timedelta(seconds=1)
LIMIT = timedelta(milliseconds=200)


def eventually(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


def test_a_hung_thread_handler_is_abandoned_redelivered_and_its_late_result_ignored(
    face: Face,
) -> None:
    release = threading.Event()
    finished = threading.Event()
    calls: list[int] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        calls.append(attempt)
        if attempt == 0:
            try:
                release.wait(60)  # hangs past its limit; returns normally once released
            finally:
                finished.set()
            return
        raise RuntimeError("still down")

    metrics = MetricsObserver()
    scheduler = face.node("alpha", observer=metrics)
    policy = RedeliveryPolicy(initial=timedelta(seconds=10), maximum=timedelta(seconds=10))
    scheduler.register("pay", handler, timeout=LIMIT, redelivery=policy)
    due = face.clock.now()
    scheduler.schedule(ScheduleItem("p-1", ScheduleKind.TIMER, due, handler="pay"))

    face.clock.advance(S)  # the first run hangs; abandoned at its limit
    face.clock.advance(10 * S)  # redelivered by the handler's policy (10 s), fails
    assert calls == [0, 1]
    release.set()  # the abandoned run now returns normally: too late, ignored
    assert finished.wait(30)
    time.sleep(0.05)

    assert scheduler.exists("p-1")  # the late return did not complete it
    attempts = scheduler.history("p-1")
    assert [a.outcome for a in attempts] == ["timed_out", "failed"]
    assert attempts[0].error_type == "HandlerTimedOut"
    assert "time limit" in (attempts[0].error_message or "")
    assert int((attempts[1].started - due).total_seconds()) == 10
    assert metrics.snapshot().timed_out == 1
    assert metrics.snapshot().failed == 2
    item = scheduler.get("p-1")
    assert item is not None and int((item.due - due).total_seconds()) == 20  # policy: 10 s


def test_a_hung_async_handler_is_cancelled_and_redelivered(face: Face) -> None:
    if not face.name.startswith("async"):
        pytest.skip("async def handlers run on the asyncio face")
    cancelled: list[int] = []

    async def handler(item: ScheduleItem, attempt: int) -> None:
        if attempt == 0:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(attempt)
                raise

    scheduler = face.node("alpha")
    scheduler.register("pay", handler, timeout="200ms")
    scheduler.schedule(ScheduleItem("p-2", ScheduleKind.TIMER, face.clock.now(), handler="pay"))
    face.clock.advance(S)
    assert cancelled == [0]
    face.clock.advance(5 * S)  # the scheduler's policy: 3 s
    assert not scheduler.exists("p-2")
    assert [a.outcome for a in scheduler.history("p-2")] == ["timed_out", "succeeded"]


def test_a_handler_policy_dead_letters_by_its_own_max_attempts(face: Face) -> None:
    def handler(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError("no")

    scheduler = face.node("alpha")
    own = RedeliveryPolicy(initial=S, maximum=S, max_attempts=2)
    scheduler.register("strict", handler, redelivery=own)
    scheduler.register("lenient", handler)
    now = face.clock.now()
    scheduler.schedule(ScheduleItem("s", ScheduleKind.TIMER, now, handler="strict"))
    scheduler.schedule(ScheduleItem("l", ScheduleKind.TIMER, now, handler="lenient"))
    face.clock.advance(5 * S)

    assert [d.item.id for d in scheduler.dead_letters()] == ["s"]
    assert [a.outcome for a in scheduler.history("s")] == ["failed", "failed"]
    assert scheduler.exists("l")  # the scheduler's policy: no maximum


@pytest.mark.parametrize("bad", [timedelta(0), timedelta(seconds=-1), "0s", "-2s"])
def test_a_timeout_that_is_not_above_zero_is_a_value_error_naming_it(bad: object) -> None:
    scheduler = InMemoryScheduler()
    with pytest.raises(ValueError, match="timeout"):
        scheduler.register("pay", lambda item, attempt: None, timeout=bad)  # type: ignore[arg-type]
    scheduler.close()


def test_a_redelivery_that_is_not_a_policy_is_a_type_error() -> None:
    scheduler = InMemoryScheduler()
    with pytest.raises(TypeError, match="redelivery"):
        scheduler.register("pay", lambda i, a: None, redelivery=3)  # type: ignore[arg-type]
    scheduler.close()


def test_an_abandoned_thread_gives_its_worker_back() -> None:
    release = threading.Event()
    ran: list[str] = []

    def hang(item: ScheduleItem, attempt: int) -> None:
        ran.append(f"hang-{attempt}")
        release.wait(60)

    scheduler = InMemoryScheduler(workers=1)  # real time, one handler thread
    scheduler.register("hang", hang, timeout=LIMIT)
    scheduler.register("quick", lambda item, attempt: ran.append("quick"))
    try:
        scheduler.start()
        now = scheduler.now()
        scheduler.schedule(ScheduleItem("h", ScheduleKind.TIMER, now, handler="hang"))
        assert eventually(lambda: "hang-0" in ran)
        scheduler.schedule(ScheduleItem("q", ScheduleKind.TIMER, now, handler="quick"))
        # One worker: "quick" runs only once the hung run was abandoned at its limit.
        assert eventually(lambda: "quick" in ran)
        assert not release.is_set()
        assert eventually(lambda: [a.outcome for a in scheduler.history("h")][:1] == ["timed_out"])
    finally:
        release.set()
        scheduler.close()


def test_prometheus_counts_time_outs() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from datetime import UTC, datetime

    from flowsched.clock import ManualClock
    from flowsched.metrics_prometheus import PrometheusObserver

    registry = prometheus_client.CollectorRegistry()
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    scheduler = InMemoryScheduler(clock=clock, observer=PrometheusObserver(registry=registry))
    release = threading.Event()
    scheduler.register("slow", lambda item, attempt: release.wait(60), timeout=LIMIT)
    scheduler.schedule(ScheduleItem("s", ScheduleKind.TIMER, clock.now(), handler="slow"))
    clock.advance(S)
    release.set()
    sample = registry.get_sample_value("flowsched_timed_out_total", {"kind": "TIMER"})
    assert sample == 1.0
    assert registry.get_sample_value("flowsched_failed_total", {"kind": "TIMER"}) == 1.0
    scheduler.close()
