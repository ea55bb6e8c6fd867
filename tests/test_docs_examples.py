"""The documentation's examples run and print what the pages show.

Every ``>>>`` example on every page under ``docs/`` is a doctest (one namespace per page, so
each page's examples must import what they use). The pages below must keep theirs: an
example deleted by mistake would otherwise pass unnoticed.
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"

MUST_HAVE_EXAMPLES = {
    "explanation/delivery.md",  # redelivery backoff and dead letters
    "guides/metrics.md",
    "guides/recurring.md",
    "guides/several-services.md",  # several flow domains on one scheduler
    "guides/timed-actions.md",  # named handlers, create_single_timer, on_failed
    "reference/port.md",  # virtual time with ManualClock
}


def pages_with_examples() -> list[str]:
    return sorted(
        str(page.relative_to(DOCS))
        for page in DOCS.rglob("*.md")
        if ">>> " in page.read_text(encoding="utf-8")
    )


def test_the_pages_that_teach_by_example_still_have_examples() -> None:
    assert set(pages_with_examples()) >= MUST_HAVE_EXAMPLES


@pytest.mark.parametrize("page", pages_with_examples())
def test_the_examples_of_a_page_hold(page: str) -> None:
    path = DOCS / page
    parser = doctest.DocTestParser()
    test = parser.get_doctest(path.read_text(encoding="utf-8"), {}, page, str(path), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} example(s) of docs/{page} failed (see output)"
