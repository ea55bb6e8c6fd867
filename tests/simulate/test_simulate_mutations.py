"""The simulator finds planted bugs: each, patched into the real code, breaks an invariant
within 1,000 seeds (under the faults today's code survives).

(No planted bug breaks "no stale delivery after a replace or cancel" here: the sweepers'
``cancel-forgets-stamp`` skipped a local fence the node core does not have, and a queued
claim started without its check cannot happen on these nodes, which start each claim as the
store takes it; the node core's simulation plants that one, ``no-confirm``, in
``test_node_simulate_mutations.py``.)

Slow-ish and about the simulator rather than the scheduler: run with
``FLOWSCHED_MUTATIONS=1`` (``make mutations``)."""

import os

import pytest

from flowsched.testing import simulate
from flowsched.testing.simulation.mutations import PLANTED_BUGS, planted
from tests.simulate.faults import TODAY_SAFE

pytestmark = pytest.mark.skipif(
    os.environ.get("FLOWSCHED_MUTATIONS") != "1", reason="mutation tests: FLOWSCHED_MUTATIONS=1"
)

CAUGHT_BY = {
    "settle-unfenced": "every item delivered",
    "claim-ignores-lease": "no attempt run twice while its lease is held",
    "tick-unchecked": "recurring slots applied once",
}


@pytest.mark.parametrize("bug", sorted(PLANTED_BUGS))
def test_a_planted_bug_is_caught_within_1000_seeds(bug: str) -> None:
    with planted(bug):
        for seed in range(1000):
            report = simulate(seed, faults=TODAY_SAFE, shrink=False)
            if not report.ok:
                break
        else:
            pytest.fail(f"{bug}: not caught in 1,000 seeds")
    print(f"{bug}: caught at seed {seed} ({seed + 1} seeds): {report.broken[0]}")
    assert report.broken[0].invariant == CAUGHT_BY[bug]


def test_the_code_is_restored_after_a_planted_bug() -> None:
    with planted("settle-unfenced"):
        assert not simulate(3, faults=TODAY_SAFE).ok
    assert simulate(3, faults=TODAY_SAFE).ok
