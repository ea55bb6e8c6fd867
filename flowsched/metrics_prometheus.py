"""Prometheus export of scheduler events (needs the ``metrics`` extra: prometheus-client).

>>> from prometheus_client import CollectorRegistry
>>> from flowsched import InMemoryScheduler
>>> registry = CollectorRegistry()
>>> observer = PrometheusObserver(registry=registry)
>>> scheduler = InMemoryScheduler(observer=observer)
>>> observer.track_pending(scheduler.pending)
>>> registry.get_sample_value("flowsched_pending")
0.0

Metrics (``namespace`` defaults to ``flowsched``): counters ``<ns>_scheduled_total``,
``<ns>_fired_total``, ``<ns>_completed_total``, ``<ns>_failed_total``,
``<ns>_dead_lettered_total``, ``<ns>_late_completions_total`` (runs that completed after
their MongoDB lease ended; label ``kind``), ``<ns>_timed_out_total`` (runs past their
handler's time limit; label ``kind``) and ``<ns>_cancelled_total``; histogram
``<ns>_lateness_seconds`` (label ``kind``: fire time minus due time); gauge ``<ns>_pending``
(items scheduled, read from the scheduler at scrape time).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from flowsched.delivery import Observer
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "flowsched.metrics_prometheus needs prometheus-client: pip install 'flowsched[metrics]'"
    ) from exc

__all__ = ["LATENESS_BUCKETS", "PrometheusObserver"]

LATENESS_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
"""Seconds: sub-millisecond for the in-memory scheduler, seconds for a polling one."""


class PrometheusObserver(Observer):
    """An :class:`~flowsched.delivery.Observer` that feeds Prometheus metrics.

    Register one per scheduler (or give each its own ``namespace``/``registry``). Feed the
    pending gauge with :meth:`track_pending` once the scheduler exists."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        namespace: str = "flowsched",
        buckets: Sequence[float] = LATENESS_BUCKETS,
    ) -> None:
        registry = REGISTRY if registry is None else registry

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, ["kind"], namespace=namespace, registry=registry)

        scheduled = counter("scheduled", "Items scheduled (including replacements).")
        fired = counter("fired", "Deliveries started.")
        completed = counter("completed", "Deliveries whose handler returned.")
        failed = counter("failed", "Deliveries whose handler raised.")
        dead = counter("dead_lettered", "Items set aside after max_attempts.")
        late = counter("late_completions", "Runs that completed after their lease ended.")
        timed_out = counter("timed_out", "Runs past their handler's time limit.")
        lateness = Histogram(
            "lateness_seconds",
            "Fire time minus due time.",
            ["kind"],
            namespace=namespace,
            registry=registry,
            buckets=list(buckets),
        )
        # Children per kind built once: labels() costs more than the increment itself.
        self._scheduled = {k: scheduled.labels(k.value) for k in ScheduleKind}
        self._fired = {k: fired.labels(k.value) for k in ScheduleKind}
        self._completed = {k: completed.labels(k.value) for k in ScheduleKind}
        self._failed = {k: failed.labels(k.value) for k in ScheduleKind}
        self._dead = {k: dead.labels(k.value) for k in ScheduleKind}
        self._late = {k: late.labels(k.value) for k in ScheduleKind}
        self._timed_out = {k: timed_out.labels(k.value) for k in ScheduleKind}
        self._lateness = {k: lateness.labels(k.value) for k in ScheduleKind}
        self._cancelled = Counter(
            "cancelled", "Items cancelled.", namespace=namespace, registry=registry
        )
        self._pending = Gauge(
            "pending", "Items scheduled and not yet done.", namespace=namespace, registry=registry
        )

    def track_pending(self, pending: Callable[[], int]) -> None:
        """Read the pending gauge from ``pending()`` (e.g. ``scheduler.pending``) at scrape."""
        self._pending.set_function(lambda: float(pending()))

    def scheduled(self, item: ScheduleItem) -> None:
        self._scheduled[item.kind].inc()

    def cancelled(self, item_id: str) -> None:
        self._cancelled.inc()

    def fired(self, item: ScheduleItem, attempt: int, lateness: timedelta) -> None:
        self._fired[item.kind].inc()
        self._lateness[item.kind].observe(lateness.total_seconds())

    def completed(self, item: ScheduleItem, attempt: int) -> None:
        self._completed[item.kind].inc()

    def failed(self, item: ScheduleItem, attempt: int, error: str) -> None:
        self._failed[item.kind].inc()

    def dead_lettered(self, dead: DeadLetter) -> None:
        self._dead[dead.item.kind].inc()

    def late_completion(self, item: ScheduleItem, attempt: int, late: timedelta) -> None:
        self._late[item.kind].inc()

    def timed_out(self, item: ScheduleItem, attempt: int, elapsed: timedelta) -> None:
        self._timed_out[item.kind].inc()
