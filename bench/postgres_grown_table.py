"""Does a firing plan made while the table was small stay fast once it has grown?

    FLOWSCHED_POSTGRES_URL=... python bench/postgres_grown_table.py [--rows 200000]

The node's firing connections plan each statement once (``FIRING_SETTINGS``:
``plan_cache_mode=force_generic_plan``, no seq or bitmap scans). The risk of planning once is
a plan made on stale statistics: a claim planned on an empty table, kept, then run on a big
one. This probe makes exactly that case, with autovacuum off on the table (so no ANALYZE
comes to replace the plan): a store claims on the empty table (its plans are made), then
``--rows`` due rows are written, and the same store claims 64 of them at a time, 30 times;
then a second store, whose plans are made on the full table, does the same. Prints the
median claim of each (ms) and their ratio. Session 6 measured the unguarded form
(``force_generic_plan`` alone): 126 ms a claim on 200,000 rows, against ~1.5.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import timedelta

import psycopg

from flowsched.postgres import PostgresTimerStore
from flowsched.postgres.schema import drop_tables

LEASE = timedelta(seconds=60)


def _claims(store: PostgresTimerStore, owner: str, times: int) -> list[float]:
    took = []
    for _ in range(times):
        started = time.perf_counter()
        claims = store.claim_started(["k:TIMER"], owner, LEASE, 64)
        took.append(1000 * (time.perf_counter() - started))
        assert len(claims) == 64, len(claims)
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    import os

    url = os.environ["FLOWSCHED_POSTGRES_URL"]
    table = f"bench_grown_{uuid.uuid4().hex[:8]}"
    early = PostgresTimerStore(url, table=table)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)".encode())
            for _ in range(10):  # plans made (and kept) while the table is empty
                assert early.claim_started(["k:TIMER"], "early", LEASE, 64) == []
            conn.execute(
                f"""INSERT INTO {table} (id, generation, kind, route, due, scheduled_at)
                SELECT 't-' || n, nextval('{table}_generation'), 'TIMER', 'k:TIMER',
                       now() - interval '1 hour' + n * interval '1 ms', now()
                FROM generate_series(0, %s - 1) AS n""".encode(),
                (args.rows,),
            )
        small = _claims(early, "early", 30)
        late = PostgresTimerStore(url, table=table, migrate=False)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"ANALYZE {table}".encode())
            grown = _claims(late, "late", 30)
        finally:
            late.close()
        a, b = statistics.median(small), statistics.median(grown)
        print(
            f"{args.rows} rows: claim of 64, plan made on the empty table {a:.2f} ms, "
            f"on the full table (analyzed) {b:.2f} ms: ratio {a / b:.2f}"
        )
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            drop_tables(conn, table)
        early.close()


if __name__ == "__main__":
    main()
