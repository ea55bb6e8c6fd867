"""What one ``MongoScheduler.schedule()`` costs its caller: wall time and commands, one run.

    PYTHONPATH=TREE python bench/mongo_schedule_cost.py URI [CALLS]

Schedules CALLS (400) fresh ids due in an hour on a ``MongoScheduler`` that is not started
(nothing else talks to the server), in a fresh database, building each item included, and
prints one JSON line: the tree imported (``PYTHONPATH`` chooses it, so another commit runs
through the same script: ``git archive COMMIT | tar -x -C DIR``), the median call in ms and the
commands sent per call (pymongo command monitoring; the first call's index creation is left
out). Alternate trees round by round and compare medians of the same run.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import mongo_bench as mb
from pymongo import MongoClient

import flowsched
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind


def main() -> int:
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    calls = int(sys.argv[2]) if len(sys.argv) == 3 else 400
    count = mb.Commands()  # the bench's own round-trip count
    client: MongoClient[dict[str, Any]] = MongoClient(
        sys.argv[1], tz_aware=True, event_listeners=[count]
    )
    database = client[f"fs_bench_schedule_{uuid.uuid4().hex[:8]}"]
    try:
        scheduler = MongoScheduler(database["timers"])
        scheduler.exists("warm-up")  # the indexes, once
        due = datetime.now(UTC) + timedelta(hours=1)
        times = []
        count.take()
        for n in range(calls):
            start = time.perf_counter()
            scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, due))
            times.append(time.perf_counter() - start)
        tree = str(flowsched.__file__).rsplit("/flowsched/", 1)[0]
        median_ms = round(1000 * statistics.median(times), 3)
        print(json.dumps({"tree": tree, "median_ms": median_ms, "commands": count.take() / calls}))
    finally:
        client.drop_database(database.name)
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
