"""Fixtures for the state-machine integrations: a manual clock, an in-memory scheduler on it,
and a small stand-in for the async schedulers (see fake_async_port.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("transitions")

sys.path.insert(0, str(Path(__file__).parent))

from fake_async_port import FakeAsyncScheduler

from flowsched import InMemoryScheduler, ManualClock

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def scheduler(clock: ManualClock) -> Iterator[InMemoryScheduler]:
    with InMemoryScheduler(clock=clock) as built:
        yield built


@pytest.fixture
def async_port(clock: ManualClock) -> FakeAsyncScheduler:
    return FakeAsyncScheduler(clock)
