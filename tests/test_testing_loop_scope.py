"""A user project that uses the test kit gets no deprecation warning from pytest-asyncio
("asyncio_default_fixture_loop_scope is unset"), even under ``-W error::DeprecationWarning``;
a scope the project sets itself is kept."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TEST = """
from datetime import timedelta

import pytest


@pytest.mark.asyncio
async def test_an_async_timer(async_memory_scheduler, manual_clock):
    seen = []

    async def expire(item, attempt):
        seen.append(item.id)

    async_memory_scheduler.register("expire", expire)
    await async_memory_scheduler.create_single_timer("b-7", timedelta(minutes=1), "expire")
    await manual_clock.advance_async(timedelta(minutes=1))
    assert seen == ["b-7"]
"""


def test_no_deprecation_warning_in_a_project_that_sets_no_loop_scope(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    assert not list(pytester.path.glob("*.ini")) and not list(pytester.path.glob("*.toml"))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-W", "error::DeprecationWarning"
    )
    result.assert_outcomes(passed=1)
    output = result.stdout.str() + result.stderr.str()
    assert "is unset" not in output and "Deprecat" not in output
    result.stdout.fnmatch_lines(["*asyncio_default_fixture_loop_scope=function*"])


def test_a_loop_scope_the_project_sets_is_kept(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = module\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-W", "error::DeprecationWarning"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*asyncio_default_fixture_loop_scope=module*"])
