"""One scheduler node for the multi-process tests: ``python -m tests.mongo.node URI DB NODE``.

Subscribes a TIMER handler that records ``{item, node, attempt, generation}`` in the
``deliveries`` collection (then optionally sleeps, to have deliveries in flight, or holds
the GIL in a blocking C call (``--gil-seconds``), or - for an item whose id starts with
``--kill-prefix`` - kills its own process), starts the sweeper on ``timers``, prints
``ready`` and runs until SIGTERM (graceful close) or SIGKILL. ``--clock-offset`` runs the
scheduler on a wall clock that many seconds off (the record's ``at`` stays the true time).
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from pymongo import MongoClient

from flowsched import MongoScheduler, ScheduleItem, ScheduleKind, SystemClock
from flowsched.delivery import RedeliveryPolicy


class OffsetClock(SystemClock):
    """A wall clock ``offset`` seconds off the true time (a host whose NTP is broken)."""

    def __init__(self, offset: float) -> None:
        self.offset = timedelta(seconds=offset)

    def now(self) -> datetime:
        return super().now() + self.offset


def arguments() -> argparse.Namespace:
    """The command line both node scripts take."""
    parser = argparse.ArgumentParser()
    parser.add_argument("uri")
    parser.add_argument("db")
    parser.add_argument("node")
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--handler-seconds", type=float, default=0.0)
    parser.add_argument("--redelivery", type=float, default=0.5)
    parser.add_argument("--max-attempts", type=int, default=0)  # 0: no maximum
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--kill-prefix", default="")  # a handler for these ids kills -9 us
    parser.add_argument("--gil-seconds", type=int, default=0)  # C sleep holding the GIL
    parser.add_argument("--clock-offset", type=float, default=0.0)  # this node's clock error
    return parser.parse_args()


def main() -> None:
    args = arguments()
    logging.basicConfig(level=logging.WARNING, format=f"[{args.node}] %(levelname)s %(message)s")

    client: Any = MongoClient(args.uri, tz_aware=True, serverSelectionTimeoutMS=2000)
    database = client[args.db]
    deliveries = database["deliveries"]

    def record(item: ScheduleItem, attempt: int) -> None:
        deliveries.insert_one(
            {
                "item": item.id,
                "node": args.node,
                "attempt": attempt,
                "generation": item.generation,
                "at": time.time(),
                "due": item.due.timestamp(),
            }
        )
        if args.kill_prefix and item.id.startswith(args.kill_prefix):
            os.kill(os.getpid(), signal.SIGKILL)
        if args.handler_seconds:
            time.sleep(args.handler_seconds)
        if args.gil_seconds:
            ctypes.PyDLL(None).sleep(args.gil_seconds)  # PyDLL: the GIL stays held

    redelivery = RedeliveryPolicy(
        initial=timedelta(seconds=args.redelivery),
        maximum=timedelta(seconds=args.redelivery * 4),
        max_attempts=args.max_attempts or None,
    )
    scheduler = MongoScheduler(
        database["timers"],
        node_id=args.node,
        poll_interval=timedelta(seconds=args.poll),
        lease=timedelta(seconds=args.lease),
        redelivery=redelivery,
        op_timeout=timedelta(seconds=5),
        workers=args.workers,
        clock=OffsetClock(args.clock_offset),
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
