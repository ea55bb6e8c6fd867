"""Seeded runs of several node cores over one store: the invariants hold, and each planted
bug is caught within a few hundred seeds."""

from __future__ import annotations

import pytest

from flowsched.testing.node_simulation import simulate_nodes

SEEDS = range(150)


def test_the_core_keeps_its_invariants() -> None:
    broken = {seed: found for seed in SEEDS if (found := simulate_nodes(seed))}
    assert broken == {}


def test_the_same_seed_gives_the_same_run() -> None:
    assert simulate_nodes(7, plant="no-confirm") == simulate_nodes(7, plant="no-confirm")


@pytest.mark.parametrize(
    ("plant", "finding"), [("no-confirm", "stale start"), ("drop-settle", "rerun")]
)
def test_planted_bugs_are_found(plant: str, finding: str) -> None:
    for seed in range(300):
        if any(finding in line for line in simulate_nodes(seed, plant=plant)):
            return
    raise AssertionError(f"{plant}: no seed in 300 found {finding!r}")
