"""Internal: many seeds — run them (on several processes if asked) until one breaks."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from dataclasses import dataclass

from flowsched.testing.simulation._report import SimulationReport

__all__ = ["SeedRun", "run_seeds"]

_CHUNK = 20


@dataclass(frozen=True)
class SeedRun:
    """The result of :func:`run_seeds`: how many seeds ran, the first broken one's report
    (shrunk), and the wall time the seeds took (shrinking not included)."""

    ran: int
    failure: SimulationReport | None
    seconds: float

    @property
    def per_second(self) -> float:
        return self.ran / self.seconds if self.seconds > 0 else float("inf")


def _check(job: tuple[int, int, int, str, str | None]) -> tuple[int, bool]:
    from flowsched.testing.simulation import simulate

    seed, nodes, timers, faults, plant = job
    report = simulate(seed, nodes=nodes, timers=timers, faults=faults, shrink=False, plant=plant)
    return seed, report.ok


def run_seeds(
    first: int,
    count: int,
    *,
    nodes: int,
    timers: int,
    faults: str,
    plant: str | None = None,
    jobs: int = 1,
) -> SeedRun:
    """Simulate seeds ``first`` .. ``first + count - 1`` in order, stopping at the first
    broken one (the lowest, also with ``jobs`` processes), which is run again and shrunk."""
    from flowsched.testing.simulation import simulate

    work = ((seed, nodes, timers, faults, plant) for seed in range(first, first + count))
    started = time.perf_counter()
    ran, broken = 0, None
    with _results(work, jobs) as results:
        for seed, ok in results:
            ran += 1
            if not ok:
                broken = seed
                break
    seconds = time.perf_counter() - started
    if broken is None:
        return SeedRun(ran, None, seconds)
    report = simulate(broken, nodes=nodes, timers=timers, faults=faults, plant=plant)
    return SeedRun(ran, report, seconds)


class _results:
    """The results of the jobs in order: in this process, or from a pool of ``jobs``."""

    def __init__(self, work: Iterator[tuple[int, int, int, str, str | None]], jobs: int) -> None:
        self._work = work
        self._jobs = jobs
        self._pool: multiprocessing.pool.Pool | None = None

    def __enter__(self) -> Iterator[tuple[int, bool]]:
        if self._jobs <= 1:
            return map(_check, self._work)
        self._pool = multiprocessing.get_context("spawn").Pool(self._jobs)
        return self._pool.imap(_check, self._work, chunksize=_CHUNK)

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
