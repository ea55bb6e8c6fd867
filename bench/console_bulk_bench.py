"""The console's bulk actions against the raw database writes of the same documents, one server.

    bash tools/with-mongo.sh .venv/bin/python bench/console_bulk_bench.py

On the wire server (``FLOWSCHED_MONGO_URI``), in a database of its own (dropped afterwards):

* **cancel by filter**: 12,000 timers stored, 10,000 of handler ``billing``; a signed-in
  operator's ``POST /bulk/cancel`` with ``handler=billing`` (whole HTTP request through the
  ASGI app, async driver, until its last line of progress), against one
  ``delete_many({"handler": "billing"})`` of the same 10,000 documents stored again;
* **requeue a handler's dead letters**: 1,000 dead letters of ``billing``; ``POST
  /bulk/requeue`` against the raw move of the same documents: one ``insert_many`` of the
  timer documents (built beforehand, not timed) and one ``delete_many`` of the dead letters.

Rounds alternate console and raw, each on documents stored afresh (storing is not timed);
medians of ``CONSOLE_BULK_ROUNDS`` (3). Acceptance: each ratio <= 3. Writes
``bench/results/console_bulk.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

URI = os.environ.get(
    "FLOWSCHED_MONGO_URI", "mongodb://127.0.0.1:27017/?directConnection=true&retryWrites=false"
)
ROUNDS = int(os.environ.get("CONSOLE_BULK_ROUNDS", "3"))
MATCHING, OTHERS, DEAD = 10_000, 2_000, 1_000
TOKEN = "bench-operator-token"
RESULTS = Path(__file__).parent / "results" / "console_bulk.json"


def documents(start: datetime) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """The matching timers, the others, and the dead letters (as MongoScheduler stores them)."""
    from flowsched.mongo.documents import dead_letter_document, item_document
    from flowsched.port import DeadLetter, ScheduleItem, ScheduleKind

    def item(n: int, handler: str) -> ScheduleItem:
        return ScheduleItem(f"t-{n:06d}", ScheduleKind.TIMER, start + timedelta(seconds=n),
                            f"flow-{n % 500:03d}", {"order": n}, handler=handler)  # fmt: skip

    matching = [item_document(item(n, "billing"), n + 1) for n in range(MATCHING)]
    others = [item_document(item(n, "mail"), n + 1) for n in range(MATCHING, MATCHING + OTHERS)]
    dead = [
        dead_letter_document(DeadLetter(item(n, "billing").with_generation(7), 5, "boom", start))
        for n in range(100_000, 100_000 + DEAD)
    ]
    return matching, others, dead


async def measure(db_name: str) -> dict[str, Any]:
    import httpx
    import pymongo

    from flowsched.console import app
    from flowsched.mongo.documents import bucket_of, dead_letter_from_document, item_document
    from flowsched.mongo.store import CLAIM_INDEX, CLAIM_INDEX_KEYS

    client: Any = pymongo.AsyncMongoClient(URI, tz_aware=True)
    database = client[db_name]
    items, dead = database["timers"], database["timers_dead"]
    await items.create_index(CLAIM_INDEX_KEYS, name=CLAIM_INDEX)
    await items.create_index([("flow_id", 1)], name="flow_id_sparse", sparse=True)
    await dead.create_index([("dead_at", 1)], name="dead_at")
    now = datetime.now(UTC)
    matching, others, letters = documents(now)
    await items.insert_many(others)
    fresh = []  # the raw requeue's timer documents, built beforehand
    for letter in letters:
        old = dead_letter_from_document(letter).item
        fresh.append(item_document(old.moved(now, old.previous), 1, bucket=bucket_of(old.id, 1)))
    console = app(database, collection="timers", token=TOKEN, query_budget_ms=600_000)
    timings: dict[str, list[float]] = {k: [] for k in ("cancel", "cancel raw", "requeue",
                                                       "requeue raw")}  # fmt: skip
    transport = httpx.ASGITransport(app=console)
    async with httpx.AsyncClient(transport=transport, base_url="http://c", timeout=None) as http:
        page = (await http.get("/login")).text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]
        signed = await http.post("/login", data={"csrf": csrf, "user": "", "secret": TOKEN})
        assert signed.status_code == 303, signed.text
        for _ in range(ROUNDS):
            await items.insert_many([dict(d) for d in matching])
            began = time.perf_counter()
            done = await http.post("/bulk/cancel", data={"csrf": csrf, "handler": "billing"})
            timings["cancel"].append(time.perf_counter() - began)
            assert f'id="bulk-done">{MATCHING} done<' in done.text, done.text[-400:]
            await items.insert_many([dict(d) for d in matching])
            began = time.perf_counter()
            gone = await items.delete_many({"handler": "billing"})
            timings["cancel raw"].append(time.perf_counter() - began)
            assert gone.deleted_count == MATCHING
            await dead.insert_many([dict(d) for d in letters])
            began = time.perf_counter()
            done = await http.post("/bulk/requeue", data={"csrf": csrf, "handler": "billing"})
            timings["requeue"].append(time.perf_counter() - began)
            assert f'id="bulk-done">{DEAD} done<' in done.text, done.text[-400:]
            await items.delete_many({"handler": "billing"})
            await dead.insert_many([dict(d) for d in letters])
            began = time.perf_counter()
            await items.insert_many([dict(d) for d in fresh], ordered=False)
            moved = await dead.delete_many({"_id": {"$in": [d["_id"] for d in letters]}})
            timings["requeue raw"].append(time.perf_counter() - began)
            assert moved.deleted_count == DEAD
            await items.delete_many({"handler": "billing"})
    audited = await database["timers_audit"].count_documents({"action": {"$regex": "^bulk_"}})
    await client.close()
    medians = {k: statistics.median(v) for k, v in timings.items()}
    return {
        "rounds": ROUNDS,
        "cancel_ms": round(medians["cancel"] * 1000, 1),
        "cancel_raw_ms": round(medians["cancel raw"] * 1000, 1),
        "cancel_ratio": round(medians["cancel"] / medians["cancel raw"], 2),
        "requeue_ms": round(medians["requeue"] * 1000, 1),
        "requeue_raw_ms": round(medians["requeue raw"] * 1000, 1),
        "requeue_ratio": round(medians["requeue"] / medians["requeue raw"], 2),
        "audit_entries": audited,
    }


def main() -> None:
    import pymongo

    db_name = f"fs_console_bulk_bench_{os.getpid()}"
    try:
        figures = asyncio.run(measure(db_name))
    finally:
        pymongo.MongoClient(URI).drop_database(db_name)
    print(
        f"cancel {MATCHING:,} by filter: console {figures['cancel_ms']} ms, raw delete_many "
        f"{figures['cancel_raw_ms']} ms, ratio {figures['cancel_ratio']}x\n"
        f"requeue {DEAD:,} dead letters: console {figures['requeue_ms']} ms, raw insert+delete "
        f"{figures['requeue_raw_ms']} ms, ratio {figures['requeue_ratio']}x"
    )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
