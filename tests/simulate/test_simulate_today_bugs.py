"""The faults the simulator found breaking the code before issue 20, kept as regressions.

Each seed broke an invariant before the fixes (a node with its clock ahead fired early or
took a live lease; a clock that jumped did both; a node paused past its lease, claims queued
behind a slow handler or a starved renewal ran claims whose lease had ended). They pass with
the database's clock (carried forward on the monotonic clock between measurements) and the
lease-alive check before each handler starts."""

import pytest

from flowsched.testing import simulate


@pytest.mark.parametrize("seed", [0, 2, 7])
def test_a_node_whose_clock_is_ahead_does_not_fire_early(seed: int) -> None:
    report = simulate(seed, faults="skew")
    assert report.ok, report.summary()


@pytest.mark.parametrize("seed", [93, 130])
def test_a_node_whose_clock_is_ahead_takes_no_live_lease(seed: int) -> None:
    report = simulate(seed, faults="skew")
    assert report.ok, report.summary()


@pytest.mark.parametrize("seed", [1, 13, 57])
def test_a_clock_that_jumps_neither_fires_early_nor_steals(seed: int) -> None:
    report = simulate(seed, faults="clock_steps")
    assert report.ok, report.summary()


@pytest.mark.parametrize("seed", [7, 8, 22])
def test_a_node_paused_past_its_lease_runs_none_of_the_claims_it_lost(seed: int) -> None:
    report = simulate(seed, faults="pause")
    assert report.ok, report.summary()


@pytest.mark.parametrize("seed", [3, 27])
def test_claims_queued_behind_a_slow_handler_are_not_run_after_their_lease(seed: int) -> None:
    report = simulate(seed, faults="slow_handlers,races")
    assert report.ok, report.summary()


@pytest.mark.parametrize("seed", [1, 3])
def test_a_handler_that_starves_renewal_does_not_let_its_batch_run_late(seed: int) -> None:
    report = simulate(seed, faults="slow_handlers,starved_renewals")
    assert report.ok, report.summary()


@pytest.mark.parametrize("seed", [80])
def test_an_outage_that_stops_renewal_does_not_let_a_batch_run_late(seed: int) -> None:
    report = simulate(seed, faults="outage,slow_handlers")
    assert report.ok, report.summary()
