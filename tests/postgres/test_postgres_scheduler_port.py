"""``PostgresScheduler`` keeps the scheduler port's contract (``check_scheduler_port``) on a
real PostgreSQL server, a fresh table for every scheduler."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from flowsched import ManualClock, RedeliveryPolicy
from flowsched.postgres import AsyncPostgresScheduler, PostgresScheduler
from flowsched.testing import check_async_scheduler_port, check_scheduler_port


@pytest.fixture
def made() -> Iterator[list[PostgresScheduler]]:
    schedulers: list[PostgresScheduler] = []
    yield schedulers
    for scheduler in schedulers:
        scheduler.close()


def test_postgres_scheduler_keeps_the_port(
    postgres_url: str, fresh_table: Callable[[], str], made: list[PostgresScheduler]
) -> None:
    def factory(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> PostgresScheduler:
        scheduler = PostgresScheduler(
            postgres_url, table=fresh_table(), clock=clock, redelivery=policy, pool_size=2
        )
        made.append(scheduler)
        return scheduler

    check_scheduler_port(factory, redelivery_factory=factory)


def test_async_postgres_scheduler_keeps_the_port(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    # Each scheduler is closed by the suite (aclose closes the pool it opened).
    def factory(
        clock: ManualClock, policy: RedeliveryPolicy | None = None
    ) -> AsyncPostgresScheduler:
        return AsyncPostgresScheduler(
            postgres_url, table=fresh_table(), clock=clock, redelivery=policy, pool_size=2
        )

    check_async_scheduler_port(factory, redelivery_factory=factory)
