"""A store's measured clock judges due times and leases on the safe side of its error."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from flowsched import ManualClock
from flowsched.store.measured_clock import MeasuredClock

T = datetime(2026, 1, 1, tzinfo=UTC)
HELD = timedelta(seconds=3)


@pytest.mark.parametrize("held", ["request", "reply"])
def test_held_measurements_never_make_anything_early(
    held: str, caplog: pytest.LogCaptureFixture
) -> None:
    node = ManualClock(T)  # the database shares this host's clock: no skew

    def hello() -> datetime:
        if held == "request":
            node.jump(HELD)
            return node.now()
        read = node.now()
        node.jump(HELD)
        return read

    clock = MeasuredClock(None, hello, node=node)
    with caplog.at_level(logging.WARNING, "flowsched.store"):
        for _ in range(3):
            assert clock.earliest() <= node.now(), "an item would be judged due early"
            assert clock.latest() >= node.now(), "a live lease would be judged ended"
    assert caplog.records == [], "a host with no skew was warned"


def test_an_injected_clock_is_the_truth_and_nothing_is_measured() -> None:
    truth = ManualClock(T)

    def hello() -> datetime:
        raise AssertionError("measured although a clock was injected")

    clock = MeasuredClock(truth, hello)
    assert clock.now() == clock.earliest() == clock.latest() == T


def test_a_database_that_cannot_tell_its_time_is_asked_once() -> None:
    asked: list[int] = []

    def hello() -> None:
        asked.append(1)
        return None

    clock = MeasuredClock(None, hello, node=ManualClock(T))
    assert clock.now() == T and clock.now() == T and asked == [1]
