"""Firing on MongoDB, both faces, against their peers and a floor (wire server, same run).

    python bench/async_mongo_bench.py          # needs FLOWSCHED_MONGO_URI (make bench sets it)

Each contender fires FIRE timers due uniformly within 1 s, in a fresh database that also holds
BACKGROUND timers due an hour ahead (all stored before the node starts: paused, for the
APScheduler ones); every run of every contender is a fresh process, the
contenders take turns (rotated each run) and the figures are medians of RUNS runs:

* ``async``: ``AsyncMongoScheduler`` (``async def`` handler), batch 100;
* ``sync``: ``MongoScheduler`` (8 worker threads), batch 100;
* ``floor``: the least a claiming node can do - per batch of 100, find the due ids, claim
  them with one conditional ``update_many``, and delete them (no handler, no settlement
  rules, no renewals);
* ``aps3``: APScheduler 3's ``MongoDBJobStore`` (``BackgroundScheduler``, 8 threads);
* loop health (each run, not a contender): ``AsyncMongoScheduler`` with HEALTH_PENDING
  (10,000) timers pending and FIRE firing within 1 s, while a 1 ms ticker records its worst
  gap and an ``asyncio.sleep(0.01)`` ticker its delays (the tickers alone first, as the
  machine's floor); targets: worst gap <= 10 ms, p99 delay <= 10 ms. Its first due time
  is as far ahead as storing the timers takes (as in the firing runs), and its window
  starts from a collected heap (the set-up's 12,000 stores leave a full collection owed);
  the collector stays on, and the generation-2 collections in the window are reported;
* ``aps4``: APScheduler 4.0.0a6's ``AsyncScheduler`` on ``MongoDBDataStore``
  (bench/apscheduler4_mongo_peer.py, in bench/.venv-apscheduler4), stopped after
  APS4_LIMIT seconds if it has not fired everything by then (its rate is then over what it
  fired; the rest counts as lost).

Fire rate: fired / (last fire - first due). Round trips: MongoDB commands the contender
sent (pymongo command monitoring) from the end of scheduling until every timer fired and
settled, per fired timer; the bench's own polls for "all settled" carry a comment and are
left out, for every contender.
Writes bench/results/async_mongo.json.
"""

from __future__ import annotations

import asyncio
import gc
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

from flowsched import AsyncMongoScheduler, MongoScheduler, ScheduleItem, ScheduleKind

HERE = Path(__file__).resolve().parent
RUNS = int(os.environ.get("FLOWSCHED_BENCH_RUNS", 3))
FIRE = int(os.environ.get("FLOWSCHED_BENCH_FIRE", 2000))
BACKGROUND = int(os.environ.get("FLOWSCHED_BENCH_BACKGROUND", 1000))
HEALTH_PENDING = int(os.environ.get("FLOWSCHED_BENCH_HEALTH_PENDING", 10_000))
BATCH = 100
CONTENDERS = ("async", "sync", "floor", "aps3", "aps4")
HEALTH = "health"  # not a contender: the loop's health under AsyncMongoScheduler
APS4_PYTHON = HERE / ".venv-apscheduler4" / "bin" / "python"
RESULTS = HERE / "results" / "async_mongo.json"
APS4_LIMIT = os.environ.get("FLOWSCHED_BENCH_APS4_LIMIT", "120")
mb.FIRE = FIRE
TIMER = ScheduleKind.TIMER


def later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


# -- the contenders (each in a process of its own) ----------------------------------------


def overrun(first_due: datetime) -> None:
    """Say so when storing the timers ended after the first was due (a loaded machine): that
    run's lateness and rate then include the overrun."""
    late = (datetime.now(UTC) - first_due).total_seconds()
    if late > 0:
        print(f"  (scheduling ended {late:.2f} s after the first due time)", file=sys.stderr)


async def store_firing(node: AsyncMongoScheduler) -> list[datetime]:
    """Store FIRE timers ``fire-<n>`` due within 1 s, the first as far ahead as storing them
    takes (twice the mean of 20 stores, times FIRE, plus a second): all of them become due
    in the window, none overdue because storing ran past a fixed lead. Their due times."""
    probe = ScheduleItem("probe", TIMER, later())
    start = time.perf_counter()
    for _ in range(20):
        await node.schedule(probe)
    lead = timedelta(seconds=(time.perf_counter() - start) / 20 * FIRE * 2 + 1)
    dues = mb.due_times(FIRE, lead)
    for n, due in enumerate(dues):
        await node.schedule(ScheduleItem(f"fire-{n}", TIMER, due))
    overrun(dues[0])
    return dues


def run_sync(uri: str) -> dict[str, Any]:
    commands = mb.Commands()
    with mb.database(uri, commands) as db:
        node = MongoScheduler(db["timers"], batch_size=BATCH, workers=8)
        for n in range(BACKGROUND):
            node.schedule(ScheduleItem(f"bg-{n}", TIMER, later()))
        firings = mb.Firings(FIRE)
        node.subscribe(TIMER, mb.recorder(firings))
        probe = ScheduleItem("probe", TIMER, later())
        dues = mb.due_times(FIRE, mb.lead_for(lambda n: node.schedule(probe)))
        for n, due in enumerate(dues):
            node.schedule(ScheduleItem(f"fire-{n}", TIMER, due))
        overrun(dues[0])
        commands.take()
        with node:
            if not firings.done.wait(300):
                raise TimeoutError("MongoScheduler did not fire every timer")
            mb.wait_for(lambda: mb.settled(db["timers"]))
            round_trips = commands.take()
        return firings.summary(dues[0], round_trips)


async def run_async(uri: str) -> dict[str, Any]:
    commands = mb.Commands()
    client: Any = AsyncMongoClient(uri, tz_aware=True, event_listeners=[commands])
    name = f"fs_bench_{uuid.uuid4().hex[:8]}"
    collection = client[name]["timers"]
    try:
        node = AsyncMongoScheduler(collection, batch_size=BATCH)
        for n in range(BACKGROUND):
            await node.schedule(ScheduleItem(f"bg-{n}", TIMER, later()))
        firings = mb.Firings(FIRE)

        async def record(item: ScheduleItem, attempt: int) -> None:
            firings.record(item.id, item.due)

        node.subscribe(TIMER, record)
        dues = await store_firing(node)
        commands.take()
        async with node:
            deadline = time.monotonic() + 300
            while not firings.done.is_set():
                if time.monotonic() > deadline:
                    raise TimeoutError("AsyncMongoScheduler did not fire every timer")
                await asyncio.sleep(0.01)
            fire = {"_id": {"$regex": "^fire-"}}
            while await collection.count_documents(fire, comment=mb.UNCOUNTED):
                await asyncio.sleep(0.05)
            round_trips = commands.take()
        return firings.summary(dues[0], round_trips)
    finally:
        await client.drop_database(name)
        await client.close()


async def run_health(uri: str) -> dict[str, Any]:
    """The event loop's health under AsyncMongoScheduler: HEALTH_PENDING timers pending (an
    hour ahead) and FIRE firing within 1 s (``async def`` handler), while a 1 ms ticker
    records its worst gap and an ``asyncio.sleep(0.01)`` ticker its delays; the same two
    tickers alone for 2 s first, in the same process, as the machine's floor."""
    gaps: list[float] = []
    delays: list[float] = []
    measuring = True
    gen2: list[float] = []  # the window's generation-2 collections, their lengths in ms
    began_gc = 0.0

    def collections(phase: str, info: dict[str, int]) -> None:
        nonlocal began_gc
        if phase == "start":
            began_gc = time.perf_counter()
        elif info["generation"] == 2:
            gen2.append((time.perf_counter() - began_gc) * 1e3)

    async def ticker(period: float, into: list[float]) -> None:
        while measuring:
            began = time.perf_counter()
            await asyncio.sleep(period)
            into.append(time.perf_counter() - began - period)

    tickers = [asyncio.create_task(ticker(0.001, gaps)), asyncio.create_task(ticker(0.01, delays))]
    await asyncio.sleep(2.0)
    floor_gap, floor_delay = max(gaps) * 1e3, mb.percentile(delays, 0.99) * 1e3
    measuring = False
    await asyncio.gather(*tickers)
    gaps.clear()
    delays.clear()
    client: Any = AsyncMongoClient(uri, tz_aware=True)
    name = f"fs_bench_{uuid.uuid4().hex[:8]}"
    collection = client[name]["timers"]
    try:
        node = AsyncMongoScheduler(collection, batch_size=BATCH)
        for start in range(0, HEALTH_PENDING, 100):
            stop = min(start + 100, HEALTH_PENDING)
            await asyncio.gather(
                *(node.schedule(ScheduleItem(f"p-{n}", TIMER, later())) for n in range(start, stop))
            )
        fired = 0

        async def record(item: ScheduleItem, attempt: int) -> None:
            nonlocal fired
            fired += 1

        node.subscribe(TIMER, record)
        await store_firing(node)
        # The window starts from a collected heap, as the tickers-alone floor does: storing
        # 12,000 timers from this process leaves the cyclic collector a full pass owed (~60 ms
        # for this process's ~50k objects on a slow day), which is the set-up's, not the
        # firing's. The collector stays on: every pass the firing itself causes is measured,
        # and the generation-2 passes in the window are counted in the result.
        gc.collect()
        gc.callbacks.append(collections)
        measuring = True
        tickers = [
            asyncio.create_task(ticker(0.001, gaps)),
            asyncio.create_task(ticker(0.01, delays)),
        ]
        async with node:
            deadline = time.monotonic() + 300
            while fired < FIRE and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.1)
        measuring = False
        gc.callbacks.remove(collections)
        await asyncio.gather(*tickers)
    finally:
        await client.drop_database(name)
        await client.close()
    return {
        "pending": HEALTH_PENDING,
        "firing": FIRE,
        "fired": fired,
        "worst_1ms_gap_ms": round(max(gaps) * 1e3, 2),
        "p99_10ms_delay_ms": round(mb.percentile(delays, 0.99) * 1e3, 2),
        "gen2_collections": len(gen2),
        "longest_gen2_ms": round(max(gen2, default=0.0), 2),
        "floor_worst_1ms_gap_ms": round(floor_gap, 2),
        "floor_p99_10ms_delay_ms": round(floor_delay, 2),
    }


def run_floor(uri: str) -> dict[str, Any]:
    commands = mb.Commands()
    with mb.database(uri, commands) as db:
        timers = db["timers"]
        timers.create_index([("ready_at", 1)])
        timers.insert_many([{"_id": f"bg-{n}", "ready_at": later()} for n in range(BACKGROUND)])
        start = time.perf_counter()
        probe = {"_id": "probe", "ready_at": later()}
        for _ in range(20):
            timers.replace_one({"_id": "probe"}, probe, upsert=True)
        lead = timedelta(seconds=(time.perf_counter() - start) / 20 * FIRE * 2 + 1)
        dues = mb.due_times(FIRE, lead)
        for n, due in enumerate(dues):
            timers.replace_one({"_id": f"fire-{n}"}, {"ready_at": due}, upsert=True)
        overrun(dues[0])
        commands.take()
        firings = mb.Firings(FIRE)
        while not firings.done.is_set():
            now = datetime.now(UTC)
            query = {"ready_at": {"$lte": now}}
            found = list(timers.find(query, {"ready_at": 1}).limit(BATCH).batch_size(BATCH))
            if not found:
                time.sleep(0.05)
                continue
            token = uuid.uuid4().hex
            ids = [doc["_id"] for doc in found]
            claim = {"$set": {"token": token, "ready_at": now + timedelta(seconds=30)}}
            timers.update_many({"_id": {"$in": ids}, **query}, claim)
            for doc in found:
                firings.record(doc["_id"], doc["ready_at"])
            timers.delete_many({"_id": {"$in": ids}, "token": token})
        round_trips = commands.take()
        return firings.summary(dues[0], round_trips)


def run_aps3(uri: str) -> dict[str, Any]:
    commands = mb.Commands()
    with mb.database(uri, commands) as db:
        scheduler = mb.apscheduler(db)
        scheduler.start(paused=True)
        try:
            for n in range(BACKGROUND):
                scheduler.add_job(mb.noop_job, "date", run_date=later(), id=f"bg-{n}")
            firings = mb.Firings(FIRE)
            mb.CURRENT.append(firings)
            lead = mb.lead_for(
                lambda n: scheduler.add_job(mb.noop_job, "date", run_date=later(), id=f"probe-{n}")
            )
            dues = mb.due_times(FIRE, lead)
            for n, due in enumerate(dues):
                job_id = f"fire-{n}"
                scheduler.add_job(
                    mb.apscheduler_job, "date", run_date=due, args=[job_id, due], id=job_id
                )
            overrun(dues[0])
            commands.take()
            scheduler.resume()
            if not firings.done.wait(300):
                raise TimeoutError("APScheduler 3 did not fire every job")
            mb.wait_for(lambda: mb.settled(db["jobs"]))
            round_trips = commands.take()
        finally:
            scheduler.shutdown(wait=True)
        return firings.summary(dues[0], round_trips)


def child(contender: str, uri: str) -> dict[str, Any]:
    if contender == "async":
        return asyncio.run(run_async(uri))
    if contender == "health":
        return asyncio.run(run_health(uri))
    return {"sync": run_sync, "floor": run_floor, "aps3": run_aps3}[contender](uri)


# -- the parent: fresh processes, medians, ratios -----------------------------------------


def one_run(contender: str, uri: str) -> dict[str, Any]:
    if contender == "aps4":
        command = [str(APS4_PYTHON), str(HERE / "apscheduler4_mongo_peer.py"), uri]
        command += [str(FIRE), str(BACKGROUND), APS4_LIMIT]
    else:
        command = [sys.executable, __file__, "--child", contender, uri]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{contender} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    uri = os.environ.get("FLOWSCHED_MONGO_URI")
    if not uri:
        sys.exit("set FLOWSCHED_MONGO_URI (make bench starts the wire server)")
    contenders = [c for c in CONTENDERS if c != "aps4" or APS4_PYTHON.exists()]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in contenders}
    health: list[dict[str, Any]] = []
    for run in range(RUNS):
        order = contenders[run % len(contenders) :] + contenders[: run % len(contenders)]
        for contender in order:
            runs[contender].append(one_run(contender, uri))
            print(f"  run {run} {contender}: {runs[contender][-1]}", file=sys.stderr)
        health.append(one_run(HEALTH, uri))
        print(f"  run {run} loop health: {health[-1]}", file=sys.stderr)
    medians = {
        c: {k: statistics.median(r[k] for r in rs) for k in rs[0] if k != "finished"}
        for c, rs in runs.items()
    }
    loop = {k: statistics.median(r[k] for r in health) for k in health[0]}
    rate = {c: m["fired_per_s"] for c, m in medians.items()}
    ratios = {
        "async_vs_aps4": rate["async"] / rate["aps4"] if "aps4" in rate else None,
        "async_vs_floor": rate["async"] / rate["floor"],
        "sync_vs_floor": rate["sync"] / rate["floor"],
        "async_vs_aps3": rate["async"] / rate["aps3"],
        "sync_vs_aps3": rate["sync"] / rate["aps3"],
    }
    targets = {
        "async fire rate >= APScheduler 4": (ratios["async_vs_aps4"] or 0) >= 1.0,
        "async <= 0.05 round trips per fired": medians["async"]["round_trips_per_fired"] <= 0.05,
        "async >= 0.8x floor": ratios["async_vs_floor"] >= 0.8,
        "sync >= 0.8x floor": ratios["sync_vs_floor"] >= 0.8,
        "async >= 1.0x APScheduler 3": ratios["async_vs_aps3"] >= 1.0,
        "sync >= 1.0x APScheduler 3": ratios["sync_vs_aps3"] >= 1.0,
        "async loop: worst 1 ms-ticker gap <= 10 ms": loop["worst_1ms_gap_ms"] <= 10,
        "async loop: p99 delay of a 10 ms ticker <= 10 ms": loop["p99_10ms_delay_ms"] <= 10,
    }
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "fire": FIRE,
        "background": BACKGROUND,
        "runs": RUNS,
        "medians": medians,
        "ratios": {k: None if v is None else round(v, 2) for k, v in ratios.items()},
        "loop_health": {"medians": loop, "runs": health},
        "targets": targets,
        "every_run": runs,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"MongoDB firing, {FIRE} due within 1 s, {BACKGROUND} stored, medians of {RUNS}:")
    for contender, m in medians.items():
        print(
            f"  {contender:<6} {m['fired_per_s']:>7.1f} fired/s  p99 late "
            f"{m['p99_lateness_s']:.2f} s  {m['round_trips_per_fired']:.4f} round trips/fired"
            f"  lost {m['lost']:.0f} dup {m['duplicates']:.0f}"
        )
    for name, value in results["ratios"].items():
        print(f"  {name:<16} {value}")
    print(
        f"  loop health ({HEALTH_PENDING:,} pending, {FIRE:,} firing): worst 1 ms-ticker gap "
        f"{loop['worst_1ms_gap_ms']:.2f} ms, p99 10 ms-ticker delay "
        f"{loop['p99_10ms_delay_ms']:.2f} ms (tickers alone: "
        f"{loop['floor_worst_1ms_gap_ms']:.2f} ms, {loop['floor_p99_10ms_delay_ms']:.2f} ms)"
    )
    for name, met in targets.items():
        print(f"  [{'met' if met else 'NOT met'}] {name}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3])))
    else:
        sys.exit(main())
