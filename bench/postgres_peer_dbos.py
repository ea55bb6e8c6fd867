"""The DBOS peer of bench/postgres_peers.py (``dbos==3.4.0``), in its own virtualenv
(bench/.venv-dbos, ``make bench`` builds it):

    bench/.venv-dbos/bin/python bench/postgres_peer_dbos.py --url URL --timers N

Configured as DBOS documents a workflow to run later, a delayed queued workflow: one
``DBOS`` application on the server (``system_database_url``, a fresh
``dbos_system_schema``, dropped afterwards; ``system_database_engine`` a SQLAlchemy
``postgresql+psycopg`` engine of ours, pool 20, so that its statements can be counted),
one queue (``DBOS.register_queue(worker_concurrency=64, polling_interval_sec=0.1)``:
64 workflows at once on this executor, polled every 0.1 s instead of every 1 s), and
``--timers`` calls of ``queue.enqueue(timer, n, due)`` inside ``SetEnqueueOptions(
delay_seconds=due - now)``, the timers due uniformly over 1 s. DBOS has no bulk enqueue,
so they are enqueued one by one through its API before the due window, from 8 threads,
with a lead of 3 s plus 2.5 ms per timer (enough on this machine; a note on stderr if the
last enqueue ends after the first due time). DBOS moves a DELAYED workflow whose delay has
passed to its queue in a background thread every second; the queue's worker then
dequeues it. The workflow (a plain ``@DBOS.workflow()`` function, run in DBOS's thread
pool) records ``time.time()`` minus its ``due`` argument (the same epoch the delay was
computed from) first thing. Statements are those of the engine (SQLAlchemy
``before_cursor_execute``) from the first due time on: the transitions, dequeues, status
and result writes, including the work of other DBOS background threads. Stops after
``--limit`` seconds (default 60) past the first due time.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import postgres_peer_kit as kit
import psycopg
import sqlalchemy as sa
from dbos import DBOS, SetEnqueueOptions

LEAD_S = 3.0
PER_TIMER_S = 0.0025
ARGS = kit.parse_args(__doc__)
SEEN = kit.Lateness(ARGS.timers)


@DBOS.workflow()  # type: ignore[untyped-decorator]
def timer(n: int, due: float) -> None:
    SEEN.record(str(n), due)


def main() -> None:
    schema = kit.fresh_name("dbos")
    engine = sa.create_engine(
        ARGS.url.replace("postgresql://", "postgresql+psycopg://", 1),
        pool_size=20,
        max_overflow=0,
    )
    statements = [0]
    counting = threading.Lock()
    start = 0.0

    def count(*_: Any) -> None:
        with counting:
            statements[0] += 1

    DBOS(
        config={
            "name": "bench-dbos",
            "system_database_url": ARGS.url,
            "system_database_engine": engine,
            "dbos_system_schema": schema,
            "log_level": "WARNING",
        }
    )
    try:
        DBOS.launch()
        queue = DBOS.register_queue("timers", worker_concurrency=64, polling_interval_sec=0.1)
        start = time.time() + LEAD_S + PER_TIMER_S * ARGS.timers
        dues = kit.due_times(start, ARGS.timers)

        def enqueue(n: int) -> None:
            with SetEnqueueOptions(delay_seconds=dues[n] - time.time()):
                queue.enqueue(timer, n, dues[n])

        began = time.time()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(enqueue, range(ARGS.timers)))
        print(f"dbos: {ARGS.timers} enqueues in {time.time() - began:.1f} s", file=sys.stderr)
        if time.time() > start:
            print(
                f"dbos: the enqueues ended {time.time() - start:.1f} s after the first due time",
                file=sys.stderr,
            )
        time.sleep(max(0.0, start - time.time()))
        sa.event.listen(engine, "before_cursor_execute", count)
        SEEN.done.wait(max(0.0, start + ARGS.limit - time.time()))
        with counting:
            counted = statements[0]
        sa.event.remove(engine, "before_cursor_execute", count)
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=0)
        engine.dispose()
        with psycopg.connect(ARGS.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())
    kit.report(SEEN, start, counted)


if __name__ == "__main__":
    main()
