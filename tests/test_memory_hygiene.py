"""The in-memory scheduler's memory follows its live timers: cancelled and replaced forms
are compacted out of its store's heap instead of waiting there until their old due time."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind
from flowsched.port import kind_route
from flowsched.store import MemoryTimerStore
from flowsched.store.due_index import COMPACT_AT

TIMER = ScheduleKind.TIMER
ROUTE = kind_route(TIMER)
START = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(days=1)
PROBE = Path(__file__).with_name("memory_rss_probe.py")


def stored(store: MemoryTimerStore, item_id: str, due: datetime) -> ScheduleItem:
    return store.put(ScheduleItem(item_id, TIMER, due))


def claim(store: MemoryTimerStore, routes: set[str], limit: int = 1) -> list[ScheduleItem]:
    return [c.item for c in store.claim_due(routes, "n", LEASE, limit)]


def test_cancelled_entries_do_not_pile_up_behind_an_earlier_live_timer() -> None:
    store = MemoryTimerStore(ManualClock(START + timedelta(hours=2)))
    stored(store, "live", START)
    for n in range(10 * COMPACT_AT):
        stored(store, f"t-{n}", START + timedelta(hours=1))
        store.remove(f"t-{n}")
    assert store.heap_size() <= 2 * COMPACT_AT
    assert [item.id for item in claim(store, {ROUTE})] == ["live"]
    assert claim(store, {ROUTE}) == []


def test_one_id_replaced_many_times_keeps_a_bounded_heap_and_fires_its_last_form() -> None:
    store = MemoryTimerStore(ManualClock(START + timedelta(days=1)))
    for n in range(10 * COMPACT_AT):
        last = stored(store, "one", START + timedelta(seconds=n))
    assert store.heap_size() <= 2 * COMPACT_AT
    assert claim(store, {ROUTE}) == [last]
    assert claim(store, {ROUTE}) == []


def test_compaction_does_not_put_back_an_item_being_delivered_or_parked() -> None:
    clock = ManualClock(START)
    store = MemoryTimerStore(clock)
    running = stored(store, "running", START)
    stored(store, "parked", START)
    stored(store, "waiting", START + timedelta(minutes=1))
    assert claim(store, {ROUTE}) == [running]
    assert claim(store, {"elsewhere"}) == []  # no handler for TIMER: "parked" is set aside
    for n in range(4 * COMPACT_AT):  # enough churn to compact several times
        stored(store, f"churn-{n}", START + timedelta(hours=2))
        store.remove(f"churn-{n}")
    clock.advance(timedelta(minutes=1))
    assert claim(store, {ROUTE}, 10) == [store.get("parked"), store.get("waiting")]
    clock.advance(timedelta(hours=1))
    assert claim(store, {ROUTE}) == []


def test_a_scheduler_with_churn_still_fires_in_due_order() -> None:
    clock = ManualClock(START)
    scheduler = InMemoryScheduler(clock=clock)
    fired: list[str] = []
    scheduler.subscribe(TIMER, lambda item, attempt: fired.append(item.id))
    for n in range(3 * COMPACT_AT):
        scheduler.schedule(ScheduleItem(f"t-{n}", TIMER, START + timedelta(seconds=n % 7)))
        if n % 3:
            scheduler.cancel(f"t-{n}")
    clock.advance(timedelta(seconds=10))
    expected = sorted((n % 7, n) for n in range(3 * COMPACT_AT) if not n % 3)
    assert fired == [f"t-{n}" for _, n in expected]


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["cancelled", "replaced"])
def test_rss_of_a_million_cancelled_or_replaced_timers_stays_near_the_baseline(
    workload: str,
) -> None:
    run = subprocess.run(
        [sys.executable, str(PROBE), workload],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    growth_mb, pending, heap = run.stdout.split()
    assert float(growth_mb) < 60, run.stdout
    assert int(pending) <= 2 and int(heap) <= 2 * COMPACT_AT + 2
