"""InMemoryScheduler.from_config: redelivery, max-attempts and workers from application.conf."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowsched import ConfigError, InMemoryScheduler, ManualClock, SchedulingConfig
from flowsched.port import ScheduleItem, ScheduleKind

START = datetime(2026, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def test_redelivery_and_max_attempts_come_from_the_file() -> None:
    config = SchedulingConfig.from_string(
        """
        ipf-scheduler.mongodb.uri = "mongodb://localhost/ipf"   # not used in process
        ipf-scheduler.flowsched {
          redelivery { initial = 2s, maximum = 5s }
          max-attempts = 3
        }
        """
    )
    clock = ManualClock(START)
    attempts: list[datetime] = []

    def failing(item: ScheduleItem, attempt: int) -> None:
        attempts.append(clock.now())
        raise RuntimeError("down")

    with InMemoryScheduler.from_config(config, clock=clock) as scheduler:
        scheduler.subscribe(ScheduleKind.TIMER, failing)
        scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, START + SECOND))
        for wait in (1, 2, 4):  # step by step: each redelivery counts from the failure
            clock.advance(wait * SECOND)

        # Delivered at 1s, redelivered 2s later, then 4s later; dead after the third failure.
        assert [(a - START) / SECOND for a in attempts] == [1, 3, 7]
        assert [d.item.id for d in scheduler.dead_letters()] == ["t-1"]


def test_without_settings_the_defaults_apply() -> None:
    clock = ManualClock(START)
    attempts: list[datetime] = []

    def failing(item: ScheduleItem, attempt: int) -> None:
        attempts.append(clock.now())
        raise RuntimeError("down")

    scheduler = InMemoryScheduler.from_config(SchedulingConfig.empty(), clock=clock)
    scheduler.subscribe(ScheduleKind.TIMER, failing)
    scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, START + SECOND))
    for wait in (1, 3, 6):
        clock.advance(wait * SECOND)
    scheduler.close()

    assert [(a - START) / SECOND for a in attempts] == [1, 4, 10]  # 3s, then 6s
    assert scheduler.dead_letters() == []


def test_a_bad_setting_never_reaches_the_scheduler() -> None:
    with pytest.raises(ConfigError, match=r"ipf-scheduler\.flowsched\.max-attempts = 0"):
        SchedulingConfig.from_string("ipf-scheduler.flowsched.max-attempts = 0")


@pytest.mark.parametrize(("text", "expected"), [('"3"', 3.0), ('"1.5"', 1.5), ("2", 2.0)])
def test_a_quoted_factor_is_read_like_a_quoted_count(text: str, expected: float) -> None:
    config = SchedulingConfig.from_string(
        f'ipf-scheduler.flowsched {{ workers = "4", redelivery.factor = {text} }}'
    )
    settings = config.scheduler_settings()
    assert (settings.workers, settings.redelivery_factor) == (4, expected)


@pytest.mark.parametrize("text", ['"twice"', '"nan"', '"0.5"', '"1e999"'])
def test_a_quoted_factor_that_is_no_number_from_1_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"redelivery\.factor = .*: must be a number >= 1"):
        SchedulingConfig.from_string(f"ipf-scheduler.flowsched.redelivery.factor = {text}")


def test_an_ipf_scheduler_block_set_to_null_is_an_error_naming_it() -> None:
    # `ipf-scheduler = null` is a mistake (a block emptied by an override, a typo'd
    # substitution), not a request for the defaults: the error names the key.
    import pytest

    from flowsched import ConfigError, SchedulingConfig

    with pytest.raises(ConfigError, match=r"ipf-scheduler = null: must be an object"):
        SchedulingConfig.from_string("ipf-scheduler = null")
