"""The clock filter: a sample is worth half its round trip, the best recent one is kept,
and decisions are taken on the safe side (CONTRACT section 15, never early)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowsched.node.clock_filter import ClockFilter

T = datetime(2026, 1, 1, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.mark.parametrize("held", ["request", "reply"])
def test_a_held_round_trip_widens_the_bound_and_nothing_is_judged_early(held: str) -> None:
    # Node and server share one clock. The request leaves at T and a proxy holds it (the
    # server reads its clock at T + 3 s) or holds the reply (the server reads T).
    clock = ClockFilter()
    server = T + 3 * S if held == "request" else T
    sample = clock.add(sent=0.0, received=3.0, node_at_sent=T, server=server)
    assert abs(sample.offset) == 1.5 * S, "the midpoint estimate is 1.5 s off"
    assert sample.error >= 1.5 * S, "its error bound covers that"
    node_now = T + 10 * S  # the true server time is the same (monotonic 10.0)
    assert clock.earliest(10.0, node_now) <= node_now, "due judged by a time not yet reached"
    assert clock.latest(10.0, node_now) >= node_now, "a lease judged ended before it has"


def test_the_sample_with_the_smallest_round_trip_wins() -> None:
    clock = ClockFilter()
    clock.add(0.0, 3.0, T, T)  # held 3 s
    clock.add(10.0, 10.002, T + 10 * S, T + 10 * S + timedelta(milliseconds=1))
    clock.add(20.0, 21.0, T + 20 * S, T + 20 * S)
    offset, error = clock.offset()
    assert abs(offset) <= timedelta(milliseconds=2) and error < 10 * timedelta(milliseconds=1)


def test_old_samples_are_forgotten() -> None:
    clock = ClockFilter(keep=2)
    clock.add(0.0, 0.001, T, T)
    clock.add(1.0, 2.0, T, T)
    clock.add(2.0, 3.0, T, T)
    assert clock.offset()[1] >= 0.5 * S, "a sample pushed out still counts"


def test_a_host_with_no_skew_gets_no_warning_however_slow() -> None:
    clock = ClockFilter(max_skew=S)
    clock.add(0.0, 3.0, T, T)  # the midpoint says 1.5 s behind: within its error
    assert clock.skewed() is None


def test_a_skewed_host_is_reported() -> None:
    clock = ClockFilter(max_skew=S)
    clock.add(0.0, 0.01, T, T + 5 * S)
    skew = clock.skewed()
    assert skew is not None and skew > 4 * S


def test_before_any_sample_the_node_clock_is_trusted() -> None:
    clock = ClockFilter()
    assert clock.earliest(5.0, T) == clock.latest(5.0, T) == clock.estimate(5.0, T) == T


@pytest.mark.parametrize("step", [-3600 * S, -2 * S, 2 * S, 3600 * S])
def test_a_wall_clock_step_between_samples_changes_no_judgement(step: timedelta) -> None:
    # The server is 5 min ahead of the node. The node's wall clock then steps; its
    # monotonic clock does not. Every judgement is the same as without the step.
    clock = ClockFilter()
    server = T + 300 * S
    clock.add(0.0, 0.02, T, server + 10 * timedelta(milliseconds=1))
    at = 7.0  # monotonic seconds later; the true server time is server + 7 s
    judged = [f(at, T + 7 * S) for f in (clock.earliest, clock.estimate, clock.latest)]
    stepped = [f(at, T + 7 * S + step) for f in (clock.earliest, clock.estimate, clock.latest)]
    assert stepped == judged, f"a wall-clock step of {step} moved the judgement"
    truth = server + 7 * S
    assert judged[0] <= truth <= judged[2], f"{judged} does not bound {truth}"


def test_the_error_grows_with_a_samples_age() -> None:
    clock = ClockFilter()
    sample = clock.add(0.0, 0.01, T, T)
    assert sample.error_at(10_000.0) - sample.error == timedelta(seconds=0.15)
    # A later, looser sample beats a tight one grown old.
    clock.add(100_000.0, 100_000.1, T, T)
    best = clock.best(100_000.1)
    assert best is not None and best.taken == 100_000.1
