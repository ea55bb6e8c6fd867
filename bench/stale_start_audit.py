"""Stale starts with idle workers (issue 37's audit), on the wire server.

    python bench/stale_start_audit.py [SECONDS]     # needs FLOWSCHED_MONGO_URI

Three threaded nodes (``MongoScheduler``, 8 workers, one process, so one monotonic clock)
serve one collection; a writer replaces (70 %) or cancels (30 %) one of 5 items every
10-30 ms, each form due at once. A start of a form after the replace or cancel (True) that
superseded it had *returned* is stale. Prints one JSON line: starts, stale, and how long
after the return each stale start came (ms).
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import MongoClient

from flowsched import MongoScheduler, ScheduleItem, ScheduleKind

ITEMS = 5
TIMER = ScheduleKind.TIMER


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    client: Any = MongoClient(os.environ["FLOWSCHED_MONGO_URI"], tz_aware=True)
    name = f"fs_audit_{uuid.uuid4().hex[:8]}"
    collection = client[name]["timers"]
    starts: list[tuple[str, Any, float]] = []
    lock = threading.Lock()

    def handler(item: ScheduleItem, attempt: int) -> None:
        at = time.monotonic()
        with lock:
            starts.append((item.id, (item.payload or {}).get("v"), at))

    poll = timedelta(milliseconds=200)
    nodes = [
        MongoScheduler(collection, node_id=f"n{i}", workers=8, poll_interval=poll) for i in range(3)
    ]
    for node in nodes:
        node.subscribe(TIMER, handler)
    writer = MongoScheduler(collection, node_id="writer")
    superseded: dict[tuple[str, int], float] = {}  # form -> when its successor returned
    current: dict[str, int] = {}
    rng = random.Random(1)
    try:
        for node in nodes:
            node.start()
        time.sleep(1.0)
        end = time.monotonic() + seconds
        version = 0
        while time.monotonic() < end:
            item_id = f"x-{rng.randrange(ITEMS)}"
            version += 1
            old = current.get(item_id)
            if old is not None and rng.random() < 0.3:
                if writer.cancel(item_id):
                    superseded[(item_id, old)] = time.monotonic()
                    current.pop(item_id)
            else:
                form = ScheduleItem(item_id, TIMER, datetime.now(UTC), payload={"v": version})
                writer.schedule(form)
                if old is not None:
                    superseded[(item_id, old)] = time.monotonic()
                current[item_id] = version
            time.sleep(rng.uniform(0.010, 0.030))
        time.sleep(1.0)
    finally:
        for node in nodes:
            node.close()
        writer.close()
        client.drop_database(name)
        client.close()
    late = sorted(
        round((at - superseded[(i, v)]) * 1e3, 2)
        for i, v, at in starts
        if (i, v) in superseded and at > superseded[(i, v)]
    )
    print(json.dumps({"starts": len(starts), "stale": len(late), "stale_ms": late}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
