"""``PostgresScheduler.from_config`` / ``AsyncPostgresScheduler.from_config`` read
``ipf-scheduler.postgres { url, table }`` and the scheduler settings; a config naming both
MongoDB and PostgreSQL, a missing url or a bad table is a ``ConfigError`` naming the keys.
Like every scheduler's ``from_config`` they apply the named calendars, ``shutdown-timeout``
(close / aclose bounded by it, naming what was left running) and the history's
``history-limit`` and ``history-retention``."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from flowsched import (
    AsyncPostgresScheduler,
    Calendar,
    ConfigError,
    ManualClock,
    PostgresScheduler,
    Recurrence,
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


FRIDAY = datetime(2026, 1, 2, 12, tzinfo=UTC)
CALENDARS = """
  calendars { weekend { timezone = "Europe/Berlin", weekdays-off = [SAT, SUN] } }
"""
WEEKEND = Calendar(timezone="Europe/Berlin", weekdays_off=["SAT", "SUN"])
AT_SEVEN = Recurrence.cron("0 7 * * *", "Europe/Berlin", calendar="weekend")


def _with(url: str, table: str, flowsched: str = "", top: str = "") -> SchedulingConfig:
    return SchedulingConfig.from_string(
        f"""
        ipf-scheduler {{
          postgres {{ url = "{url}", table = "{table}" }}
          flowsched {{ {flowsched} }}
          {top}
        }}
        """
    )


def test_named_calendars_resolve_and_travel_with_the_row(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    config = _with(postgres_url, table, top=CALENDARS)
    with PostgresScheduler.from_config(config, clock=ManualClock(FRIDAY)) as scheduler:
        assert dict(scheduler.calendars) == {"weekend": WEEKEND}
        stored = scheduler.schedule_recurring("settle", AT_SEVEN, handler="settle")
        assert stored.due == datetime(2026, 1, 5, 6, tzinfo=UTC)  # Monday 07:00 in Berlin
        with pytest.raises(ValueError, match=r"'wekend'.*known calendars: weekend"):
            scheduler.schedule_recurring("x", Recurrence.every(SECOND, calendar="wekend"))
    # A node built without the config reads the calendar itself from the row.
    with PostgresScheduler(postgres_url, table=table, clock=ManualClock(FRIDAY)) as plain:
        item = plain.get("settle")
        assert item is not None and item.recurrence is not None
        assert item.recurrence.calendar == WEEKEND


def test_the_async_face_resolves_named_calendars(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    config = _with(postgres_url, fresh_table(), top=CALENDARS)

    async def main() -> None:
        scheduler = AsyncPostgresScheduler.from_config(config, clock=ManualClock(FRIDAY))
        await scheduler.start()
        try:
            stored = await scheduler.schedule_recurring("settle", AT_SEVEN, handler="settle")
            assert stored.recurrence is not None and stored.recurrence.calendar == WEEKEND
            assert stored.due == datetime(2026, 1, 5, 6, tzinfo=UTC)
        finally:
            await scheduler.aclose()

    asyncio.run(main())


def test_history_limit_and_retention_come_from_the_file(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    clock = ManualClock(START)
    settings = (
        "redelivery { initial = 1s, maximum = 1s }, max-attempts = 5, "
        "history-limit = 2, history-retention = 1h"
    )
    config = _with(postgres_url, fresh_table(), settings)

    def failing(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError(f"attempt {attempt}")

    with PostgresScheduler.from_config(config, clock=clock) as scheduler:
        scheduler.subscribe(ScheduleKind.TIMER, failing)
        scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, START))
        for _ in range(4):
            clock.advance(SECOND)
        attempts = scheduler.history("t")
        assert [a.error_message for a in attempts] == ["attempt 3", "attempt 4"]
        clock.advance(SECOND)  # the fifth: a dead letter
        assert [d.item.id for d in scheduler.dead_letters()] == ["t"]
        assert len(scheduler.history("t")) == 2
        clock.advance(timedelta(minutes=59))
        assert len(scheduler.history("t")) == 2  # kept after the item is gone
        clock.advance(timedelta(minutes=2))  # past the retention:
        clock.advance(SECOND)  # the node's next look-up (next_due) trims it
        assert scheduler.history("t") == []


def test_close_is_bounded_by_the_files_shutdown_timeout(
    postgres_url: str, fresh_table: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    config = _with(postgres_url, fresh_table(), "shutdown-timeout = 200ms")
    started, release = threading.Event(), threading.Event()

    def hangs(item: ScheduleItem, attempt: int) -> None:
        started.set()
        release.wait(30)

    scheduler = PostgresScheduler.from_config(config)
    scheduler.register("h", hangs)
    scheduler.start()
    try:
        scheduler.schedule(ScheduleItem("stuck", ScheduleKind.TIMER, scheduler.now(), handler="h"))
        assert started.wait(20), "the handler never started"
        with caplog.at_level(logging.WARNING, logger="flowsched.node"):
            scheduler.close()
        assert not release.is_set()
        left = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
        assert len(left) == 1 and "stuck" in left[0], f"close log: {left}"
    finally:
        release.set()


def test_aclose_is_bounded_by_the_files_shutdown_timeout(
    postgres_url: str, fresh_table: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    config = _with(postgres_url, fresh_table(), "shutdown-timeout = 200ms")
    cancelled: list[str] = []

    async def main() -> None:
        started = asyncio.Event()

        async def hangs(item: ScheduleItem, attempt: int) -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(item.id)
                raise

        scheduler = AsyncPostgresScheduler.from_config(config)
        scheduler.register("h", hangs)
        await scheduler.start()
        item = ScheduleItem("stuck", ScheduleKind.TIMER, scheduler.now(), handler="h")
        await scheduler.schedule(item)
        await asyncio.wait_for(started.wait(), 20)
        with caplog.at_level(logging.WARNING, logger="flowsched.node"):
            await scheduler.aclose()

    asyncio.run(main())
    assert cancelled == ["stuck"]
    left = [r.getMessage() for r in caplog.records if "stuck" in r.getMessage()]
    assert len(left) == 1, f"aclose log: {[r.getMessage() for r in caplog.records]}"
