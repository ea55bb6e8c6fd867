"""A ticking node for the multi-process recurring test: ``python -m tests.mongo.tick_node URI
DB NODE``.

Subscribes a TIMER handler that records every tick as ``{slot, previous, node, at}`` in the
``ticks`` collection (``at``: this host's wall clock when the handler started, so records of
all nodes on one host sort in the order ticks were applied), starts the sweeper on ``timers``,
prints ``ready`` and runs until SIGTERM (graceful close).

``--freeze-on-first-tick``: the first tick records ``{frozen: slot}`` in ``events`` and stops
the whole process (SIGSTOP: no thread runs, the lease is not renewed) until SIGCONT, then
finishes: a node stalled mid-tick past its lease.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import MongoClient

from flowsched import MongoScheduler, ScheduleItem, ScheduleKind


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("uri")
    parser.add_argument("db")
    parser.add_argument("node")
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--handler-seconds", type=float, default=0.0)
    parser.add_argument("--freeze-on-first-tick", type=float, default=0.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format=f"[{args.node}] %(levelname)s %(message)s")

    client: Any = MongoClient(args.uri, tz_aware=True, serverSelectionTimeoutMS=2000)
    database = client[args.db]
    ticks = database["ticks"]
    frozen: list[datetime] = []

    def record(item: ScheduleItem, attempt: int) -> None:
        ran_at = datetime.now(UTC)
        if args.freeze_on_first_tick and not frozen:
            frozen.append(item.due)
            database["events"].insert_one({"frozen": item.due, "node": args.node})
            os.kill(os.getpid(), signal.SIGSTOP)
        if args.handler_seconds:
            time.sleep(args.handler_seconds)
        ticks.insert_one(
            {"slot": item.due, "previous": item.previous, "node": args.node, "at": ran_at}
        )

    scheduler = MongoScheduler(
        database["timers"],
        node_id=args.node,
        poll_interval=timedelta(seconds=args.poll),
        lease=timedelta(seconds=args.lease),
        op_timeout=timedelta(seconds=5),
    )
    scheduler.subscribe(ScheduleKind.TIMER, record)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    scheduler.start()
    print("ready", flush=True)
    while not stop.wait(0.5):
        pass
    scheduler.close()
    client.close()


if __name__ == "__main__":
    main()
