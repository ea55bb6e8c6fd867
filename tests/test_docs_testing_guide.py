"""docs/guides/testing.md stays true: its snippets are test files that pass as a user would
run them (a directory of their own, no conftest), and it lists every guarantee
``check_scheduler_port`` tries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowsched.testing import port_guarantees

pytest_plugins = ["pytester"]

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "testing.md"


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


def test_the_guides_snippets_pass_as_a_users_tests(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLOWSCHED_MONGO_URI", raising=False)
    monkeypatch.delenv("FLOWSCHED_POSTGRES_URL", raising=False)  # as a new user: no server
    found = snippets()
    assert len(found) == 4, "the guide's python snippets changed: update this test"
    for n, code in enumerate(found):
        pytester.makepyfile(**{f"test_guide_{n}": code})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    # The first three use the `scheduler` fixture (memory and mongo), the fourth runs once.
    result.assert_outcomes(passed=7)


def test_the_guide_lists_every_guarantee_in_order() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    block = text.split("<!-- guarantees:", 1)[1].split("<!-- /guarantees -->", 1)[0]
    listed = [line[2:] for line in block.splitlines() if line.startswith("- ")]
    assert listed == port_guarantees()
