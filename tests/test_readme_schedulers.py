"""The examples in the README's scheduler section run and print what the README shows."""

from __future__ import annotations

import doctest
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def section(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"<!-- section: {name} -->")
    end = text.find("<!-- section:", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_schedulers_section_examples_hold():
    parser = doctest.DocTestParser()
    test = parser.get_doctest(section("schedulers"), {}, "README schedulers", str(README), 0)
    assert test.examples, "the section has no >>> examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} README example(s) failed (see output)"
