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
"""

from __future__ import annotations

import inspect
from datetime import datetime

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
from flowsched.testing._checks_time import TIME_GUARANTEES
from flowsched.testing._trial import (
    CLOCK_START,
    Factory,
    Guarantee,
    RedeliveryFactory,
    try_guarantee,
)

__all__ = [
    "CLOCK_START",
    "AsyncClockDriven",
    "ClockDriven",
    "async_port_guarantees",
    "check_async_scheduler_port",
    "check_scheduler_port",
    "port_guarantees",
]

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
        scheduler = await built(factory, clock)
        await scheduler.start()
        await guarantee.check(AsyncTrial(scheduler, clock))
    except AssertionError as exc:
        detail = f": {exc}" if str(exc) else ""
        raise AssertionError(f"port guarantee not held: {guarantee.name}{detail}") from exc
    except Exception as exc:
        raise AssertionError(
            f"port guarantee not held: {guarantee.name}: the adapter raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    finally:
        if scheduler is not None:
            closing = scheduler.aclose()
            if inspect.isawaitable(closing):
                await closing
