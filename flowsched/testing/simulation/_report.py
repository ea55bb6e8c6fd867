"""Internal: running one seed end to end — the plan, the run, shrinking a failure to a
minimal plan, and the :class:`SimulationReport` with the command that replays it."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from flowsched.testing.simulation._history import Broken
from flowsched.testing.simulation._plan import Event, Faults, Settings, draw_plan

__all__ = ["SimulationReport", "replay_command", "run_seed"]

MAX_SHRINK_RUNS = 60
"""The most re-runs shrinking a failure may take (each drops events and checks it still
breaks the same invariant)."""


@dataclass(frozen=True)
class SimulationReport:
    """What one seed's simulation found.

    ``invariants``: each invariant checked and how many times (CONTRACT section 14).
    ``broken``: the invariants that broke (the first one stops the run), empty when ``ok``.
    ``trace``: the history, one line per step (``seconds node what``), byte-identical for
    the same seed and options; when an invariant broke, the trace of the *minimal* plan
    (events dropped while it still broke the same way), which ``replay_command`` replays.
    ``plan``: the planned events run (index in the seed's full plan, description).
    """

    seed: int
    ok: bool
    invariants: dict[str, int]
    broken: tuple[Broken, ...]
    trace: tuple[str, ...]
    replay_command: str
    plan: tuple[str, ...] = ()
    runs: int = 0
    faults: str = "all"
    kept: tuple[int, ...] | None = field(default=None)

    def summary(self) -> str:
        """One paragraph: the seed, what broke (or that all held), how to replay it."""
        if self.ok:
            checks = sum(self.invariants.values())
            return f"seed {self.seed}: ok ({self.runs} handler runs, {checks} checks)"
        lines = [f"seed {self.seed}: BROKEN {self.broken[0]}", "minimal plan:"]
        lines += [f"  {event}" for event in self.plan]
        lines += ["trace:", *(f"  {line}" for line in self.trace), f"replay: {self.replay_command}"]
        return "\n".join(lines)


def replay_command(
    seed: int,
    settings: Settings,
    faults: Faults,
    keep: Sequence[int] | None = None,
    plant: str | None = None,
) -> str:
    """The ``flowsched simulate`` command line that replays this seed (and plan subset)."""
    command = (
        f"flowsched simulate --seed {seed} --nodes {settings.nodes} "
        f"--timers {settings.timers} --faults {faults.spec()}"
    )
    if keep is not None:
        command += f" --keep {','.join(map(str, keep)) or 'none'}"
    if plant is not None:
        command += f" --plant {plant}"
    return command


@contextmanager
def _quiet_logs() -> Iterator[None]:
    # Faults make the adapter log warnings by design (outages, lost claims): thousands of
    # seeds would bury the one report that matters.
    names = ["flowsched", "flowsched.mongo", "flowsched.delivery"]
    names += [name for name in logging.root.manager.loggerDict if name.startswith("flowsched.")]
    loggers = [logging.getLogger(name) for name in dict.fromkeys(names)]
    was = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, was, strict=True):
            logger.disabled = disabled


def _once(
    seed: int, settings: Settings, faults: Faults, plan: list[tuple[int, Event]]
) -> tuple[Broken | None, dict[str, int], list[str], int]:
    from flowsched.testing.simulation._driver import Simulation

    simulation = Simulation(seed, settings, faults, plan)
    simulation.run()
    history = simulation.history
    return history.broken, dict(history.checks), simulation.trace, len(history.runs)


def run_seed(
    seed: int,
    settings: Settings,
    faults: Faults,
    keep: Sequence[int] | None = None,
    shrink: bool = True,
    plant: str | None = None,
) -> SimulationReport:
    """Simulate ``seed``; on a broken invariant, shrink the plan (if ``shrink``). ``plant``
    only names the planted bug already applied, for the replay command."""
    full = draw_plan(random.Random(seed), settings, faults)
    indexed = list(enumerate(full))
    if keep is not None:
        wanted = set(keep)
        outside = sorted(n for n in wanted if not 0 <= n < len(full))
        if outside:
            raise ValueError(
                f"simulate keep: event {outside[0]} is not in seed {seed}'s plan (events 0 "
                f"to {len(full) - 1}): a replay needs the seed, settings and faults it came from"
            )
        indexed = [(n, event) for n, event in indexed if n in wanted]
    with _quiet_logs():
        broken, checks, trace, runs = _once(seed, settings, faults, indexed)
        if broken is not None and shrink:
            indexed, broken, trace = _shrink(seed, settings, faults, indexed, broken, trace)
            keep = [n for n, _ in indexed]
    return SimulationReport(
        seed=seed,
        ok=broken is None,
        invariants=checks,
        broken=() if broken is None else (broken,),
        trace=tuple(trace),
        replay_command=replay_command(seed, settings, faults, keep, plant),
        plan=tuple(f"[{n}] {event.at:.3f}s {event.describe()}" for n, event in indexed),
        runs=runs,
        faults=faults.spec(),
        kept=None if keep is None else tuple(keep),
    )


def _shrink(
    seed: int,
    settings: Settings,
    faults: Faults,
    plan: list[tuple[int, Event]],
    broken: Broken,
    trace: list[str],
) -> tuple[list[tuple[int, Event]], Broken, list[str]]:
    """Drop chunks of the plan, then single events, while the same invariant still breaks:
    deterministic (the order of trials is fixed), bounded by MAX_SHRINK_RUNS."""
    budget = MAX_SHRINK_RUNS
    chunk = max(1, len(plan) // 2)
    while chunk >= 1 and budget > 0:
        start = 0
        while start < len(plan) and budget > 0:
            candidate = plan[:start] + plan[start + chunk :]
            budget -= 1
            found, _, candidate_trace, _ = _once(seed, settings, faults, candidate)
            if found is not None and found.invariant == broken.invariant:
                plan, broken, trace = candidate, found, candidate_trace
            else:
                start += chunk
        chunk //= 2
    return plan, broken, trace
