"""The test kit's fixtures reach a user's test file with no conftest: pytest loads them from
flowsched's ``pytest11`` entry point."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
from datetime import timedelta

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER

def test_the_clock_starts_at_new_year(manual_clock):
    assert isinstance(manual_clock, ManualClock)
    assert manual_clock.now().isoformat() == "2026-01-01T00:00:00+00:00"

def test_memory_scheduler(memory_scheduler, manual_clock):
    assert isinstance(memory_scheduler, InMemoryScheduler)
    seen = []
    memory_scheduler.subscribe(TIMER, lambda item, attempt: seen.append(manual_clock.now()))
    memory_scheduler.schedule(ScheduleItem("t", TIMER, manual_clock.now() + timedelta(seconds=5)))
    manual_clock.advance(timedelta(minutes=1))
    assert seen == [manual_clock.now() - timedelta(seconds=55)]

def test_mongo_scheduler_starts_empty(mongo_scheduler, manual_clock):
    assert type(mongo_scheduler).__name__ == "MongoScheduler"
    assert not mongo_scheduler.exists("t")
    mongo_scheduler.schedule(ScheduleItem("t", TIMER, manual_clock.now()))
    assert mongo_scheduler.exists("t")

def test_scheduler_delivers_inside_advance_at_the_due_time(scheduler, manual_clock):
    seen = []
    def handler(item, attempt):
        seen.append((item.id, attempt, manual_clock.now() - item.due))
        if attempt == 0:
            raise RuntimeError("first delivery fails")
    scheduler.subscribe(TIMER, handler)
    scheduler.schedule(ScheduleItem("t", TIMER, manual_clock.now() + timedelta(seconds=1)))
    manual_clock.advance(timedelta(seconds=10))
    assert seen == [("t", 0, timedelta(0)), ("t", 1, timedelta(0))]
    assert not scheduler.exists("t")
"""


@pytest.fixture
def user_dir(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("FLOWSCHED_MONGO_URI", raising=False)  # mongomock, as for a new user
    monkeypatch.delenv("FLOWSCHED_POSTGRES_URL", raising=False)  # no PostgreSQL: memory, mongo
    pytester.makepyfile(test_my_flows=USER_TESTS)
    assert not list(pytester.path.glob("conftest.py")) and not list(pytester.path.glob("*.ini"))
    return pytester


def test_a_user_test_file_uses_the_four_fixtures_without_a_conftest(
    user_dir: pytest.Pytester,
) -> None:
    result = user_dir.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "*test_scheduler_delivers_inside_advance_at_the_due_time?memory? PASSED*",
            "*test_scheduler_delivers_inside_advance_at_the_due_time?mongo? PASSED*",
        ]
    )


def test_the_fixtures_are_listed_by_pytest_as_flowscheds(user_dir: pytest.Pytester) -> None:
    result = user_dir.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*fixtures defined from flowsched.testing.plugin*"])
    # Each on its own: pytest orders them by "path:line" as text (plugin.py:107 before :42).
    for fixture in ("manual_clock", "memory_scheduler", "mongo_scheduler", "scheduler"):
        result.stdout.fnmatch_lines([f"{fixture} -- *flowsched/testing/plugin.py:*"])


def test_a_mongo_uri_with_no_server_is_one_clear_set_up_error(
    user_dir: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``FLOWSCHED_MONGO_URI`` set and the server down, the Mongo tests each failed in
    their body and again at tear-down with a raw driver error (10-20 s each)."""
    monkeypatch.setenv(
        "FLOWSCHED_MONGO_URI", "mongodb://app:s3cret@127.0.0.1:9/?directConnection=true"
    )
    result = user_dir.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=2)  # memory passes; mongo errors at set-up
    result.stdout.fnmatch_lines(["*ERROR at setup of test_mongo_scheduler_starts_empty*"])
    result.stdout.fnmatch_lines(["*but no MongoDB answers there*unset FLOWSCHED_MONGO_URI*"])
    assert "s3cret" not in result.stdout.str()
    assert "ERROR at teardown" not in result.stdout.str()


POSTGRES_TESTS = """
from datetime import timedelta

import pytest

from flowsched import ScheduleItem, ScheduleKind

def test_postgres_scheduler(postgres_scheduler, manual_clock):
    assert type(postgres_scheduler).__name__ == "PostgresScheduler"
    seen = []
    postgres_scheduler.register("ping", lambda item, attempt: seen.append(manual_clock.now()))
    due = manual_clock.now() + timedelta(seconds=5)
    postgres_scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, due, handler="ping"))
    manual_clock.advance(timedelta(minutes=1))
    assert seen == [due]

@pytest.mark.asyncio
async def test_async_postgres_scheduler(async_postgres_scheduler, manual_clock):
    assert type(async_postgres_scheduler).__name__ == "AsyncPostgresScheduler"
    item = ScheduleItem("t", ScheduleKind.TIMER, manual_clock.now())
    await async_postgres_scheduler.schedule(item)
    assert await async_postgres_scheduler.exists("t")

def test_each_adapter(scheduler):
    assert not scheduler.exists("t")
"""


def test_the_postgres_fixtures_run_on_the_server_a_fresh_table_each(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.delenv("FLOWSCHED_MONGO_URI", raising=False)
    monkeypatch.setenv("FLOWSCHED_POSTGRES_URL", postgres_url)
    pytester.makepyfile(test_pg=POSTGRES_TESTS)
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*test_each_adapter?postgres? PASSED*"])


def test_without_a_server_the_postgres_fixtures_skip_saying_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLOWSCHED_MONGO_URI", raising=False)
    monkeypatch.delenv("FLOWSCHED_POSTGRES_URL", raising=False)
    pytester.makepyfile(test_pg=POSTGRES_TESTS)
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(["*FLOWSCHED_POSTGRES_URL is not set*"])
