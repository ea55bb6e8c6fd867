"""The APScheduler 4 peer of bench/async_bench.py (``apscheduler==4.0.0a6``, async core).

Runs in its own virtualenv (bench/.venv-apscheduler4, made by ``make bench``), so it imports
nothing of flowsched; async_bench.py starts it as a subprocess and reads one JSON line:

    bench/.venv-apscheduler4/bin/python bench/apscheduler4_peer.py schedule 20000 2000
    bench/.venv-apscheduler4/bin/python bench/apscheduler4_peer.py lateness 10000 2.0

* ``schedule N WARMUP``: ``await scheduler.add_schedule(job, DateTrigger(run_time))`` N times
  on an ``AsyncScheduler`` over a ``MemoryDataStore`` (the trigger built in the loop, as
  flowsched's item is; due an hour ahead, nothing fires): per-call microseconds.
* ``lateness N SPAN``: the scheduler started in the background; N one-shot schedules due
  uniformly over SPAN seconds (from 3 s ahead: after all are scheduled), each job an
  ``async def`` that records its lateness (fire time minus due time): p50, p99, max, and
  how many fired.

The garbage collector stays on (as in every bench here).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import UTC, datetime, timedelta

from apscheduler import AsyncScheduler
from apscheduler.datastores.memory import MemoryDataStore
from apscheduler.triggers.date import DateTrigger

LATENESS: list[float] = []
HEAD_START = 3.0
"""Seconds between the start of scheduling and the first due time (scheduling 10,000 must
end before the window opens, for both contenders)."""


async def job(due: float) -> None:
    LATENESS.append(time.time() - due)


async def schedule(n: int, warmup: int) -> dict[str, float]:
    async with AsyncScheduler(MemoryDataStore()) as scheduler:
        later = datetime.now(UTC) + timedelta(hours=1)
        for i in range(warmup):
            await scheduler.add_schedule(job, DateTrigger(later), id=f"w{i}", kwargs={"due": 0})
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            run_time = later + timedelta(microseconds=i)
            await scheduler.add_schedule(
                job, DateTrigger(run_time), id=f"s{i}", kwargs={"due": 0.0}
            )
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "n": n,
        "seconds": seconds,
        "per_call_us": seconds / n * 1e6,
        "cpu_per_call_us": cpu / n * 1e6,
    }


async def lateness(n: int, span: float) -> dict[str, float]:
    async with AsyncScheduler(MemoryDataStore()) as scheduler:
        await scheduler.start_in_background()
        first = time.time() + HEAD_START
        for i in range(n):
            due = first + span * i / n
            when = datetime.fromtimestamp(due, UTC)
            await scheduler.add_schedule(job, DateTrigger(when), id=f"t{i}", kwargs={"due": due})
        deadline = time.monotonic() + span + 60
        while len(LATENESS) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await scheduler.stop()
    ordered = sorted(LATENESS)
    return {
        "n": n,
        "fired": len(ordered),
        "p50": ordered[len(ordered) // 2] if ordered else float("nan"),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        if ordered
        else float("nan"),
        "max": ordered[-1] if ordered else float("nan"),
    }


def main() -> None:
    mode = sys.argv[1]
    if mode == "schedule":
        result = asyncio.run(schedule(int(sys.argv[2]), int(sys.argv[3])))
    elif mode == "lateness":
        result = asyncio.run(lateness(int(sys.argv[2]), float(sys.argv[3])))
    else:
        raise SystemExit(f"unknown mode {mode!r}: schedule or lateness")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
