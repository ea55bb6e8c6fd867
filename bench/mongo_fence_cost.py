"""The server's time for one claim and one settle of 100 timers: main 989defa's filters
against ours, alone on the server (no node, no other load).

    python bench/mongo_fence_cost.py URI [ROUNDS]

Each round claims 100 fresh documents (one ``bulk_write`` of four 25-id ``update_many``, as
both trees send it) and deletes them again (four ``delete_many``), once with 989defa's
filters and once with ours, the order alternating:

* claim, 989defa: ``_id``, bucket, generations and route among those read, ``ready_at`` up
  to the horizon; sets the claim (owner, token, lease end) and ``ready_at``;
* claim, ours: the same with ``ready_at`` among the values read (a lapsed run's count stays
  exact) and ``attempts``, and the start recorded in it too (``claim.at``, ``deliveries``:
  the asyncio node's claim, which starts on claim);
* settle, 989defa: ``_id`` and the batch token; ours: also the owner and the generations
  (the fence that keeps a replacement from an old run's settle, CONTRACT section 15).

Prints the medians in ms. Only the filters and the fields set differ.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import DeleteMany, MongoClient, UpdateMany

BATCH, CHUNK = 100, 25


def claim(kind: str, chunk: list[dict[str, Any]], now: datetime) -> UpdateMany:
    until = now + timedelta(seconds=30)
    found: dict[str, Any] = {
        "_id": {"$in": [d["_id"] for d in chunk]},
        "bucket": 0,
        "generation": {"$in": [d["generation"] for d in chunk]},
        "route": {"$in": ["k:TIMER"]},
    }
    fields: dict[str, Any] = {
        "claim": {"owner": "n", "token": "tok", "lease_until": until},
        "ready_at": until,
    }
    if kind == "989defa":
        found["ready_at"] = {"$lte": now + timedelta(hours=1)}
    else:
        found["ready_at"] = {"$in": sorted({d["ready_at"] for d in chunk})}
        found["attempts"] = {"$in": [0, None]}
        fields["claim"]["at"] = now
        fields["deliveries"] = 1
    return UpdateMany(found, {"$set": fields})


def settle(kind: str, chunk: list[dict[str, Any]]) -> DeleteMany:
    found: dict[str, Any] = {
        "_id": {"$in": [d["_id"] for d in chunk]},
        "bucket": 0,
        "claim.token": "tok",
    }
    if kind != "989defa":
        found["claim.owner"] = "n"
        found["generation"] = {"$in": [d["generation"] for d in chunk]}
    return DeleteMany(found)


def main(uri: str, rounds: int) -> dict[str, float]:
    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
    db = client[f"fence_cost_{uuid.uuid4().hex[:6]}"]
    timers = db["timers"]
    now = datetime.now(UTC).replace(microsecond=0)
    docs = [
        {
            "_id": f"fire-{i}",
            "generation": random.getrandbits(62),
            "route": "k:TIMER",
            "bucket": 0,
            "ready_at": now + timedelta(milliseconds=i // 2),
            "due": now,
            "attempts": 0,
            "deliveries": 0,
            "kind": "TIMER",
            "payload": {"n": i},
        }
        for i in range(2 * rounds * BATCH)
    ]
    try:
        timers.insert_many(docs)
        timers.create_index([("route", 1), ("bucket", 1), ("ready_at", 1)])
        took: dict[str, list[float]] = {}
        at = 0
        for r in range(rounds):
            for kind in ("989defa", "ours") if r % 2 else ("ours", "989defa"):
                batch, at = docs[at : at + BATCH], at + BATCH
                chunks = [batch[n : n + CHUNK] for n in range(0, BATCH, CHUNK)]
                start = time.perf_counter()
                done = timers.bulk_write([claim(kind, c, now) for c in chunks], ordered=False)
                took.setdefault(f"claim {kind}", []).append(time.perf_counter() - start)
                assert done.matched_count == BATCH, done.bulk_api_result
                start = time.perf_counter()
                gone = timers.bulk_write([settle(kind, c) for c in chunks], ordered=False)
                took.setdefault(f"settle {kind}", []).append(time.perf_counter() - start)
                assert gone.deleted_count == BATCH, gone.bulk_api_result
        return {name: round(statistics.median(v) * 1000, 1) for name, v in took.items()}
    finally:
        client.drop_database(db.name)
        client.close()


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    print(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 30))
