"""``@pytest.mark.flowsched(...)``: the test kit's scheduler fixtures take settings (a user's
test of dead letters needs ``max_attempts``), on every adapter and both faces, registered so
that ``--strict-markers`` accepts it, and a setting an adapter does not take is an error
naming it."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
from datetime import timedelta

import pytest

from flowsched import RedeliveryPolicy

pytestmark = pytest.mark.flowsched(redelivery=RedeliveryPolicy(initial=timedelta(seconds=1)))


def failing(item, attempt):
    raise ConnectionError("mail server down")


@pytest.mark.flowsched(max_attempts=3)
def test_a_failing_timer_is_a_dead_letter_after_three_attempts(scheduler, manual_clock):
    scheduler.register("remind", failing)
    scheduler.create_single_timer("r-1", timedelta(minutes=5), "remind")
    manual_clock.advance(timedelta(minutes=5, seconds=3))  # attempts at +0 s, +1 s, +3 s
    assert [(d.item.id, d.attempts) for d in scheduler.dead_letters()] == [("r-1", 3)]


def test_without_max_attempts_the_module_policy_redelivers_for_ever(scheduler, manual_clock):
    scheduler.register("remind", failing)
    scheduler.create_single_timer("r-1", timedelta(minutes=5), "remind")
    manual_clock.advance(timedelta(minutes=10))
    assert scheduler.dead_letters() == [] and scheduler.exists("r-1")


@pytest.mark.asyncio
@pytest.mark.flowsched(max_attempts=2)
async def test_the_async_fixtures_take_the_settings_too(async_scheduler, manual_clock):
    async_scheduler.register("remind", failing)
    await async_scheduler.create_single_timer("r-1", timedelta(minutes=5), "remind")
    await manual_clock.advance_async(timedelta(minutes=6))
    assert [d.attempts for d in await async_scheduler.dead_letters()] == [2]


@pytest.mark.flowsched(colour="blue")
def test_a_setting_no_scheduler_takes(memory_scheduler):
    pass
"""


def test_the_marker_sets_the_fixtures_settings_on_every_adapter(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLOWSCHED_MONGO_URI", raising=False)  # mongomock, as for a new user
    monkeypatch.delenv("FLOWSCHED_POSTGRES_URL", raising=False)  # no PostgreSQL: memory, mongo
    pytester.makepyfile(test_dead_letters=USER_TESTS)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--strict-markers", "-W", "error::pytest.PytestUnknownMarkWarning"
    )
    result.assert_outcomes(passed=6, errors=1)
    result.stdout.fnmatch_lines(
        ["*TypeError: @pytest.mark.flowsched: InMemoryScheduler takes no setting 'colour'*"]
    )


def test_the_marker_is_listed_by_pytest(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["@pytest.mark.flowsched(**settings):*"])
