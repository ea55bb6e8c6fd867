"""The examples run and tell the story the tutorial tells (they are run as users run them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(name: str, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **env},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _times_of(out: str, what: str) -> list[str]:
    """The ``+h:mm:ss`` headings under which lines containing ``what`` appear."""
    times, heading = [], ""
    for line in out.splitlines():
        if line.startswith("+"):
            heading = line.strip()
        elif what in line:
            times.append(heading)
    return times


def test_quickstart_prints_the_timeline_and_ends_each_transfer_as_described() -> None:
    out = _run("quickstart.py")

    assert "tx-1: Complete" in out
    assert "tx-2: FraudTimedOut" in out
    assert "tx-3: TooLate" in out
    assert _times_of(out, "tx-2  invoked   CheckFraud") == [
        "+0:00:00",
        "+0:00:10",
        "+0:30:10",
        "+1:00:10",
        "+1:30:10",
    ]
    assert "decided by ipf.flow.OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration" in out
    assert _times_of(out, "tx-3  fired     processing time elapsed") == ["+0:00:30"]


def test_child_offsets_counts_the_childs_deadline_from_the_parents_accepted_offset() -> None:
    out = _run("child_offsets.py")

    assert "pay-1/sanctions ended in Expired" in out
    assert _times_of(out, "pay-1/sanctions fired") == ["+0:00:20"]


@pytest.mark.wire
def test_persistent_survives_a_process_restart(mongo_uri: str) -> None:
    out = _run("persistent.py", FLOWSCHED_MONGO_URI=mongo_uri)

    first, restart, second = out.partition("starts; reloaded tx-1 in CheckingFraud")
    assert restart, out
    assert "ACTION_RETRY       due +0:30:10" in first
    assert _times_of(first, "tx-1  invoked   CheckFraud") == ["+0:00:00", "+0:00:10"]
    # The second process knows only the collections: it runs the rest at their due times.
    assert _times_of(second, "tx-1  invoked   CheckFraud") == ["+0:30:10", "+1:00:10", "+1:30:10"]
    assert _times_of(second, "fired     action timeout: CheckFraud") == ["+2:00:00"]
    assert "tx-1 ended in FraudTimedOut" in second
