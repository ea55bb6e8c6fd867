"""The Prometheus exporter counts per kind, records lateness and reads the pending gauge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind

prometheus_client = pytest.importorskip("prometheus_client")
from flowsched.metrics_prometheus import PrometheusObserver  # noqa: E402

START = datetime(2026, 1, 1, tzinfo=UTC)


def test_events_and_pending_reach_the_registry():
    registry = prometheus_client.CollectorRegistry()
    observer = PrometheusObserver(registry=registry)
    clock = ManualClock(START)
    s = InMemoryScheduler(clock=clock, observer=observer)
    observer.track_pending(s.pending)
    s.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    s.schedule(ScheduleItem("a", ScheduleKind.TIMER, START + timedelta(seconds=1)))
    s.schedule(ScheduleItem("b", ScheduleKind.ACTION_TIMEOUT, START + timedelta(seconds=1)))
    s.schedule(ScheduleItem("c", ScheduleKind.TIMER, START + timedelta(seconds=9)))
    s.cancel("c")
    clock.jump(timedelta(seconds=3))  # "a" fires 2 s late
    clock.advance(timedelta(0))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels or None)

    assert value("flowsched_scheduled_total", kind="TIMER") == 2
    assert value("flowsched_scheduled_total", kind="ACTION_TIMEOUT") == 1
    assert value("flowsched_fired_total", kind="TIMER") == 1
    assert value("flowsched_completed_total", kind="TIMER") == 1
    assert value("flowsched_cancelled_total") == 1
    assert value("flowsched_lateness_seconds_count", kind="TIMER") == 1
    assert value("flowsched_lateness_seconds_sum", kind="TIMER") == pytest.approx(2.0)
    assert value("flowsched_pending") == 1  # "b" waits for an ACTION_TIMEOUT handler


def test_late_completions_are_counted_per_kind_not_as_failures():
    registry = prometheus_client.CollectorRegistry()
    observer = PrometheusObserver(registry=registry)
    item = ScheduleItem("a", ScheduleKind.TIMER, START)
    observer.late_completion(item, 0, timedelta(seconds=4))
    labels = {"kind": "TIMER"}
    assert registry.get_sample_value("flowsched_late_completions_total", labels) == 1
    assert registry.get_sample_value("flowsched_failed_total", labels) == 0
