"""One seed, one history: the same seed gives the same trace byte for byte, and the
command a report prints replays exactly the minimal history it shows."""

import os
import shlex
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from flowsched.cli import build_app
from flowsched.testing import simulate
from flowsched.testing.simulation.mutations import PLANTED_BUGS, planted
from tests.simulate.faults import TODAY_SAFE


@pytest.mark.parametrize("seed", [11, 1886])  # 1886: it once met a real-time thread
def test_the_same_seed_gives_the_same_trace_byte_for_byte(seed: int) -> None:
    first = simulate(seed)
    second = simulate(seed)
    assert "\n".join(first.trace).encode() == "\n".join(second.trace).encode()
    assert first == second


def test_the_same_seed_gives_the_same_trace_in_another_process() -> None:
    # Another hash seed too: no set or dict order of strings may leak into the history.
    code = "from flowsched.testing import simulate; print(*simulate(93).trace, sep='\\n')"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert other.stdout.splitlines() == list(simulate(93).trace)


def test_different_seeds_give_different_histories() -> None:
    assert simulate(1, faults=TODAY_SAFE).trace != simulate(2, faults=TODAY_SAFE).trace


def test_a_broken_seed_is_shrunk_and_its_replay_command_replays_it() -> None:
    with planted("settle-unfenced"):
        report = simulate(3, faults=TODAY_SAFE)
        assert not report.ok
        assert report.kept is not None
        replayed = simulate(3, faults=TODAY_SAFE, keep=report.kept, shrink=False)
    assert replayed.broken == report.broken
    assert replayed.trace == report.trace
    assert f"--keep {','.join(map(str, report.kept))}" in report.replay_command
    assert report.replay_command.startswith("flowsched simulate --seed 3 ")


def test_the_command_line_runs_seeds_and_exits_0_when_all_hold() -> None:
    result = CliRunner().invoke(build_app(), ["simulate", "--seeds", "3", "--faults", "none"])
    assert result.exit_code == 0, result.output
    assert "ok: 3 seeds" in result.output and "0 broken" in result.output


def test_the_command_line_exits_1_on_the_first_broken_seed_with_its_replay() -> None:
    args = ["simulate", "--seeds", "20", "--faults", TODAY_SAFE, "--plant", "settle-unfenced"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 1, result.output
    replay = next(line for line in result.output.splitlines() if line.startswith("replay: "))
    command = shlex.split(replay.removeprefix("replay: "))
    assert command[-2:] == ["--plant", "settle-unfenced"]
    again = CliRunner().invoke(build_app(), command[1:])
    assert again.exit_code == 1, again.output
    assert "BROKEN every item delivered" in again.output


def test_the_command_line_refuses_unknown_faults_and_planted_bugs() -> None:
    runner = CliRunner()
    assert runner.invoke(build_app(), ["simulate", "--faults", "gremlins"]).exit_code == 2
    assert runner.invoke(build_app(), ["simulate", "--plant", "nope"]).exit_code == 2


def test_every_planted_bug_still_finds_the_code_it_patches() -> None:
    # Cheap, and on by default: a rename in flowsched.mongo shows here, not only under
    # FLOWSCHED_MUTATIONS=1.
    for name in PLANTED_BUGS:
        with planted(name):
            pass


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"seed": None}, TypeError, "seed must be an integer"),
        ({"seed": "x"}, TypeError, "seed must be an integer"),
        ({"seed": True}, TypeError, "seed must be an integer"),
        ({"faults": 123}, TypeError, "faults must be a Faults"),
        ({"faults": ""}, ValueError, "faults is empty"),
        ({"faults": "kill,,outage"}, ValueError, "an empty name between commas"),
        ({"keep": 5}, TypeError, "keep must be a list of event numbers"),
        ({"keep": ["a"]}, TypeError, "keep must be a list of event numbers"),
        ({"keep": [99999]}, ValueError, "event 99999 is not in seed 1's plan"),
        ({"keep": [-1]}, ValueError, "event -1 is not in seed 1's plan"),
    ],
)
def test_simulate_names_a_bad_argument(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    """None as a seed ran a different history each time (and printed ``--seed None`` to
    replay it); a ``keep`` outside the plan ran nothing and said ``ok``."""
    call = {"seed": 1, **arguments}
    with pytest.raises(error, match=message):
        simulate(call.pop("seed"), timers=4, **call)  # type: ignore[arg-type]


def test_the_command_line_refuses_a_replay_outside_the_seeds_plan() -> None:
    result = CliRunner().invoke(build_app(), ["simulate", "--seed", "1", "--keep", "99999"])
    assert result.exit_code == 2 and "not in seed 1's plan" in result.output
