"""The node-core simulation finds each planted bug of the node (CONTRACT section 15):
starting a queued claim unchecked, a clock estimate taken at the midpoint, a settle that
drops its batch, a claim fenced on its remembered lease end,
a clock estimate carried on the wall clock - each within a few hundred
seeds (``make mutations``)."""

import os

import pytest

from flowsched.testing.node_simulation import simulate_nodes

pytestmark = pytest.mark.skipif(
    os.environ.get("FLOWSCHED_MUTATIONS") != "1", reason="mutation tests: FLOWSCHED_MUTATIONS=1"
)

CAUGHT_BY = {
    "no-confirm": ("stale start",),
    "midpoint-clock": ("early",),
    # A dropped settle stays in flight for the core: its claims lapse and run again (rerun),
    # or, with a batch of outcomes owed, a queueing node claims no more (lost).
    "drop-settle": ("rerun", "lost"),
    "lease-fence": ("rerun",),
    # A clock carried on the wall clock misjudges leases too (a renewal too late: rerun; an
    # outcome owed judged past its lease holds the node's claims back: lost).
    "wall-clock": ("early", "rerun", "lost"),
}


@pytest.mark.parametrize("plant", sorted(CAUGHT_BY))
def test_a_planted_node_bug_is_caught_within_500_seeds(plant: str) -> None:
    for seed in range(500):
        broken = simulate_nodes(seed, plant=plant)
        if broken:
            break
    else:
        pytest.fail(f"{plant}: not caught in 500 seeds")
    print(f"{plant}: caught at seed {seed} ({seed + 1} seeds): {broken[0]}")
    assert any(finding in broken[0] for finding in CAUGHT_BY[plant]), broken[0]
