"""The APScheduler 4 peer of bench/async_mongo_bench.py (``apscheduler==4.0.0a6``,
``AsyncScheduler`` on ``MongoDBDataStore``), in its own virtualenv (bench/.venv-apscheduler4):

    bench/.venv-apscheduler4/bin/python bench/apscheduler4_mongo_peer.py URI FIRE BACKGROUND [LIMIT]

A fresh database: BACKGROUND schedules due an hour ahead, then FIRE one-shot schedules due
uniformly over 1 s (from a lead long enough to add them all), each job an ``async def``
recording when it ran; the scheduler runs until all have fired. One JSON line: fired, lost,
duplicates, p50/p99 lateness, fired per second (fired / (last fire - first due)) and the
MongoDB commands (round trips, pymongo command monitoring) per fired job. After LIMIT
seconds (default 120) it stops and reports what fired by then (``finished`` false; the
unfired ones count as ``lost`` and the rate is over what fired).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler import AsyncScheduler
from apscheduler.datastores.mongodb import MongoDBDataStore
from apscheduler.triggers.date import DateTrigger
from pymongo import MongoClient, monitoring

RAN: dict[str, float] = {}
RUNS = {"n": 0}
DONE = asyncio.Event()
EXPECTED = {"n": 0}


class Commands(monitoring.CommandListener):
    def __init__(self) -> None:
        self.count = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.count += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def job(job_id: str, due: float) -> None:
    RUNS["n"] += 1
    RAN.setdefault(job_id, time.time() - due)
    RAN[f"@{job_id}"] = time.time()
    if len(RAN) // 2 >= EXPECTED["n"]:
        DONE.set()


async def main(uri: str, fire: int, background: int, limit: float) -> dict[str, float]:
    EXPECTED["n"] = fire
    commands = Commands()
    client: MongoClient[Any] = MongoClient(uri, tz_aware=True, event_listeners=[commands])
    name = f"fs_bench_aps4_{uuid.uuid4().hex[:8]}"
    try:
        async with AsyncScheduler(MongoDBDataStore(client, database=name)) as scheduler:
            later = datetime.now(UTC) + timedelta(hours=1)
            for n in range(background):
                trigger = DateTrigger(later + timedelta(microseconds=n))
                await scheduler.add_schedule(job, trigger, id=f"bg-{n}", args=[f"bg-{n}", 0.0])
            probe = time.perf_counter()
            for n in range(20):
                await scheduler.add_schedule(job, DateTrigger(later), id=f"probe-{n}", args=["", 0])
            lead = (time.perf_counter() - probe) / 20 * fire * 1.5 + 1.0
            first = datetime.now(UTC) + timedelta(seconds=lead)
            dues = [first + timedelta(seconds=n / fire) for n in range(fire)]
            for n, due in enumerate(dues):
                trigger = DateTrigger(due)
                args = [f"fire-{n}", due.timestamp()]
                await scheduler.add_schedule(job, trigger, id=f"fire-{n}", args=args)
            await scheduler.start_in_background()
            wait = max(0.0, (first - datetime.now(UTC)).total_seconds())
            await asyncio.sleep(wait)
            commands.count = 0
            finished = True
            try:
                await asyncio.wait_for(DONE.wait(), limit)
            except TimeoutError:
                finished = False
            round_trips = commands.count
            await scheduler.stop()
    finally:
        client.drop_database(name)
        client.close()
    late = sorted(v for k, v in RAN.items() if k.startswith("fire-"))
    last = max(v for k, v in RAN.items() if k.startswith("@fire-"))
    return {
        "finished": finished,
        "fired": len(late),
        "lost": fire - len(late),
        "duplicates": RUNS["n"] - len(late),
        "p50_lateness_s": round(statistics.median(late), 3),
        "p99_lateness_s": round(late[min(len(late) - 1, int(len(late) * 0.99))], 3),
        "fired_per_s": round(len(late) / (last - dues[0].timestamp()), 1),
        "round_trips_per_fired": round(round_trips / len(late), 4),
    }


if __name__ == "__main__":
    uri, fire, background = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    limit = float(sys.argv[4]) if len(sys.argv) > 4 else 120.0
    print(json.dumps(asyncio.run(main(uri, fire, background, limit))))
