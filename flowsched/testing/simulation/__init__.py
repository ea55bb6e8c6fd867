"""A deterministic cluster simulator: several real ``MongoScheduler`` nodes over one
in-process collection, with faults, in virtual time, checked against CONTRACT section 14.

>>> from flowsched.testing import simulate
>>> report = simulate(7, faults="kill,outage,races")       # doctest: +SKIP
>>> report.ok, report.replay_command                       # doctest: +SKIP
(True, 'flowsched simulate --seed 7 --nodes 3 --timers 12 --faults kill,outage,races')

One seed gives one history, byte for byte: every decision comes from the seed, no thread
runs and no real time is read. The nodes run the adapter's own claim, fence, delivery and
settle code (mongomock is the database; see ``docs/explanation/simulation.md`` for what is
simulated and what is not). Needs mongomock (``pip install 'flowsched[testing]'``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from flowsched.testing.simulation._history import INVARIANTS, Broken
from flowsched.testing.simulation._plan import Faults, Settings
from flowsched.testing.simulation._report import SimulationReport, run_seed
from flowsched.testing.simulation.mutations import planted

__all__ = ["INVARIANTS", "Broken", "Faults", "SimulationReport", "simulate"]


def simulate(
    seed: int,
    *,
    nodes: int = 3,
    timers: int = 12,
    faults: Faults | str | Iterable[str] | None = None,
    keep: Sequence[int] | None = None,
    shrink: bool = True,
    plant: str | None = None,
) -> SimulationReport:
    """Simulate one cluster history from ``seed`` and check the invariants after every step.

    ``nodes`` scheduler nodes (1 to 16) share one collection; ``timers`` items (1 to 500)
    are scheduled by clients, some replaced or cancelled, some recurring. ``faults``: a
    :class:`Faults`, a spec such as ``"all,-skew"`` or an iterable of fault names (default:
    all of them). ``keep``: run only these events of the seed's plan (by index, as a
    report's ``replay_command`` gives them). ``shrink``: on a broken invariant, drop events
    while it still breaks, and report that minimal plan. ``plant``: run with one of the
    planted bugs of :mod:`flowsched.testing.simulation.mutations` patched in (to check that
    the simulator catches it).

    Returns a :class:`SimulationReport`; it raises nothing for a broken invariant (read
    ``report.ok``). ``ValueError`` names a bad argument.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"simulate seed must be an integer (got {seed!r}): a replay needs it")
    settings = Settings(nodes=_count("nodes", nodes, 16), timers=_count("timers", timers, 500))
    chosen = _faults(faults)
    if keep is not None:
        if isinstance(keep, str | bytes) or not isinstance(keep, Iterable):
            raise TypeError(f"simulate keep must be a list of event numbers (got {keep!r})")
        keep = list(keep)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in keep):
            raise TypeError(f"simulate keep must be a list of event numbers (got {keep!r})")
    if plant is None:
        return run_seed(seed, settings, chosen, keep=keep, shrink=shrink)
    with planted(plant):
        return run_seed(seed, settings, chosen, keep=keep, shrink=shrink, plant=plant)


def _count(name: str, value: int, most: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise ValueError(f"simulate {name} must be an integer from 1 to {most} (got {value!r})")
    return value


def _faults(faults: Faults | str | Iterable[str] | None) -> Faults:
    if faults is None:
        return Faults()
    if isinstance(faults, Faults):
        return faults
    if isinstance(faults, str):
        if not faults.strip():
            raise ValueError("simulate faults is empty: name them, or write 'none' for no faults")
        return Faults.parse(faults)
    names = list(faults) if isinstance(faults, Iterable) else None
    if names is None or not all(isinstance(name, str) and name.strip() for name in names):
        raise TypeError(
            f"simulate faults must be a Faults, a spec such as 'all,-skew' or fault names "
            f"(got {faults!r})"
        )
    return Faults.parse(",".join(["none", *names]))
