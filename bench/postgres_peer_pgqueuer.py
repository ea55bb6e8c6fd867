"""The pgqueuer peer of bench/postgres_peers.py (``pgqueuer==1.6.0``, asyncpg), in its own
virtualenv (bench/.venv-pgqueuer, ``make bench`` builds it):

    bench/.venv-pgqueuer/bin/python bench/postgres_peer_pgqueuer.py --url URL --timers N

Configured as pgqueuer documents a job to run later: one ``Queries.enqueue`` call with
lists (one bulk statement through pgqueuer's own API, before the due window) of ``--timers``
jobs on one entrypoint, each with ``execute_after`` set so that the jobs fall due uniformly
over 1 s from a lead of 3 s; pgqueuer's own schema (``Queries.install``) in a fresh
PostgreSQL schema (``PGQUEUER_SCHEMA``) with a fresh prefix (so its NOTIFY channel is its
own too), dropped afterwards. One worker: a ``QueueManager`` on one asyncpg connection
(``AsyncpgDriver``), ``run(batch_size=100, dequeue_timeout=1 s)`` (the floor's and
flowsched's claim size and poll; pgqueuer's default batch is 10:
``FLOWSCHED_BENCH_PGQ_BATCH=10`` sets that), no concurrency cap (its
``max_concurrent_tasks`` must be at least twice the batch, and the handlers are coroutines
that do nothing, so a cap of 64 could only slow it), ``on_failure="delete"``. The handler,
an ``async def`` entrypoint, records
``time.time()`` minus the job's own ``execute_after`` (the due time the server stored: the
enqueue's ``now()`` plus the delay) first thing. The first due time is the earliest stored
``execute_after``. Statements are counted at the driver (every ``fetch``, ``execute`` and
``notify`` of the worker's connection: dequeues, status-log and heartbeat flushes, the
next-due probes). Stops after ``--limit`` seconds (default 60) past the first due time.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import timedelta
from typing import Any

import postgres_peer_kit as kit

ARGS = kit.parse_args(__doc__)
SCHEMA = kit.fresh_name("pgq")
os.environ["PGQUEUER_SCHEMA"] = SCHEMA  # read once, at pgqueuer's first settings lookup
os.environ["PGQUEUER_PREFIX"] = SCHEMA + "_"

import asyncpg  # noqa: E402
from pgqueuer.adapters.drivers.asyncpg import (  # noqa: E402
    AsyncpgDriver,
)
from pgqueuer.adapters.persistence.queries import (  # noqa: E402
    Queries,
)
from pgqueuer.core.qm import QueueManager  # noqa: E402

LEAD_S = 3.0
BATCH = int(os.environ.get("FLOWSCHED_BENCH_PGQ_BATCH", "100"))


class CountingDriver(AsyncpgDriver):  # type: ignore[misc]
    """pgqueuer's asyncpg driver, counting the statements it sends."""

    statements = 0

    async def fetch(self, query: str, *args: object) -> Any:
        CountingDriver.statements += 1
        return await super().fetch(query, *args)

    async def execute(self, query: str, *args: object) -> Any:
        CountingDriver.statements += 1
        return await super().execute(query, *args)

    async def notify(self, channel: str, payload: str) -> None:
        CountingDriver.statements += 1
        await super().notify(channel, payload)


async def main() -> None:
    seen = kit.Lateness(ARGS.timers)
    setup = await asyncpg.connect(ARGS.url)
    try:
        queries = Queries(AsyncpgDriver(setup))
        await queries.install()
        start_wall = time.time() + LEAD_S
        dues = kit.due_times(start_wall, ARGS.timers)
        now = time.time()
        await queries.enqueue(
            ["timer"] * ARGS.timers,
            [str(n).encode() for n in range(ARGS.timers)],
            [0] * ARGS.timers,
            execute_after=[timedelta(seconds=due - now) for due in dues],
        )
        table = queries.qbe.settings.queue_table
        first = await setup.fetchval(f"SELECT min(execute_after) FROM {SCHEMA}.{table}")
        start = first.timestamp()
        if time.time() > start:
            print("pgqueuer: the enqueue ended after the first due time", file=sys.stderr)

        worker_conn = await asyncpg.connect(ARGS.url)
        qm = QueueManager(Queries(CountingDriver(worker_conn)))

        @qm.entrypoint("timer")  # type: ignore[untyped-decorator]
        async def timer(job: Any) -> None:
            seen.record(str(job.id), job.execute_after.timestamp())

        CountingDriver.statements = 0
        running = asyncio.create_task(
            qm.run(batch_size=BATCH, dequeue_timeout=timedelta(seconds=1))
        )
        deadline = start + ARGS.limit
        while not seen.done.is_set() and time.time() < deadline and not running.done():
            await asyncio.sleep(0.05)
        statements = CountingDriver.statements
        qm.shutdown.set()
        try:
            await asyncio.wait_for(running, 30)
        finally:
            await worker_conn.close()
        kit.report(seen, start, statements)
    finally:
        await setup.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        await setup.close()


if __name__ == "__main__":
    asyncio.run(main())
