"""What the operator console costs, against one indexed ``find().limit(50)``, one server.

    bash tools/with-mongo.sh .venv/bin/python bench/console_bench.py    (or: make console-bench)

On the wire server (``FLOWSCHED_MONGO_URI``), in databases of its own (``fs_console_bench_*``,
dropped afterwards), with 10,000 and with 100,000 timers stored (``insert_many`` in batches of
10,000; the time is reported), the indexes a ``MongoScheduler`` makes:

* the first page of ``/timers`` and a flow-prefix filtered page (``/timers?flow=flow-01``),
  whole HTTP requests through the ASGI app (httpx, in process, async driver), against one
  ``find(filter).sort(...).hint(index).limit(50)`` of the same filter on the same async
  client: median of 15 interleaved rounds, and the ratio (acceptance: <= 10x);
* ``explain`` of both pages' queries: the stages of the winning plan (acceptance: no COLLSCAN);
* the 24 h forecast: how many ``aggregate`` commands one call sends (command monitoring;
  acceptance: one);
* memory: in a fresh process per size, RSS after 20 warm-up requests and after 200 more
  page requests (first pages, next pages, flow pages, timer pages; acceptance: growth
  <= 10 MB at both sizes).

Prints a table and writes ``bench/results/console.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

URI = os.environ.get(
    "FLOWSCHED_MONGO_URI", "mongodb://127.0.0.1:27017/?directConnection=true&retryWrites=false"
)
SIZES = [int(s) for s in os.environ.get("CONSOLE_BENCH_SIZES", "10000,100000").split(",")]
BATCH = 10_000
ROUNDS = int(os.environ.get("CONSOLE_BENCH_ROUNDS", "7"))
RESULTS = Path(__file__).parent / "results" / "console.json"


def seed(db_name: str, size: int) -> float:
    """Store ``size`` timers (as MongoScheduler writes them); seconds the inserts took."""
    import pymongo

    from flowsched.mongo.documents import item_document
    from flowsched.mongo.store import CLAIM_INDEX, CLAIM_INDEX_KEYS
    from flowsched.port import ScheduleItem, ScheduleKind

    client: Any = pymongo.MongoClient(URI)
    client.drop_database(db_name)
    items = client[db_name]["timers"]
    items.create_index(CLAIM_INDEX_KEYS, name=CLAIM_INDEX)
    items.create_index([("flow_id", 1)], name="flow_id_sparse", sparse=True)
    client[db_name]["timers_dead"].create_index([("dead_at", 1)], name="dead_at")
    start = datetime.now(UTC)
    began = time.perf_counter()
    for first in range(0, size, BATCH):
        batch = []
        for n in range(first, min(size, first + BATCH)):
            item = ScheduleItem(
                f"t-{n:07d}", ScheduleKind.TIMER, start + timedelta(seconds=n % 86_400),
                f"flow-{n % 1000:04d}", {"order": n}, handler="billing" if n % 2 else None,
            )  # fmt: skip
            batch.append(item_document(item, n + 1))
        items.insert_many(batch, ordered=False)
    took = time.perf_counter() - began
    client.close()
    return took


async def measure(db_name: str) -> dict[str, Any]:
    """Latency ratios, plans and the forecast's command count on ``db_name``."""
    import httpx
    import pymongo
    from pymongo import monitoring

    from flowsched.console import app
    from flowsched.console.queries import (
        CLAIM_INDEX,
        FindSpec,
        TimerQuery,
        forecast_pipeline,
        prefix_range,
        slots,
    )

    class Count(monitoring.CommandListener):
        def __init__(self) -> None:
            self.names: list[str] = []

        def started(self, event: Any) -> None:
            self.names.append(event.command_name)

        def succeeded(self, event: Any) -> None: ...

        def failed(self, event: Any) -> None: ...

    counter = Count()
    client: Any = pymongo.AsyncMongoClient(URI, tz_aware=True, event_listeners=[counter])
    database = client[db_name]
    console = app(database, collection="timers", query_budget_ms=30_000)
    transport = httpx.ASGITransport(app=console)
    pages: dict[str, list[float]] = {"first page": [], "flow prefix": []}
    results: dict[str, Any] = {}
    now = datetime.now(UTC)
    # The peers: one indexed find().limit(50) of the same filter (the flow one unsorted, so
    # it stops after 50 index entries); the plans: every find a page sends.
    flow = TimerQuery(flow_prefix="flow-01")
    specs = {
        "first page": TimerQuery().find(now),
        "flow prefix": FindSpec({"flow_id": prefix_range("flow-01")}, [], "flow_id_sparse", 50),
    }
    page_specs = {
        "first page": [TimerQuery().find(now)],
        "flow prefix": [flow.find(now)],
    }
    urls = {"first page": "/timers", "flow prefix": "/timers?flow=flow-01"}
    finds: dict[str, list[float]] = {"first page": [], "flow prefix": []}
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        for name in urls:  # warm up: connection, plan cache, the (due, _id) index made once
            assert (await http.get(urls[name])).status_code == 200
        for _ in range(ROUNDS):
            for name, spec in specs.items():
                began = time.perf_counter()
                cursor = database.timers.find(spec.filter).hint(spec.hint)
                if spec.sort:
                    cursor = cursor.sort(spec.sort)
                found = await cursor.limit(50).to_list()
                finds[name].append(time.perf_counter() - began)
                assert len(found) == 50
                began = time.perf_counter()
                response = await http.get(urls[name])
                pages[name].append(time.perf_counter() - began)
                assert response.status_code == 200 and response.text.count("timer-link") == 50
        for name in specs:
            plans = []
            for step in page_specs[name]:
                cursor = database.timers.find(step.filter).sort(step.sort).hint(step.hint)
                plan = await cursor.limit(step.limit).explain()
                plans.append(" <- ".join(stages(plan["queryPlanner"]["winningPlan"])))
            page = statistics.median(pages[name])
            find = statistics.median(finds[name])
            results[name] = {
                "page_ms": round(page * 1000, 2),
                "find_ms": round(find * 1000, 2),
                "ratio": round(page / find, 2),
                "plans": plans,
            }
        counter.names.clear()
        response = await http.get("/overview/live")
        assert response.status_code == 200
        results["overview_commands"] = dict(sorted(_tally(counter.names).items()))
        took = []
        for _ in range(3):
            began = time.perf_counter()
            assert (await http.get("/overview/live")).status_code == 200
            took.append(time.perf_counter() - began)
        results["overview_ms"] = round(statistics.median(took) * 1000, 1)
    source = console_source(console)
    counter.names.clear()
    await source.forecast("hour")
    results["forecast_commands"] = _tally(counter.names)
    boundaries = slots(datetime.now(UTC), "hour", timedelta(hours=24))
    explained = await database.command(
        "explain",
        {"aggregate": "timers", "pipeline": forecast_pipeline(boundaries), "cursor": {},
         "hint": CLAIM_INDEX},
    )  # fmt: skip
    text = str(explained)
    results["forecast_plan"] = "COLLSCAN" if "COLLSCAN" in text else (
        "IXSCAN(claim_by_route_bucket)" if "IXSCAN" in text else "unknown")  # fmt: skip
    await client.close()
    return results


def console_source(console: Any) -> Any:
    # The bench reaches into the app only to call the forecast alone.
    return console.pages.source


def _tally(names: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts


def stages(plan: dict[str, Any]) -> list[str]:
    """Every stage of a winning plan, outermost first (index names beside IXSCANs)."""
    found = []
    while plan:
        stage = str(plan.get("stage"))
        found.append(f"{stage}({plan['indexName']})" if "indexName" in plan else stage)
        plan = plan.get("inputStage") or {}
    return found


RSS_PROBE = """
import asyncio, sys, psutil, httpx, re
from flowsched.console import app
async def main():
    console = app(sys.argv[1], database=sys.argv[2], collection="timers", query_budget_ms=30000)
    transport = httpx.ASGITransport(app=console)
    async with httpx.AsyncClient(transport=transport, base_url="http://c") as http:
        urls = ["/timers", "/timer?id=t-0000001", "/timers?id=t-00001", "/timers?flow=flow-01"]
        async def walk(n):
            url = "/timers"
            for i in range(n):  # next pages, timer pages, id-prefix pages; a flow page in 10
                r = await http.get(url if i % 2 == 0 else urls[3] if i % 10 == 9 else urls[i % 3])
                assert r.status_code == 200, r.text[:300]
                m = re.search(r'href="([^"]+)" id="next-page"', r.text)
                if m and i % 4 == 0:
                    url = m.group(1).replace("&amp;", "&")
        await walk(20)
        before = psutil.Process().memory_info().rss
        await walk(200)
        after = psutil.Process().memory_info().rss
        print(before, after)
asyncio.run(main())
"""


def rss(db_name: str) -> dict[str, float]:
    """RSS (MB) before and after 200 page requests, in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, URI, db_name],
        capture_output=True, text=True, check=True, timeout=3600,
    )  # fmt: skip
    before, after = (int(v) for v in out.stdout.split())
    return {
        "rss_before_mb": round(before / 2**20, 1),
        "rss_after_mb": round(after / 2**20, 1),
        "growth_mb": round((after - before) / 2**20, 2),
    }


def main() -> None:
    import signal

    import pymongo

    # Stopped (timeout, kill): still drop the bench's databases on the shared server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

    report: dict[str, Any] = {"uri": "FLOWSCHED_MONGO_URI", "rounds": ROUNDS, "sizes": {}}
    for size in SIZES:
        db_name = f"fs_console_bench_{size}_{os.getpid()}"
        try:
            inserted = seed(db_name, size)
            print(f"{size:>7} timers stored in {inserted:.1f} s", flush=True)
            figures = asyncio.run(measure(db_name))
            figures["insert_s"] = round(inserted, 1)
            report["sizes"][str(size)] = figures
            for name in ("first page", "flow prefix"):
                row = figures[name]
                print(
                    f"  {name:<12} page {row['page_ms']:>7} ms  find {row['find_ms']:>7} ms  "
                    f"ratio {row['ratio']:>5}x  plans {' ; '.join(row['plans'])}"
                )
            forecast = f"{figures['forecast_commands']} {figures['forecast_plan']}"
            overview = f"{figures['overview_commands']} in {figures['overview_ms']} ms"
            print(f"  forecast: {forecast}  overview: {overview}", flush=True)
            figures["memory"] = rss(db_name)
            memory = figures["memory"]
            print(f"  RSS {memory['rss_before_mb']} -> {memory['rss_after_mb']} MB over 200 "
                  f"requests (+{memory['growth_mb']} MB)", flush=True)  # fmt: skip
        finally:
            pymongo.MongoClient(URI).drop_database(db_name)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
