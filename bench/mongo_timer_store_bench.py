"""The node core over the MongoDB timer stores against the schedulers they are to replace
(wire server, same runs).

    PYTHONPATH=. python bench/mongo_timer_store_bench.py BASE_DIR   # BASE_DIR: a checkout
                                                                   # of the base commit

Contenders, each run a fresh process, the four taking turns (rotated each round), RUNS
rounds (default 3), medians:

* ``old-sync``: ``MongoScheduler`` of BASE_DIR (8 worker threads, batch 100);
* ``node-sync``: ``NodeScheduler(MongoTimerStore(collection))`` of this checkout (the same);
* ``old-async``: ``AsyncMongoScheduler`` of BASE_DIR (batch 100, its default concurrency
  100, ``async def`` handler);
* ``node-async``: ``AsyncNodeScheduler(AsyncMongoTimerStore(collection))`` (workers 100,
  batch 100, ``async def`` handler).

The method of bench/async_mongo_bench.py: FIRE timers due within 1 s in a fresh database
that also holds BACKGROUND timers an hour ahead; fire rate = fired / (last fire - first
due); round trips = commands the contender's client sent (pymongo command monitoring)
from the node's start until every timer fired and settled, per fired timer.
Prints one JSON line per run and a table of medians and per-round ratios.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mongo_bench as mb
from pymongo import AsyncMongoClient

from flowsched import ScheduleItem, ScheduleKind

HERE = Path(__file__).resolve().parent
RUNS = int(os.environ.get("FLOWSCHED_BENCH_RUNS", 3))
FIRE = int(os.environ.get("FLOWSCHED_BENCH_FIRE", 2000))
BACKGROUND = int(os.environ.get("FLOWSCHED_BENCH_BACKGROUND", 1000))
BATCH = 100
CONTENDERS = tuple(
    os.environ.get("FLOWSCHED_BENCH_CONTENDERS", "old-sync,node-sync,old-async,node-async").split(
        ","
    )
)
"""``node-sync-confirm`` / ``node-async-confirm`` (set them here): the node with the store's
``claim_started`` hidden, so it claims a batch, queues it and confirms each start."""
TIMER = ScheduleKind.TIMER
mb.FIRE = FIRE


def later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


class CallStats:
    """Per store method: calls, claims or settlements passed, seconds spent (the store's
    calls are wrapped: a diagnosis of where a node's round trips go)."""

    def __init__(self, store: Any, awaited: bool) -> None:
        self.calls: dict[str, list[float]] = {}
        names = ("claim_due", "claim_started", "confirm_start", "renew", "release", "settle")
        for name in (*names, "next_due"):
            if callable(getattr(store, name, None)):
                setattr(store, name, self._wrap(name, getattr(store, name), awaited))

    def _wrap(self, name: str, method: Any, awaited: bool) -> Any:
        def sized(args: tuple[Any, ...], result: Any = None) -> int:
            if name.startswith("claim_"):  # claims taken
                return len(result) if isinstance(result, list) else 0
            first = args[0] if args else None
            return len(first) if isinstance(first, list | tuple) else 0

        def account(size: int, spent: float) -> None:
            entry = self.calls.setdefault(name, [0, 0, 0.0])
            entry[0] += 1
            entry[1] += size
            entry[2] += spent

        if awaited:

            async def call_async(*args: Any, **kwargs: Any) -> Any:
                began, result = time.perf_counter(), None
                try:
                    result = await method(*args, **kwargs)
                    return result
                finally:
                    account(sized(args, result), time.perf_counter() - began)

            return call_async

        def call(*args: Any, **kwargs: Any) -> Any:
            began, result = time.perf_counter(), None
            try:
                result = method(*args, **kwargs)
                return result
            finally:
                account(sized(args, result), time.perf_counter() - began)

        return call

    def summary(self) -> dict[str, Any]:
        return {
            name: {"calls": c, "mean_size": round(n / c, 1), "ms_each": round(t / c * 1e3, 1)}
            for name, (c, n, t) in self.calls.items()
        }


def run_sync(uri: str, contender: str) -> dict[str, Any]:
    commands = mb.Commands()
    stats: Any = None
    with mb.database(uri, commands) as db:
        if contender == "old-sync":
            from flowsched import MongoScheduler

            node: Any = MongoScheduler(db["timers"], batch_size=BATCH, workers=8)
        else:
            from flowsched.mongo import MongoTimerStore
            from flowsched.node.scheduler import NodeScheduler

            store = MongoTimerStore(db["timers"])
            if contender.endswith("-confirm"):
                store.claim_started = None  # type: ignore[method-assign,assignment]
            stats = CallStats(store, awaited=False)
            node = NodeScheduler(store, batch_size=BATCH, workers=8)
        for n in range(BACKGROUND):
            node.schedule(ScheduleItem(f"bg-{n}", TIMER, later()))
        firings = mb.Firings(FIRE)
        node.subscribe(TIMER, mb.recorder(firings))
        probe = ScheduleItem("probe", TIMER, later())
        dues = mb.due_times(FIRE, mb.lead_for(lambda n: node.schedule(probe)))
        for n, due in enumerate(dues):
            node.schedule(ScheduleItem(f"fire-{n}", TIMER, due))
        commands.take()
        with node:
            if not firings.done.wait(300):
                raise TimeoutError(f"{contender} did not fire every timer")
            mb.wait_for(lambda: mb.settled(db["timers"]))
            round_trips = commands.take()
        result = {**firings.summary(dues[0], round_trips), "commands": commands.last}
        return result if contender.startswith("old") else {**result, "store": stats.summary()}


async def run_async(uri: str, contender: str) -> dict[str, Any]:
    commands = mb.Commands()
    client: Any = AsyncMongoClient(uri, tz_aware=True, event_listeners=[commands])
    name = f"fs_bench_{uuid.uuid4().hex[:8]}"
    collection = client[name]["timers"]
    stats: Any = None
    try:
        if contender == "old-async":
            from flowsched import AsyncMongoScheduler

            node: Any = AsyncMongoScheduler(collection, batch_size=BATCH)
        else:
            from flowsched.mongo import AsyncMongoTimerStore
            from flowsched.node.async_scheduler import AsyncNodeScheduler

            store = AsyncMongoTimerStore(collection)
            if contender.endswith("-confirm"):
                store.claim_started = None  # type: ignore[method-assign,assignment]
            stats = CallStats(store, awaited=True)
            node = AsyncNodeScheduler(store, batch_size=BATCH, workers=100)
        for n in range(BACKGROUND):
            await node.schedule(ScheduleItem(f"bg-{n}", TIMER, later()))
        firings = mb.Firings(FIRE)

        async def record(item: ScheduleItem, attempt: int) -> None:
            firings.record(item.id, item.due)

        node.subscribe(TIMER, record)
        probe = ScheduleItem("probe", TIMER, later())
        start = time.perf_counter()
        for _ in range(20):
            await node.schedule(probe)
        lead = timedelta(seconds=(time.perf_counter() - start) / 20 * FIRE * 2 + 1)
        dues = mb.due_times(FIRE, lead)
        for n, due in enumerate(dues):
            await node.schedule(ScheduleItem(f"fire-{n}", TIMER, due))
        commands.take()
        async with node:
            deadline = time.monotonic() + 300
            while not firings.done.is_set():
                if time.monotonic() > deadline:
                    detail = {"fired": len(firings.late), "store": stats and stats.summary()}
                    raise TimeoutError(f"{contender} did not fire every timer: {detail}")
                await asyncio.sleep(0.01)
            fire = {"_id": {"$regex": "^fire-"}}
            while await collection.count_documents(fire, comment=mb.UNCOUNTED):
                await asyncio.sleep(0.05)
            round_trips = commands.take()
        result = {**firings.summary(dues[0], round_trips), "commands": commands.last}
        return result if contender.startswith("old") else {**result, "store": stats.summary()}
    finally:
        await client.drop_database(name)
        await client.close()


def one_run(contender: str, uri: str, base: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = base if contender.startswith("old") else str(HERE.parent)
    command = [sys.executable, __file__, "--child", contender, uri]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{contender} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(base: str) -> int:
    uri = os.environ.get("FLOWSCHED_MONGO_URI")
    if not uri:
        sys.exit("set FLOWSCHED_MONGO_URI")
    runs: dict[str, list[dict[str, Any] | None]] = {c: [] for c in CONTENDERS}
    for run in range(RUNS):
        turn = run % len(CONTENDERS)
        order = CONTENDERS[turn:] + CONTENDERS[:turn]
        for contender in order:
            try:
                result = one_run(contender, uri, base)
            except RuntimeError as exc:  # said, and left out of the medians
                print(f"round {run}: {exc}", file=sys.stderr, flush=True)
                result = {"failed": str(exc)[-300:]}
                runs[contender].append(None)
            else:
                runs[contender].append(result)
            print(json.dumps({"round": run, "contender": contender, **result}), flush=True)
    print("| figure | peer (median) | contender (median) | contender/peer per round | median |")
    print("|---|---|---|---|---|")
    for face in ("sync", "async"):
        # Each contender of this face against the first one listed (its peer), per round.
        same = [c for c in CONTENDERS if c.split("-")[1] == face]
        for contender in same[1:]:
            pairs = [
                (o, n)
                for o, n in zip(runs[same[0]], runs[contender], strict=True)
                if o is not None and n is not None
            ]
            if not pairs:
                continue
            old, new = [o for o, _ in pairs], [n for _, n in pairs]
            for key in ("fired_per_s", "round_trips_per_fired", "p99_lateness_s"):
                ratios = [n[key] / o[key] if o[key] else float("nan") for o, n in pairs]
                print(
                    f"| {contender}/{same[0]} {key} | {statistics.median(r[key] for r in old)}"
                    f" | {statistics.median(r[key] for r in new)} | "
                    f"{', '.join(f'{r:.2f}' for r in ratios)} | {statistics.median(ratios):.2f} |"
                )
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        contender, uri = sys.argv[2], sys.argv[3]
        if contender.endswith("async"):
            print(json.dumps(asyncio.run(run_async(uri, contender))))
        else:
            print(json.dumps(run_sync(uri, contender)))
    else:
        sys.exit(main(sys.argv[1]))
