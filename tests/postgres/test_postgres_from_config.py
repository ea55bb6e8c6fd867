"""``PostgresScheduler.from_config`` / ``AsyncPostgresScheduler.from_config`` read
``ipf-scheduler.postgres { url, table }`` and the scheduler settings; a config naming both
MongoDB and PostgreSQL, a missing url or a bad table is a ``ConfigError`` naming the keys."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from flowsched import (
    AsyncPostgresScheduler,
    ConfigError,
    ManualClock,
    PostgresScheduler,
    ScheduleItem,
    ScheduleKind,
    SchedulingConfig,
)

START = datetime(2026, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def _config(url: str, table: str, extra: str = "") -> SchedulingConfig:
    return SchedulingConfig.from_string(
        f"""
        ipf-scheduler {{
          postgres {{ url = "{url}", table = "{table}" }}
          flowsched {{ redelivery {{ initial = 2s, maximum = 5s }}, max-attempts = 2 {extra} }}
        }}
        """
    )


def test_the_table_and_settings_come_from_the_file(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    clock = ManualClock(START)
    attempts: list[datetime] = []

    def failing(item: ScheduleItem, attempt: int) -> None:
        attempts.append(clock.now())
        raise RuntimeError("down")

    config = _config(postgres_url, table, ", node-id = from-file, batch-size = 7")
    with PostgresScheduler.from_config(config, clock=clock) as scheduler:
        assert scheduler.table == table and scheduler.node_id == "from-file"
        scheduler.subscribe(ScheduleKind.TIMER, failing)
        scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, START + SECOND))
        clock.advance(SECOND)
        clock.advance(2 * SECOND)
        assert [(a - START) / SECOND for a in attempts] == [1, 3]
        assert [d.item.id for d in scheduler.dead_letters()] == ["t-1"]


def test_the_async_face_reads_the_same(postgres_url: str, fresh_table: Callable[[], str]) -> None:
    table = fresh_table()

    async def main() -> None:
        scheduler = AsyncPostgresScheduler.from_config(
            _config(postgres_url, table), node_id="given", clock=ManualClock(START)
        )
        await scheduler.start()
        try:
            assert scheduler.table == table and scheduler.node_id == "given"
            await scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, START))
            assert await scheduler.exists("t")
        finally:
            await scheduler.aclose()

    asyncio.run(main())


def test_mongodb_and_postgres_together_is_an_error_naming_both() -> None:
    # Refused when the file is read: nothing can be built from it.
    with pytest.raises(ConfigError, match=r"ipf-scheduler\.mongodb and ipf-scheduler\.postgres"):
        SchedulingConfig.from_string(
            """
            ipf-scheduler.mongodb.uri = "mongodb://localhost/ipf"
            ipf-scheduler.postgres.url = "postgresql://app@db/app"
            """
        )


@pytest.mark.parametrize(
    ("block", "key"),
    [
        ('postgres { table = "t" }', "ipf-scheduler.postgres.url"),
        ('postgres { url = "mysql://x/y" }', "ipf-scheduler.postgres.url"),
        ('postgres { url = "postgresql://x/y", table = "Bad-N" }', "ipf-scheduler.postgres.table"),
        ('postgres { url = "postgresql://x/y", tabel = "t" }', "ipf-scheduler.postgres.table"),
    ],
)
def test_a_bad_postgres_block_names_the_key(block: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        PostgresScheduler.from_config(SchedulingConfig.from_string(f"ipf-scheduler {{ {block} }}"))
