"""The example in the README's recurring section runs and prints what the README shows."""

from __future__ import annotations

import doctest

from test_readme_schedulers import README, section


def test_the_recurring_section_example_holds():
    parser = doctest.DocTestParser()
    test = parser.get_doctest(section("recurring"), {}, "README recurring", str(README), 0)
    assert test.examples, "the section has no >>> examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} README example(s) failed (see output)"
