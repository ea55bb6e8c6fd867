"""A node serving some named handlers and some flows, for the routing tests:
``python -m tests.mongo.route_node URI DB NODE --handlers alpha,beta --flows FA,FB``.

Each named handler records ``{item, node, handler, attempt}`` in ``deliveries``; each flow
(``waiting_flow``: its action is never answered, so its 2 s action timeout fires) runs in a
FlowDomain on this node whose listener records every fired timer as ``{flow_id, flow, node}``
in ``fired``. Instances live in ``instances``. Prints ``ready`` once started; SIGTERM closes.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from datetime import timedelta
from typing import Any

from pymongo import MongoClient

from flowsched import MongoScheduler, ScheduleItem, SchedulingConfig
from flowsched.flow import ActionTimeoutEvent, Flow, FlowDomain
from flowsched.flow.timeline import Happened, TimelineEntry
from flowsched.mongo.flow_store import MongoFlowStore

CONF = "Any.Waiting.Ask.timeout-duration = 2s"


def waiting_flow(name: str) -> Flow:
    return (
        Flow(name)
        .initial("Waiting", invokes="Ask")
        .terminal("TimedOut")
        .on(ActionTimeoutEvent, in_state="Waiting", action="Ask", go_to="TimedOut")
    )


def flow_domain(scheduler: MongoScheduler, database: Any, flows: list[str], node: str) -> Any:
    fired = database["fired"]

    def record(entry: TimelineEntry) -> None:
        if entry.what is Happened.FIRED:
            fired.insert_one({"flow_id": entry.flow_id, "flow": entry.flow, "node": node})

    builder = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_flow_store(MongoFlowStore(database["instances"]))
        .with_action_adapter("Ask", lambda request: None)
        .with_listener(record)
    )
    for name in flows:
        builder = builder.with_flow(waiting_flow(name))
    return builder.build()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("uri")
    parser.add_argument("db")
    parser.add_argument("node")
    parser.add_argument("--handlers", default="")
    parser.add_argument("--flows", default="")
    parser.add_argument("--poll", type=float, default=0.2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format=f"[{args.node}] %(levelname)s %(message)s")

    client: Any = MongoClient(args.uri, tz_aware=True, serverSelectionTimeoutMS=5000)
    database = client[args.db]
    deliveries = database["deliveries"]
    scheduler = MongoScheduler(
        database["timers"],
        node_id=args.node,
        poll_interval=timedelta(seconds=args.poll),
        op_timeout=timedelta(seconds=10),
    )

    def recorder(name: str) -> Any:
        def record(item: ScheduleItem, attempt: int) -> None:
            deliveries.insert_one(
                {"item": item.id, "node": args.node, "handler": name, "attempt": attempt}
            )

        return record

    for name in filter(None, args.handlers.split(",")):
        scheduler.register(name, recorder(name))
    flows = [name for name in args.flows.split(",") if name]
    if flows:
        flow_domain(scheduler, database, flows, args.node)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    scheduler.start()
    print("ready", flush=True)
    while not stop.wait(0.2):
        pass
    scheduler.close()
    client.close()


if __name__ == "__main__":
    main()
