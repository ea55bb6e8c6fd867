"""The APScheduler 4 peer of bench/postgres_peers.py (``apscheduler==4.0.0a6``,
``AsyncScheduler`` on ``SQLAlchemyDataStore``, ``postgresql+asyncpg``), in its own
virtualenv (bench/.venv-apscheduler4, ``make bench`` builds it with SQLAlchemy and asyncpg):

    bench/.venv-apscheduler4/bin/python bench/postgres_peer_apscheduler4.py --url URL --timers N

Configured as APScheduler 4 documents a job to run once at a given time: a schedule with
a ``DateTrigger(due)`` per timer (the timers due uniformly over 1 s, from a lead of 2 s),
each running an ``async def`` job that records ``time.time()`` minus its ``due`` argument
(the epoch of the trigger's ``run_time``) first thing. The data store is a
``SQLAlchemyDataStore`` on an async engine of ours (pool 20) in a fresh PostgreSQL schema
(dropped afterwards), the event broker the default local one (one node), the scheduler's
role ``both`` with ``max_concurrent_jobs=64`` and the rest at its defaults
(``misfire_grace_time`` none: however late, a job runs). As for APScheduler 3 in
bench/postgres_peers.py, the schedules are written beforehand in bulk, so that the figures
are firing only: the task row by ``configure_task``, then one multi-row ``INSERT`` of
exactly the rows ``add_schedule`` would write (each a ``Schedule`` built as
``AsyncScheduler.add_schedule`` builds it, with ``next_fire_time = trigger.next()``,
marshalled with the data store's own serializer; ``add_schedule``'s one other effect, a
``ScheduleAdded`` event, has no listener before the scheduler starts). The scheduler
starts after the insert. Statements are those of the engine (SQLAlchemy
``before_cursor_execute``) from the scheduler's start on. Stops after ``--limit`` seconds
(default 60) past the first due time.
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime
from typing import Any

import postgres_peer_kit as kit
import sqlalchemy as sa
from apscheduler import AsyncScheduler, CoalescePolicy, Schedule
from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
from apscheduler.triggers.date import DateTrigger
from sqlalchemy.ext.asyncio import create_async_engine

ARGS = kit.parse_args(__doc__)
SEEN = kit.Lateness(ARGS.timers)
LEAD_S = 2.0


async def job(n: int, due: float) -> None:
    SEEN.record(str(n), due)


async def main() -> None:
    schema = kit.fresh_name("aps4")
    engine = create_async_engine(
        ARGS.url.replace("postgresql://", "postgresql+asyncpg://", 1), pool_size=20
    )
    statements = [0]

    def count(*_: Any) -> None:
        statements[0] += 1

    async with engine.begin() as conn:
        await conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    start = 0.0
    try:
        store = SQLAlchemyDataStore(engine, schema=schema)
        async with AsyncScheduler(store, max_concurrent_jobs=64) as scheduler:
            task = await scheduler.configure_task(job)
            start = time.time() + LEAD_S
            rows = []
            for n, due in enumerate(kit.due_times(start, ARGS.timers)):
                trigger = DateTrigger(datetime.fromtimestamp(due, UTC))
                schedule = Schedule(
                    id=f"t-{n}",
                    task_id=task.id,
                    trigger=trigger,
                    args=(n, due),
                    kwargs={},
                    paused=False,
                    coalesce=CoalescePolicy.latest,
                    misfire_grace_time=task.misfire_grace_time,
                    metadata=task.metadata.copy(),
                    max_jitter=None,
                    job_executor=task.job_executor,
                    job_result_expiration_time=0,
                )
                schedule.next_fire_time = trigger.next()
                rows.append(store._convert_outgoing_fire_times(schedule.marshal(store.serializer)))
            async with engine.begin() as conn:
                await conn.execute(store._t_schedules.insert(), rows)
            if time.time() > start:
                print("apscheduler4: the insert ended after the first due time", file=sys.stderr)
            sa.event.listen(engine.sync_engine, "before_cursor_execute", count)
            await scheduler.start_in_background()
            deadline = start + ARGS.limit
            while not SEEN.done.is_set() and time.time() < deadline:
                await asyncio.sleep(0.05)
            counted = statements[0]
            sa.event.remove(engine.sync_engine, "before_cursor_execute", count)
            await scheduler.stop()
    finally:
        async with engine.begin() as conn:
            await conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        await engine.dispose()
    kit.report(SEEN, start, counted)


if __name__ == "__main__":
    asyncio.run(main())
