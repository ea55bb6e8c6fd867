"""The procrastinate peer of bench/postgres_peers.py (``procrastinate==3.10.0``, psycopg 3),
in its own virtualenv (bench/.venv-procrastinate, ``make bench`` builds it):

    bench/.venv-procrastinate/bin/python bench/postgres_peer_procrastinate.py --url URL --timers N

Configured as procrastinate documents a job to run later (``schedule_at``): ``--timers`` jobs
of one ``async def`` task, each a ``Job`` with its own ``scheduled_at`` (due uniformly over
1 s from a lead of 3 s), deferred in one ``job_manager.batch_defer_jobs_async`` call (the
bulk path of ``Task.batch_defer_async``: one statement through procrastinate's own API,
before the due window). procrastinate's own schema (``schema_manager.apply_schema_async``)
in a fresh PostgreSQL schema (the pool's connections have it as their ``search_path``),
dropped afterwards. One worker: ``run_worker_async(concurrency=64,
fetch_job_polling_interval=0.1, listen_notify=True, install_signal_handlers=False)`` and the
rest at its defaults (``delete_jobs="never"``: a finished job's row stays, marked
succeeded). A scheduled job is not announced when it falls due, only when deferred, so the
worker finds due jobs by polling: 0.1 s instead of the default 5 s (pgqueuer's minimum
re-poll; flowsched sleeps until the next due row). The task (``pass_context=True``) records
``time.time()`` minus the job's stored ``scheduled_at`` first thing. Statements are counted
at the connector (every ``execute_query*`` call: fetch, finish, heartbeat, abort polls; the
LISTEN connection's one-time setup is not counted). Stops after ``--limit`` seconds
(default 60) past the first due time.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from datetime import UTC, datetime
from typing import Any

import postgres_peer_kit as kit
import procrastinate
import psycopg
from procrastinate import jobs

LEAD_S = 3.0
QUEUE = "bench"


class CountingConnector(procrastinate.PsycopgConnector):  # type: ignore[misc]
    """procrastinate's psycopg connector, counting the statements it sends."""

    statements = 0

    async def execute_query_async(self, query: Any, **arguments: Any) -> None:
        CountingConnector.statements += 1
        await super().execute_query_async(query, **arguments)

    async def execute_query_one_async(self, query: Any, **arguments: Any) -> Any:
        CountingConnector.statements += 1
        return await super().execute_query_one_async(query, **arguments)

    async def execute_query_all_async(self, query: Any, **arguments: Any) -> Any:
        CountingConnector.statements += 1
        return await super().execute_query_all_async(query, **arguments)


async def main(args: kit.Args) -> None:
    schema = kit.fresh_name("pcr")
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    seen = kit.Lateness(args.timers)
    connector = CountingConnector(
        conninfo=args.url, kwargs={"options": f"-c search_path={schema}"}, max_size=10
    )
    app = procrastinate.App(connector=connector)

    @app.task(name="timer", queue=QUEUE, pass_context=True)  # type: ignore[untyped-decorator]
    async def timer(context: Any, n: int) -> None:
        seen.record(str(context.job.id), context.job.scheduled_at.timestamp())

    try:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            start = time.time() + LEAD_S
            batch = [
                jobs.Job(
                    id=None,
                    queue=QUEUE,
                    lock=None,
                    queueing_lock=None,
                    task_name="timer",
                    task_kwargs={"n": n},
                    scheduled_at=datetime.fromtimestamp(due, UTC),
                )
                for n, due in enumerate(kit.due_times(start, args.timers))
            ]
            await app.job_manager.batch_defer_jobs_async(batch)
            if time.time() > start:
                print("procrastinate: the defer ended after the first due time", file=sys.stderr)
            CountingConnector.statements = 0
            worker = asyncio.create_task(
                app.run_worker_async(
                    queues=[QUEUE],
                    concurrency=64,
                    fetch_job_polling_interval=0.1,
                    listen_notify=True,
                    install_signal_handlers=False,
                )
            )
            deadline = start + args.limit
            while not seen.done.is_set() and time.time() < deadline and not worker.done():
                await asyncio.sleep(0.05)
            statements = CountingConnector.statements
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(worker, 30)
        kit.report(seen, start, statements)
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


if __name__ == "__main__":
    asyncio.run(main(kit.parse_args(__doc__)))
