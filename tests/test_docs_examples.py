"""The documentation's examples run and print what the pages show.

Every ``>>>`` example on every page under ``docs/`` is a doctest (one namespace per page, so
each page's examples must import what they use). The pages below must keep theirs: an
example deleted by mistake would otherwise pass unnoticed. A Python block without ``>>>`` is
either run by another test or listed in ``NOT_DOCTESTED`` with the reason it cannot run here.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"

MUST_HAVE_EXAMPLES = {
    "explanation/delivery.md",  # redelivery backoff and dead letters
    "guides/durable-state-machines.md",  # transitions and python-statemachine, before/after
    "guides/metrics.md",
    "guides/recurring.md",
    "guides/several-services.md",  # several flow domains on one scheduler
    "guides/steering.md",  # timers(), iter_timers(), pause and resume
    "guides/timed-actions.md",  # named handlers, create_single_timer, on_failed
    "reference/port.md",  # virtual time with ManualClock
}


RUN_ELSEWHERE = {
    (
        "guides/testing.md",
        "def test_",
    ): "tests/test_docs_testing_guide.py runs them as a user's tests",
    ("tutorial.md", "credit_transfer = ("): "tests/flow/test_tutorial_flow.py runs it",
    (
        "guides/asyncio.md",
        "async def test_",
    ): "tests/asyncio_face/test_docs_asyncio_guide.py runs it as a user's test",
}

NOT_DOCTESTED = {
    ("guides/asyncio.md", "from fastapi import FastAPI"): "a service's wiring: needs FastAPI",
    ("guides/durable.md", 'MongoClient("mongodb://db1'): "connects to a replica set",
    ("guides/durable.md", "db = MongoClient(uri"): "a service's wiring: needs a MongoDB server",
    ("guides/durable-state-machines.md", "def load_order"): "a service's wiring: needs MongoDB",
    ("guides/metrics.md", "start_http_server"): "starts an HTTP server on port 9100",
    ("guides/network-faults.md", "proxy.partition()"): "tests/mongo/test_mongo_partition.py",
    ("guides/network-faults.md", "SeamBurst([node_a"): "tests/mongo/test_mongo_seam_burst.py",
    ("guides/postgres.md", "def expire_order"): "tests/postgres/test_docs_postgres_guide.py",
    ("guides/postgres.md", "PostgresFlowStore(url)"): "tests/postgres/test_docs_postgres_guide.py",
    ("guides/timed-actions.md", 'MongoClient("mongodb://localhost'): "needs a MongoDB server",
    ("reference/configuration.md", "MongoScheduler.from_config"): "needs a MongoDB server",
    ("reference/port.md", "InMemoryScheduler(clock=None"): "a signature, not a program",
    ("tutorial.md", "fraud_client.submit"): "a fragment: calls the reader's fraud service",
    ("tutorial.md", "def start_sanctions_check"): "a fragment of the domain built above",
    ("tutorial.md", "def test_fraud_check_times_out"): "a fragment: uses the tutorial's flows",
    ("tutorial.md", "db = MongoClient(uri)"): "a service's wiring: needs a MongoDB server",
}


def python_blocks_without_examples() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            if ">>> " not in block:
                found.append((str(page.relative_to(DOCS)), block))
    return found


def test_every_python_block_is_run_or_says_why_not() -> None:
    known = {**RUN_ELSEWHERE, **NOT_DOCTESTED}
    used = set()
    unexplained = []
    for page, block in python_blocks_without_examples():
        keys = [key for key in known if key[0] == page and key[1] in block]
        if len(keys) != 1:
            unexplained.append(f"docs/{page}: {block.splitlines()[0]!r}")
        used.update(keys)
    assert unexplained == [], "make these doctests (>>>) or list them in NOT_DOCTESTED"
    assert set(known) - used == set(), "listed blocks no longer on their page"


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
