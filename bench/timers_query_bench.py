"""What ``timers()`` costs on 100,000 stored timers, against a raw indexed ``find().limit(50)``.

    FLOWSCHED_MONGO_URI=... .venv/bin/python bench/timers_query_bench.py

On the wire server (``FLOWSCHED_MONGO_URI``), in a database of its own (dropped afterwards):
the indexes a ``MongoScheduler`` makes (its ``ensure_indexes``), then ``TIMERS_BENCH_SIZE``
(100,000) timers written with ``insert_many`` in the scheduler's own document format
(:func:`flowsched.mongo.documents.item_document`), half ``TIMER``, half ``ACTION_TIMEOUT``,
due one second apart.

For each filter (none; ``kind="TIMER"``):

* the first page of 50 through ``MongoScheduler.timers()`` against the raw
  ``find(filter).sort([("due", 1), ("_id", 1)]).limit(50)`` of the same filter (the
  planner picks the ``due_id`` index), on the same client: medians of
  ``TIMERS_BENCH_ROUNDS`` (5) interleaved rounds, and the ratio (acceptance: <= 3x);
* the last page (``after=`` the cursor of the 51st-from-last timer) the same way, against
  the raw ``find`` of the filter and ``due > <that timer's due>``, and its ratio to the first
  page (acceptance: about 1);
* ``explain`` of both queries: the stages of the winning plan.

And the peak Python memory (``tracemalloc``) of iterating every timer with
``iter_timers()`` (each record dropped as it comes), against ``list(collection.find())``.

Prints a table and writes ``bench/results/timers_query.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

URI = os.environ.get(
    "FLOWSCHED_MONGO_URI", "mongodb://127.0.0.1:27017/?directConnection=true&retryWrites=false"
)
SIZE = int(os.environ.get("TIMERS_BENCH_SIZE", "100000"))
ROUNDS = int(os.environ.get("TIMERS_BENCH_ROUNDS", "5"))
PAGE = 50
BATCH = 10_000
START = datetime(2030, 1, 1, tzinfo=UTC)
RESULTS = Path(__file__).parent / "results" / "timers_query.json"
SORT = [("due", 1), ("_id", 1)]


def seed(items: Any, scheduler: Any) -> float:
    """Store :data:`SIZE` timers as the scheduler writes them; seconds the inserts took."""
    from flowsched.mongo.documents import item_document, new_generation
    from flowsched.records import ScheduleItem, ScheduleKind

    scheduler.exists("warm-up")  # makes the scheduler's indexes (due_id among them)
    kinds = (ScheduleKind.TIMER, ScheduleKind.ACTION_TIMEOUT)
    began = time.perf_counter()
    for first in range(0, SIZE, BATCH):
        batch = []
        for n in range(first, min(first + BATCH, SIZE)):
            due = START + timedelta(seconds=n)
            item = ScheduleItem(f"b-{n:06d}", kinds[n % 2], due, flow_id=f"flow-{n % 500:03d}")
            batch.append(item_document(item, new_generation()))
        items.insert_many(batch, ordered=False)
    return time.perf_counter() - began


def interleaved(ours: Callable[[], object], raw: Callable[[], object]) -> tuple[float, float]:
    """Medians of ``ours`` and ``raw``, measured round by round in turn (after one warm-up)."""
    ours(), raw()
    mine, theirs = [], []
    for _ in range(ROUNDS):
        mine.append(median_ms_once(ours))
        theirs.append(median_ms_once(raw))
    return statistics.median(mine), statistics.median(theirs)


def median_ms_once(run: Callable[[], object]) -> float:
    began = time.perf_counter()
    run()
    return (time.perf_counter() - began) * 1000


def pages(scheduler: Any, items: Any, label: str, filters: dict[str, Any]) -> dict[str, Any]:
    """First and last page of ``filters`` through ``timers()`` and raw."""
    from flowsched.mongo.timer_query import later_query, timer_query
    from flowsched.steering_query import encode_cursor, timer_filters

    raw_filter = timer_query(timer_filters(**filters))
    kind = filters.get("kind")
    matching = [n for n in range(SIZE) if kind in (None, ("TIMER", "ACTION_TIMEOUT")[n % 2])]
    cut = matching[-PAGE - 1]
    cursor = encode_cursor(START + timedelta(seconds=cut), f"b-{cut:06d}")
    last_filter = later_query(timer_filters(**filters), START + timedelta(seconds=cut))

    first = scheduler.timers(limit=PAGE, **filters)
    last = scheduler.timers(limit=PAGE, after=cursor, **filters)
    assert len(first) == PAGE and first.next is not None, "first page"
    assert len(last) == PAGE and last.next is None, "last page"
    assert last.items[-1].id == f"b-{matching[-1]:06d}"

    ours_first, raw_first = interleaved(
        lambda: scheduler.timers(limit=PAGE, **filters),
        lambda: list(items.find(raw_filter).sort(SORT).limit(PAGE)),
    )
    ours_last, raw_last = interleaved(
        lambda: scheduler.timers(limit=PAGE, after=cursor, **filters),
        lambda: list(items.find(last_filter).sort(SORT).limit(PAGE)),
    )
    return {
        "filter": label,
        "first_ms": round(ours_first, 2),
        "raw_first_ms": round(raw_first, 2),
        "first_ratio": round(ours_first / raw_first, 2),
        "last_ms": round(ours_last, 2),
        "raw_last_ms": round(raw_last, 2),
        "last_ratio": round(ours_last / raw_last, 2),
        "last_over_first": round(ours_last / ours_first, 2),
        "plans": [plan(items, raw_filter), plan(items, last_filter)],
    }


def plan(items: Any, query: dict[str, Any]) -> str:
    """The winning plan's stages, outermost first (index names beside IXSCANs)."""
    explained = items.find(query).sort(SORT).limit(PAGE + 1).explain()
    stage: dict[str, Any] = explained["queryPlanner"]["winningPlan"]
    found = []
    while stage:
        name = str(stage.get("stage"))
        found.append(f"{name}({stage['indexName']})" if "indexName" in stage else name)
        stage = stage.get("inputStage") or {}
    return " <- ".join(found)


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def peak_kib(run: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 1024
    finally:
        tracemalloc.stop()


def memory(scheduler: Any, items: Any) -> dict[str, Any]:
    seen = 0

    def iterate() -> None:
        nonlocal seen
        for _ in scheduler.iter_timers():
            seen += 1

    began = time.perf_counter()
    iterated = peak_kib(iterate)
    took = time.perf_counter() - began
    assert seen == SIZE, seen
    progress(f"iter_timers over {seen}: {took:.1f} s")
    listed = peak_kib(lambda: len(list(items.find())))
    return {
        "iter_timers_peak_kib": round(iterated),
        "iter_timers_s": round(took, 1),
        "list_find_all_peak_kib": round(listed),
    }


def main() -> None:
    import pymongo

    from flowsched import ManualClock, MongoScheduler

    client: Any = pymongo.MongoClient(URI, tz_aware=True)
    name = f"fs_timers_bench_{uuid.uuid4().hex[:8]}"
    try:
        items = client[name]["timers"]
        scheduler = MongoScheduler(
            items, node_id="bench", clock=ManualClock(START), op_timeout=timedelta(minutes=5)
        )
        inserted = seed(items, scheduler)
        progress(f"seeded in {inserted:.1f} s")
        rows = [
            pages(scheduler, items, "none", {}),
            pages(scheduler, items, "kind=TIMER", {"kind": "TIMER"}),
        ]
        progress(f"pages: {rows}")
        figures: dict[str, Any] = {"size": SIZE, "rounds": ROUNDS, "insert_s": round(inserted, 1)}
        figures["pages"] = rows
        figures["memory"] = memory(scheduler, items)
    finally:
        client.drop_database(name)
        client.close()
    print(f"{SIZE} timers stored in {figures['insert_s']} s; medians of {ROUNDS} (ms)")
    print(f"{'filter':<12} {'first':>8} {'raw':>8} {'ratio':>6} {'last':>8} {'raw':>8} "
          f"{'ratio':>6} {'last/first':>10}")  # fmt: skip
    for row in rows:
        print(
            f"{row['filter']:<12} {row['first_ms']:>8} {row['raw_first_ms']:>8} "
            f"{row['first_ratio']:>6} {row['last_ms']:>8} {row['raw_last_ms']:>8} "
            f"{row['last_ratio']:>6} {row['last_over_first']:>10}  {' | '.join(row['plans'])}"
        )
    print(f"peak memory: iter_timers over all {figures['memory']['iter_timers_peak_kib']} KiB, "
          f"list(find()) {figures['memory']['list_find_all_peak_kib']} KiB")  # fmt: skip
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
