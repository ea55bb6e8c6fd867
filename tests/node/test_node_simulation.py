"""Seeded runs of several node cores over one store: the invariants hold, and each planted
bug is caught within a few hundred seeds."""

from __future__ import annotations

import re

import pytest

from flowsched.testing.node_simulation import simulate_nodes

SEEDS = range(150)


def test_the_core_keeps_its_invariants() -> None:
    broken = {seed: found for seed in SEEDS if (found := simulate_nodes(seed))}
    assert broken == {}


def test_the_same_seed_gives_the_same_run() -> None:
    assert simulate_nodes(7, plant="no-confirm") == simulate_nodes(7, plant="no-confirm")


@pytest.mark.parametrize(
    ("plant", "finding"),
    [
        ("no-confirm", "stale start"),
        ("drop-settle", "rerun"),
        ("midpoint-clock", "early"),
        ("lease-fence", "rerun"),
        ("wall-clock", "early"),
    ],
)
def test_planted_bugs_are_found(plant: str, finding: str) -> None:
    for seed in range(300):
        if any(finding in line for line in simulate_nodes(seed, plant=plant)):
            return
    raise AssertionError(f"{plant}: no seed in 300 found {finding!r}")


def _first_found(plant: str, finding: str) -> int:
    """The first seed (of 300) on which ``plant`` leads to ``finding``."""
    for seed in range(300):
        if any(finding in line for line in simulate_nodes(seed, plant=plant)):
            return seed
    raise AssertionError(f"{plant}: no seed in 300 found {finding!r}")


def test_a_renewal_whose_reply_is_lost_causes_no_rerun() -> None:
    # A seed that loses a renewal's reply, where a store fencing on the remembered lease end
    # reran an item, runs clean with the real fence.
    assert simulate_nodes(_first_found("lease-fence", "rerun")) == []


def test_a_wall_clock_step_changes_no_judgement() -> None:
    # A seed that steps a node's wall clock, where a filter carried on the wall clock
    # started early, runs clean on the store's time.
    assert simulate_nodes(_first_found("wall-clock", "early")) == []


def test_the_command_line_runs_node_core_seeds() -> None:
    from typer.testing import CliRunner

    from flowsched.cli import build_app

    runner = CliRunner()
    clean = runner.invoke(build_app(), ["simulate", "--node-core", "--seeds", "3"])
    assert clean.exit_code == 0 and "3 node-core seeds" in clean.output, clean.output
    args = ["simulate", "--node-core", "--seeds", "20", "--plant", "midpoint-clock"]
    found = runner.invoke(build_app(), args)
    assert found.exit_code == 1 and "early" in found.output, found.output
    replay = re.search(r"broken at seed (\d+) .*\(--node-core --seed (\d+)\)", found.output)
    assert replay is not None and replay[1] == replay[2], found.output
    again = ["simulate", "--node-core", "--seed", replay[2], "--plant", "midpoint-clock"]
    assert runner.invoke(build_app(), again).exit_code == 1  # the replay breaks again
    wrong = runner.invoke(build_app(), ["simulate", "--node-core", "--plant", "settle-unfenced"])
    assert wrong.exit_code == 2, wrong.output
