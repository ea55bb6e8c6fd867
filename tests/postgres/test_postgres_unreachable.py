"""A server that cannot be reached is one clear ``SchedulerUnavailable`` at construction,
within ``op_timeout``, naming the host and never the password - for the store, both
scheduler faces and the flow store."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from flowsched import AsyncPostgresScheduler, PostgresScheduler, SchedulerUnavailable
from flowsched.postgres import PostgresTimerStore

DOWN = "postgresql://app:s3cret@127.0.0.1:9/app"  # port 9 (discard): nothing listens


def test_the_store_and_scheduler_say_the_server_is_unreachable() -> None:
    for build in (
        lambda: PostgresTimerStore(DOWN, op_timeout=0.5),
        lambda: PostgresScheduler(DOWN, op_timeout=timedelta(seconds=0.5)),
    ):
        with pytest.raises(SchedulerUnavailable, match=r"127\.0\.0\.1:9/app") as caught:
            build()
        assert "s3cret" not in str(caught.value)


def test_the_async_scheduler_says_so_when_it_starts() -> None:
    async def main() -> None:
        scheduler = AsyncPostgresScheduler(DOWN, op_timeout=timedelta(seconds=0.5))
        with pytest.raises(SchedulerUnavailable, match=r"127\.0\.0\.1:9/app"):
            await scheduler.start()
        await scheduler.aclose()

    asyncio.run(main())
