"""Fixtures for the state-machine integrations: a manual clock and an in-memory scheduler on
it. The async machines run on the test kit's ``async_memory_scheduler`` (a real
``AsyncInMemoryScheduler`` on its ``manual_clock``; ``await manual_clock.advance_async(d)``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

pytest.importorskip("transitions")

from flowsched import InMemoryScheduler, ManualClock

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def scheduler(clock: ManualClock) -> Iterator[InMemoryScheduler]:
    with InMemoryScheduler(clock=clock) as built:
        yield built
