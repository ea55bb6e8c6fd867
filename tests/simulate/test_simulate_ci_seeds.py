"""A fixed set of seeds, under every fault today's code survives, keeps every invariant.

`make soak` runs many more (and every fault kind); `flowsched simulate --seeds N` the same
from the command line."""

import pytest

from flowsched.testing import simulate
from flowsched.testing.simulation import INVARIANTS
from tests.simulate.faults import TODAY_SAFE

CHUNK = 50


@pytest.mark.parametrize("first", range(0, 1000, CHUNK))
def test_seeds_keep_every_invariant_under_the_faults_today_survives(first: int) -> None:
    for seed in range(first, first + CHUNK):
        report = simulate(seed, faults=TODAY_SAFE)
        assert report.ok, report.summary()


@pytest.mark.parametrize("nodes", [1, 2, 5])
def test_other_cluster_sizes_keep_every_invariant(nodes: int) -> None:
    for seed in range(10):
        report = simulate(seed, nodes=nodes, timers=8, faults=TODAY_SAFE)
        assert report.ok, report.summary()


def test_a_report_says_which_invariants_it_checked_and_how_often() -> None:
    report = simulate(5, faults=TODAY_SAFE)
    assert report.ok and report.broken == ()
    assert list(report.invariants) == list(INVARIANTS)
    assert all(report.invariants[name] > 0 for name in INVARIANTS), report.invariants
    assert report.runs > 0 and report.trace
    assert report.replay_command == (
        "flowsched simulate --seed 5 --nodes 3 --timers 12 --faults all"
    )


def test_without_faults_every_timer_is_delivered_once() -> None:
    report = simulate(3, faults="none")
    assert report.ok, report.summary()
    runs = [line for line in report.trace if " run " in line]
    assert len(runs) == len({line.split(" run ")[1].split()[0] for line in runs})


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="nodes"):
        simulate(1, nodes=0)
    with pytest.raises(ValueError, match="unknown fault 'gremlins'"):
        simulate(1, faults="kill,gremlins")
