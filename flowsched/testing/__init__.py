"""The test kit: pytest fixtures for your flows, and the port's contract as a function.

Installed with flowsched. pytest loads the fixtures automatically (a ``pytest11`` entry
point, :mod:`flowsched.testing.plugin`), so a test file needs no conftest:

* ``manual_clock``: a :class:`~flowsched.ManualClock` at 2026-01-01T00:00:00Z;
* ``memory_scheduler``: a started ``InMemoryScheduler`` on it, closed after the test;
* ``mongo_scheduler``: a started ``MongoScheduler`` on it over a fresh collection (mongomock,
  or the server at ``FLOWSCHED_MONGO_URI`` when set: a database per test, dropped after);
* ``scheduler``: each of the two in turn (the test runs twice).

:func:`check_scheduler_port` runs the scheduler port's contract against any adapter, so a
third-party adapter can prove itself the way flowsched's own adapters do.

:func:`simulate` runs a whole cluster of ``MongoScheduler`` nodes under faults, in virtual
time, from one seed (:mod:`flowsched.testing.simulation`; needs mongomock).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from flowsched.clock import ClockDriven
from flowsched.testing._checks_delivery import DELIVERY_GUARANTEES
from flowsched.testing._checks_items import ITEM_GUARANTEES
from flowsched.testing._checks_recurring import RECURRING_GUARANTEES
from flowsched.testing._checks_routing import ROUTING_GUARANTEES
from flowsched.testing._checks_time import TIME_GUARANTEES
from flowsched.testing._trial import (
    CLOCK_START,
    Factory,
    Guarantee,
    RedeliveryFactory,
    try_guarantee,
)

if TYPE_CHECKING:
    from flowsched.testing.simulation import Faults, SimulationReport

__all__ = ["CLOCK_START", "ClockDriven", "check_scheduler_port", "port_guarantees", "simulate"]

_GUARANTEES: tuple[Guarantee, ...] = (
    ITEM_GUARANTEES
    + DELIVERY_GUARANTEES
    + TIME_GUARANTEES
    + RECURRING_GUARANTEES
    + ROUTING_GUARANTEES
)


def port_guarantees() -> list[str]:
    """The guarantees :func:`check_scheduler_port` tries, in the order it tries them."""
    return [guarantee.name for guarantee in _GUARANTEES]


def check_scheduler_port(
    factory: Factory,
    *,
    redelivery_factory: RedeliveryFactory | None = None,
) -> None:
    """Check that the schedulers ``factory`` builds keep the scheduler port's contract.

    ``factory(clock)`` must return a new scheduler on ``clock`` (a
    :class:`~flowsched.ManualClock`) over *empty* storage, each time it is called.
    Each guarantee is tried on fresh schedulers, which are started (on a ManualClock a
    scheduler attaches itself to the clock: see :class:`ClockDriven`) and closed after.
    ``redelivery_factory(clock, policy)``, if given, builds one with that
    ``RedeliveryPolicy``: the guarantees about settable backoff, ``max_attempts`` and dead
    letters are tried only then.

    Raises :class:`AssertionError` naming the first guarantee that does not hold (and what
    was seen); returns ``None`` when all hold. No pytest needed::

        from flowsched import InMemoryScheduler
        from flowsched.testing import check_scheduler_port

        check_scheduler_port(lambda clock: InMemoryScheduler(clock=clock))
    """
    for guarantee in _GUARANTEES:
        try_guarantee(guarantee, factory, redelivery_factory)


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
    """Simulate a cluster from ``seed`` and check the invariants of CONTRACT section 14.

    ``nodes`` real ``MongoScheduler`` nodes share one in-process collection (mongomock);
    ``timers`` items are scheduled, replaced and cancelled by clients and handlers;
    ``faults`` (default: all) are injected - a :class:`~flowsched.testing.simulation.Faults`
    or a spec such as ``"all,-skew"``. Everything runs in virtual time from the seed: the
    same seed gives the same ``report.trace``, byte for byte. A broken invariant makes
    ``report.ok`` false, with the seed, the minimal trace and ``report.replay_command``
    (``flowsched simulate --seed N ...``). See
    :func:`flowsched.testing.simulation.simulate` for ``keep``, ``shrink`` and ``plant``.

    >>> report = simulate(7, faults="kill,outage,races")          # doctest: +SKIP
    >>> report.ok                                                 # doctest: +SKIP
    True
    """
    # Imported here: mongomock and the simulator load only for those who simulate.
    from flowsched.testing.simulation import simulate as run

    return run(
        seed, nodes=nodes, timers=timers, faults=faults, keep=keep, shrink=shrink, plant=plant
    )
