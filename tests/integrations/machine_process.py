"""A process running a DurableMachine over MongoScheduler, for the restart and cluster tests:
``python -m tests.integrations.machine_process VERB URI DB [options]``.

The application's own model store is the ``orders`` collection: ``{_id, state, fires}``. The
machine's ``on_timeout`` (``expire``) records the call in ``calls`` and moves the stored order
from ``waiting`` to ``expired`` with one conditional write (``fires`` counts the writes that
took effect), then moves the model: how an application makes the effect of an at-least-once
timeout exactly once.

Verbs:

* ``arm``: enter ``--models`` orders into ``waiting`` (a ``--timeout`` s timeout), move the
  first ``--leave`` of them on to ``paid`` (their timers are cancelled), store them all, and
  exit without closing anything (``os._exit``), as a crash would.
* ``fire``: a new process on a ManualClock at ``--start``: advance ``--timeout`` - 1 s, then
  1 s, then 10 min, printing as JSON what fired after each step and when.
* ``node``: a cluster node on the system clock (``--lease``, ``--poll``): prints ``ready``
  and fires what is due until SIGTERM or SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from pymongo import MongoClient

from flowsched import ManualClock, MongoScheduler
from flowsched.integrations.transitions import DurableMachine

STATES: list[Any] = ["new", "waiting", "expired", "paid"]


class Order:
    def __init__(self, order_id: str, state: str, orders: Any, calls: Any, node: str) -> None:
        self.id = order_id
        self.state = state
        self._orders = orders
        self._calls = calls
        self._node = node

    def expire(self) -> None:
        done = self._orders.update_one(
            {"_id": self.id, "state": "waiting"},
            {"$set": {"state": "expired", "by": self._node}, "$inc": {"fires": 1}},
        )
        if done.modified_count == 0:  # on_timeout called again for an order already expired
            self._calls.insert_one({"model": self.id, "node": self._node, "repeat": True})
        else:
            self._calls.insert_one({"model": self.id, "node": self._node, "at": time.time()})
        self.to_expired()  # type: ignore[attr-defined]


def machine(scheduler: MongoScheduler, timeout: float, **options: Any) -> DurableMachine:
    states = [*STATES]
    states[1] = {"name": "waiting", "timeout": timeout, "on_timeout": "expire"}
    return DurableMachine(
        states=states, initial="new", scheduler=scheduler, name="Orders", **options
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("verb", choices=["arm", "fire", "node"])
    parser.add_argument("uri")
    parser.add_argument("db")
    parser.add_argument("--node", default="n1")
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--leave", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--start", default="2026-01-01T00:00:00+00:00")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--system-clock", action="store_true")
    args = parser.parse_args()

    client: Any = MongoClient(args.uri, tz_aware=True, serverSelectionTimeoutMS=5000)
    database = client[args.db]
    orders, calls = database["orders"], database["calls"]

    def load(order_id: str) -> Order | None:
        doc = orders.find_one({"_id": order_id})
        if doc is None:
            return None
        return Order(order_id, doc["state"], orders, calls, args.node)

    if args.verb == "arm":
        clock = None if args.system_clock else ManualClock(datetime.fromisoformat(args.start))
        scheduler = MongoScheduler(database["timers"], node_id=args.node, clock=clock)
        built = machine(scheduler, args.timeout)
        models = [Order(f"o-{n}", "new", orders, calls, args.node) for n in range(args.models)]
        leaving = {m.id for m in models[: args.leave]}
        # Stored first, as waiting: a timer may fire on another node before arming is over.
        orders.insert_many([{"_id": m.id, "state": "waiting", "fires": 0} for m in models])
        for model in models:
            built.add_model(model)

        def enter(model: Order) -> None:
            model.to_waiting()  # type: ignore[attr-defined]
            if model.id in leaving:
                model.to_paid()  # type: ignore[attr-defined]
                orders.update_one({"_id": model.id}, {"$set": {"state": "paid"}})

        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(enter, models))
        print(json.dumps({"armed": len(models), "left": len(leaving)}), flush=True)
        os._exit(0)  # no close: the process just ends

    if args.verb == "fire":
        start = datetime.fromisoformat(args.start)
        clock = ManualClock(start)
        fired_at: list[str] = []
        with MongoScheduler(database["timers"], node_id=args.node, clock=clock) as scheduler:

            def load_and_watch(order_id: str) -> Order | None:
                order = load(order_id)
                if order is not None:
                    fired_at.append(clock.now().isoformat())
                return order

            machine(scheduler, args.timeout, load_model=load_and_watch)
            steps = [timedelta(seconds=args.timeout - 1), timedelta(seconds=1)]
            steps.append(timedelta(minutes=10))
            for step in steps:
                clock.advance(step)
                record = {
                    "at": clock.now().isoformat(),
                    "calls": sorted(c["model"] for c in calls.find()),
                    "loaded_at": list(fired_at),
                }
                print(json.dumps(record), flush=True)
        return

    scheduler = MongoScheduler(
        database["timers"],
        node_id=args.node,
        poll_interval=timedelta(seconds=args.poll),
        lease=timedelta(seconds=args.lease),
        op_timeout=timedelta(seconds=5),
    )
    machine(scheduler, args.timeout, load_model=load)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    scheduler.start()
    print("ready", flush=True)
    while not stop.wait(0.2):
        pass
    scheduler.close()


if __name__ == "__main__":
    main()
