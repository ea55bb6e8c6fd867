"""docs/guides/asyncio.md stays true: its async test runs as a user would run it (a
directory of its own, no conftest: the ``pytest11`` plugin serves the async fixtures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "asyncio.md"


def test_the_guides_async_test_passes_as_a_users_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLOWSCHED_MONGO_URI", raising=False)
    monkeypatch.delenv("FLOWSCHED_POSTGRES_URL", raising=False)  # as a new user: no server
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    tests = [block for block in blocks if "async def test_" in block]
    assert len(tests) == 1, "the guide's async test changed: update this test"
    pytester.makepyfile(test_guide=tests[0])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)  # async_scheduler: in memory, then MongoDB (mongomock)
