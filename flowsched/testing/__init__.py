"""The test kit: pytest fixtures for your flows, and the port's contract as a function.

Installed with flowsched. pytest loads the fixtures automatically (a ``pytest11`` entry
point, :mod:`flowsched.testing.plugin`), so a test file needs no conftest:

* ``manual_clock``: a :class:`~flowsched.ManualClock` at 2026-01-01T00:00:00Z;
* ``memory_scheduler``: a started ``InMemoryScheduler`` on it, closed after the test;
* ``mongo_scheduler``: a started ``MongoScheduler`` on it over a fresh collection (mongomock,
  or the server at ``FLOWSCHED_MONGO_URI`` when set: a database per test, dropped after);
* ``scheduler``: each of the two in turn (the test runs twice);
* ``async_memory_scheduler``, ``async_mongo_scheduler`` and ``async_scheduler``: the same
  for the asyncio face, for ``async def`` tests (pytest-asyncio: mark them
  ``@pytest.mark.asyncio``; drive time with ``await manual_clock.advance_async(delta)``).

:func:`check_scheduler_port` runs the scheduler port's contract against any adapter, so a
third-party adapter can prove itself the way flowsched's own adapters do;
:func:`check_async_scheduler_port` does the same for an asyncio adapter (the same
guarantees, plus those only the async face has).

:func:`simulate` runs a whole cluster of ``MongoScheduler`` nodes under faults, in virtual
time, from one seed (:mod:`flowsched.testing.simulation`; needs mongomock).

For real nodes on a real server: :mod:`flowsched.testing.fault_proxy` is a TCP proxy that
holds, delays or loses one direction's bytes, or partitions both until the heal;
:mod:`flowsched.testing.seam_burst` sends bursts of replaces and cancels across several
nodes and reports any old form that started after its successor returned.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from flowsched.clock import AsyncClockDriven, ClockDriven, ManualClock
from flowsched.delivery import RedeliveryPolicy
from flowsched.testing._async_trial import (
    AsyncFactory,
    AsyncRedeliveryFactory,
    BlockingPort,
    LoopClock,
    Portal,
    built,
)
from flowsched.testing._checks_async import ASYNC_GUARANTEES, AsyncGuarantee, AsyncTrial
from flowsched.testing._checks_delivery import DELIVERY_GUARANTEES
from flowsched.testing._checks_items import ITEM_GUARANTEES
from flowsched.testing._checks_recurring import RECURRING_GUARANTEES
from flowsched.testing._checks_routing import ROUTING_GUARANTEES
from flowsched.testing._checks_steering import STEERING_GUARANTEES
from flowsched.testing._checks_store import STORE_GUARANTEES
from flowsched.testing._checks_time import TIME_GUARANTEES
from flowsched.testing._store_trial import StoreFactory, open_store
from flowsched.testing._trial import (
    CLOCK_START,
    Factory,
    Guarantee,
    RedeliveryFactory,
    held,
    try_guarantee,
)

if TYPE_CHECKING:
    from flowsched.testing.simulation import Faults, SimulationReport

__all__ = [
    "CLOCK_START",
    "AsyncClockDriven",
    "ClockDriven",
    "async_port_guarantees",
    "check_async_scheduler_port",
    "check_scheduler_port",
    "check_timer_store",
    "port_guarantees",
    "simulate",
    "store_guarantees",
]

_GUARANTEES: tuple[Guarantee, ...] = (
    ITEM_GUARANTEES
    + DELIVERY_GUARANTEES
    + TIME_GUARANTEES
    + RECURRING_GUARANTEES
    + ROUTING_GUARANTEES
    + STEERING_GUARANTEES
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

    The steering guarantees (CONTRACT section 18) need ``timers``, ``iter_timers``,
    ``pause`` and ``resume``; the two about ``history`` (its attempts, and
    ``TimerInfo.last_error``) are skipped on an adapter that has no ``history`` attribute.

    Raises :class:`AssertionError` naming the first guarantee that does not hold (and what
    was seen); returns ``None`` when all hold. No pytest needed::

        from flowsched import InMemoryScheduler
        from flowsched.testing import check_scheduler_port

        check_scheduler_port(lambda clock: InMemoryScheduler(clock=clock))
    """
    for guarantee in _GUARANTEES:
        try_guarantee(guarantee, factory, redelivery_factory)


def async_port_guarantees() -> list[str]:
    """The guarantees :func:`check_async_scheduler_port` tries, in order: those of
    :func:`port_guarantees`, then those only the async face has."""
    return port_guarantees() + [guarantee.name for guarantee in ASYNC_GUARANTEES]


def check_async_scheduler_port(
    factory: AsyncFactory,
    *,
    redelivery_factory: AsyncRedeliveryFactory | None = None,
) -> None:
    """:func:`check_scheduler_port` for an asyncio adapter (an
    :class:`~flowsched.AsyncSchedulerPort` that is :class:`AsyncClockDriven` on a
    ManualClock, as ``AsyncInMemoryScheduler`` is).

    ``factory(clock)`` (a function or a coroutine function) returns a new scheduler on
    ``clock`` over empty storage; it is called on an event loop that this function runs in
    a thread of its own, so call it from synchronous code (a plain test, a script), not
    from a running loop. Every guarantee of :func:`port_guarantees` is tried through a
    blocking view of the scheduler, with plain handlers (which the adapter runs in worker
    threads); then the async face's own (``async def`` handlers awaited, plain ones off
    the loop, ``aclose`` waiting for handlers and leaving no task, a delivery cancelled by
    shutdown not settled). Raises :class:`AssertionError` naming the first that does not
    hold::

        from flowsched import AsyncInMemoryScheduler
        from flowsched.testing import check_async_scheduler_port

        check_async_scheduler_port(lambda clock: AsyncInMemoryScheduler(clock=clock))
    """
    portal = Portal()
    try:

        def blocking(clock: ManualClock) -> BlockingPort:
            return BlockingPort(portal, portal.call(built(factory, clock)))

        blocking_redelivery = None
        if redelivery_factory is not None:
            make = redelivery_factory

            def blocking_redelivery(clock: ManualClock, policy: RedeliveryPolicy) -> BlockingPort:
                return BlockingPort(portal, portal.call(built(make, clock, policy)))

        def new_clock(start: datetime) -> ManualClock:
            return LoopClock(portal, start)

        for guarantee in _GUARANTEES:
            try_guarantee(guarantee, blocking, blocking_redelivery, new_clock)
        for native in ASYNC_GUARANTEES:
            portal.call(_try_async(native, factory))
    finally:
        portal.close()


async def _try_async(guarantee: AsyncGuarantee, factory: AsyncFactory) -> None:
    clock = ManualClock(CLOCK_START)
    scheduler = None
    try:
        with held("port", guarantee.name, "adapter"):
            scheduler = await built(factory, clock)
            await scheduler.start()
            await guarantee.check(AsyncTrial(scheduler, clock))
    finally:
        if scheduler is not None:
            closing = scheduler.aclose()
            if inspect.isawaitable(closing):
                await closing


def store_guarantees() -> list[str]:
    """The guarantees :func:`check_timer_store` tries, in the order it tries them."""
    return [guarantee.name for guarantee in STORE_GUARANTEES]


def check_timer_store(factory: StoreFactory) -> None:
    """Check that the stores ``factory`` builds keep the :class:`~flowsched.store.TimerStore`
    interface's guarantees (:func:`store_guarantees`).

    ``factory()`` - or ``factory(clock)``, when it takes an argument: a
    :class:`~flowsched.ManualClock` the store must judge time by - returns a fresh *empty*
    store each time it is called: a ``TimerStore``, an ``AsyncTimerStore`` (driven on an
    event loop of its own, in a thread: call this from synchronous code), or an awaitable of
    either. Without a clock, the checks that need a lease to end wait it out (3 s, five
    times). Each store is closed after its check when it can be (``close()``, or an async
    ``aclose()``). Raises :class:`AssertionError` naming the first guarantee that does not
    hold::

        from flowsched.store import MemoryTimerStore
        from flowsched.testing import check_timer_store

        check_timer_store(lambda clock: MemoryTimerStore(clock))
    """
    portal = Portal()
    try:
        for guarantee in STORE_GUARANTEES:
            with held("store", guarantee.name, "store"):
                trial = open_store(factory, portal)
                try:
                    guarantee.check(trial)
                finally:
                    trial.close()
    finally:
        portal.close()


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
