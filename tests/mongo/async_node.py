"""One ``AsyncMongoScheduler`` node for the multi-process tests:
``python -m tests.mongo.async_node URI DB NODE`` - the arguments and the records of
``tests/mongo/node.py`` (its ``MongoScheduler`` twin), with an ``async def`` handler that
records each delivery in ``deliveries`` through pymongo's ``AsyncMongoClient``."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from datetime import timedelta
from typing import Any

from pymongo import AsyncMongoClient

from flowsched import AsyncMongoScheduler, ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy
from tests.mongo.node import arguments


async def main() -> None:
    args = arguments()
    logging.basicConfig(level=logging.WARNING, format=f"[{args.node}] %(levelname)s %(message)s")
    client: Any = AsyncMongoClient(args.uri, tz_aware=True, serverSelectionTimeoutMS=2000)
    database = client[args.db]
    deliveries = database["deliveries"]

    async def record(item: ScheduleItem, attempt: int) -> None:
        await deliveries.insert_one(
            {
                "item": item.id,
                "node": args.node,
                "attempt": attempt,
                "generation": item.generation,
                "at": time.time(),
            }
        )
        if args.kill_prefix and item.id.startswith(args.kill_prefix):
            os.kill(os.getpid(), signal.SIGKILL)
        if args.handler_seconds:
            await asyncio.sleep(args.handler_seconds)

    redelivery = RedeliveryPolicy(
        initial=timedelta(seconds=args.redelivery),
        maximum=timedelta(seconds=args.redelivery * 4),
        max_attempts=args.max_attempts or None,
    )
    scheduler = AsyncMongoScheduler(
        database["timers"],
        node_id=args.node,
        poll_interval=timedelta(seconds=args.poll),
        lease=timedelta(seconds=args.lease),
        redelivery=redelivery,
        op_timeout=timedelta(seconds=5),
        concurrency=max(args.workers, 50),
    )
    scheduler.subscribe(ScheduleKind.TIMER, record)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with scheduler:
        print("ready", flush=True)
        await stop.wait()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
