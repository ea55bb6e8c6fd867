"""Run by test_memory_hygiene.py in a fresh interpreter: prints RSS growth (MB) for one
workload, so one run's garbage cannot hide in, or inflate, another's figure."""

from __future__ import annotations

import gc
import sys
from datetime import UTC, datetime, timedelta

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind

START = datetime(2026, 1, 1, tzinfo=UTC)
COUNT = 1_000_000


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main(workload: str) -> None:
    clock = ManualClock(START)
    scheduler = InMemoryScheduler(clock=clock)
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    # One live timer due before all the others: lazy deletion alone never reaches them.
    scheduler.schedule(ScheduleItem("live", ScheduleKind.TIMER, START + timedelta(minutes=1)))
    due = START + timedelta(hours=1)
    for n in range(10_000):  # warm up allocator pools and caches before the baseline
        scheduler.schedule(ScheduleItem(f"warm-{n}", ScheduleKind.TIMER, due))
        scheduler.cancel(f"warm-{n}")
    gc.collect()
    baseline = rss_mb()
    if workload == "cancelled":
        for n in range(COUNT):
            item_id = f"timer-{n}"
            scheduler.schedule(ScheduleItem(item_id, ScheduleKind.TIMER, due))
            scheduler.cancel(item_id)
    elif workload == "replaced":
        for n in range(COUNT):
            scheduler.schedule(ScheduleItem("one", ScheduleKind.TIMER, due + timedelta(seconds=n)))
    else:
        raise SystemExit(f"unknown workload {workload!r}")
    gc.collect()
    print(f"{rss_mb() - baseline:.1f} {scheduler.pending()} {scheduler.store.heap_size()}")
    scheduler.close()


if __name__ == "__main__":
    main(sys.argv[1])
