"""Fixtures for the flow tests (the kit itself is in flowkit.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flowkit import T0, Harness, HarnessFactory, make_harness

from flowsched import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def harness(clock: ManualClock) -> Iterator[HarnessFactory]:
    """``harness(conf, **kw)``: see ``flowkit.make_harness``; schedulers closed afterwards."""
    built: list[Harness] = []

    def make(conf: str, **kw: Any) -> Harness:
        h = make_harness(clock, conf, **kw)
        built.append(h)
        return h

    yield make
    for h in built:
        h.scheduler.close()
