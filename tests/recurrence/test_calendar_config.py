"""``ipf-scheduler.calendars.<name>`` in ``application.conf``: parsed into calendars (a bad
value is a ``ConfigError`` naming its key) and usable by name on every scheduler built from
that config (``InMemoryScheduler``, ``MongoScheduler`` and their asyncio twins)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from flowsched import (
    AsyncInMemoryScheduler,
    Calendar,
    ConfigError,
    InMemoryScheduler,
    ManualClock,
    Recurrence,
    SchedulingConfig,
)

START = datetime(2026, 12, 23, 12, tzinfo=UTC)
CONF = """
ipf-scheduler {
  mongodb { uri = "mongodb://localhost/ipf", database-name = "scheduled" }
  calendars {
    target2 {
      timezone = "Europe/Berlin"
      weekdays-off = [SAT, SUN]
      holidays = [ECB]
    }
    bavaria { timezone = "Europe/Berlin", weekdays-off = [sunday, 5], holidays = [DE-BY],
              dates-off = ["2026-12-24", "2026-12-31"] }
  }
}
"""
TARGET2 = Calendar(timezone="Europe/Berlin", weekdays_off=["SAT", "SUN"], holidays=["ECB"])
NAMED = Recurrence.cron("0 7 * * *", "Europe/Berlin", calendar="target2")


def test_the_calendars_block_is_read_by_name() -> None:
    calendars = SchedulingConfig.from_string(CONF).scheduler_settings().calendars
    assert set(calendars) == {"target2", "bavaria"}
    assert calendars["target2"] == TARGET2 and calendars["target2"].name == "target2"
    bavaria = calendars["bavaria"]
    assert bavaria.weekdays_off == (5, 6)
    assert bavaria.dates_off == (date(2026, 12, 24), date(2026, 12, 31))
    assert bavaria.is_open(date(2026, 1, 6)) is False  # Epiphany, a Bavarian holiday


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("timezone = Mars/Olympus", "ipf-scheduler.calendars.bad.timezone"),
        ("weekdays-off = [FUNDAY]", "ipf-scheduler.calendars.bad.weekdays-off"),
        ("weekdays-off = 5", "ipf-scheduler.calendars.bad.weekdays-off"),
        ('dates-off = ["24.12.2026"]', "ipf-scheduler.calendars.bad.dates-off"),
        ("holidays = [ECB, XX]", "ipf-scheduler.calendars.bad.holidays"),
        ("holidays = [DE-ZZ]", "ipf-scheduler.calendars.bad.holidays"),
        ("weekday-off = [SAT]", "ipf-scheduler.calendars.bad.weekday-off"),
    ],
)
def test_a_bad_calendar_value_is_a_config_error_naming_its_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        SchedulingConfig.from_string(f"ipf-scheduler.calendars.bad {{ {text} }}")
    assert [problem.key for problem in raised.value.problems] == [key]


def test_a_misspelt_block_or_a_calendar_that_is_no_object_is_named() -> None:
    with pytest.raises(ConfigError, match=r"did you mean ipf-scheduler\.calendars\?"):
        SchedulingConfig.from_string("ipf-scheduler.calendar.target2 { holidays = [ECB] }")
    with pytest.raises(ConfigError, match=r"ipf-scheduler\.calendars\.target2 = 3"):
        SchedulingConfig.from_string("ipf-scheduler.calendars.target2 = 3")
    with pytest.raises(ConfigError, match=r"ipf-scheduler\.calendars = "):
        SchedulingConfig.from_string("ipf-scheduler.calendars = [ECB]")


def test_in_memory_from_config_resolves_the_name_and_names_the_known_ones() -> None:
    config = SchedulingConfig.from_string(CONF)
    scheduler = InMemoryScheduler.from_config(config, clock=ManualClock(START))
    stored = scheduler.schedule_recurring("settlement", NAMED, handler="settle")
    assert stored.recurrence is not None and stored.recurrence.calendar == TARGET2
    assert stored.due == datetime(2026, 12, 24, 6, tzinfo=UTC)  # 07:00 in Berlin
    unknown = Recurrence.cron("0 7 * * *", calendar="tagret2")
    with pytest.raises(ValueError, match=r"'tagret2'.*known calendars: bavaria, target2"):
        scheduler.schedule_recurring("x", unknown, handler="settle")


def test_mongo_from_config_resolves_the_name_and_stores_the_calendar_itself() -> None:
    mongomock = pytest.importorskip("mongomock")
    from flowsched import MongoScheduler

    client = mongomock.MongoClient(tz_aware=True)
    config = SchedulingConfig.from_string(CONF)
    with MongoScheduler.from_config(
        config, clock=ManualClock(START), client_factory=lambda uri, **options: client
    ) as scheduler:
        scheduler.schedule_recurring("settlement", NAMED, handler="settle")
        document = client["scheduled"]["timers"].find_one({"_id": "settlement"})
    assert document["recurrence"]["calendar"]["holidays"] == ["ECB"]
    assert document["recurrence"]["calendar"]["name"] == "target2"
    # Any node reads it, whatever its own configuration says.
    plain = MongoScheduler(client["scheduled"]["timers"], node_id="plain", clock=ManualClock(START))
    item = plain.get("settlement")
    assert item is not None and item.recurrence is not None
    assert item.recurrence.calendar == TARGET2


@pytest.mark.asyncio
async def test_the_asyncio_twins_resolve_the_name_too() -> None:
    mongomock = pytest.importorskip("mongomock")
    from flowsched import AsyncMongoScheduler

    config = SchedulingConfig.from_string(CONF)
    memory = AsyncInMemoryScheduler.from_config(config, clock=ManualClock(START))
    stored = await memory.schedule_recurring("settlement", NAMED, handler="settle")
    assert stored.recurrence is not None and stored.recurrence.calendar == TARGET2
    client: Any = mongomock.MongoClient(tz_aware=True)

    async def closed() -> None:  # the asyncio scheduler awaits its client's close()
        return None

    client.close = closed
    mongo = AsyncMongoScheduler.from_config(
        config, clock=ManualClock(START), client_factory=lambda uri, **options: client
    )
    try:
        stored = await mongo.schedule_recurring("settlement", NAMED, handler="settle")
        assert stored.recurrence is not None and stored.recurrence.calendar == TARGET2
        with pytest.raises(ValueError, match="'nyse'"):
            await mongo.schedule_recurring("x", Recurrence.cron("0 7 * * *", calendar="nyse"))
    finally:
        await mongo.aclose()
