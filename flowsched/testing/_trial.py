"""How one guarantee of the port is tried: a fresh scheduler on a fresh ManualClock, a
recording handler, and an :class:`AssertionError` that names the guarantee when it fails."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flowsched.clock import ManualClock
from flowsched.delivery import RedeliveryPolicy
from flowsched.port import SchedulerPort
from flowsched.records import ScheduleItem, ScheduleKind

__all__ = [
    "held",
    "CLOCK_START",
    "TIMER",
    "Delivery",
    "Factory",
    "Guarantee",
    "Recorder",
    "RedeliveryFactory",
    "Trial",
]

CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)
"""Where every trial's clock starts (whole milliseconds: some stores keep milliseconds)."""

TIMER = ScheduleKind.TIMER

Factory = Callable[[ManualClock], SchedulerPort]
"""``factory(clock)``: a new scheduler on ``clock`` over empty storage."""

RedeliveryFactory = Callable[[ManualClock, RedeliveryPolicy], SchedulerPort]
"""``factory(clock, redelivery)``: the same, with that redelivery policy."""


@dataclass(frozen=True)
class Delivery:
    """One handler call as the recorder saw it: the item, its attempt, and ``clock.now()``."""

    item: ScheduleItem
    attempt: int
    at: datetime

    @property
    def id(self) -> str:
        return self.item.id


class Recorder:
    """A handler that records every call, and fails for the ids it was told to fail."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.deliveries: list[Delivery] = []
        self._failures: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def fail(self, item_id: str, times: int | None = None) -> None:
        """Raise for ``item_id``'s next ``times`` deliveries (``None``: always)."""
        self._failures[item_id] = times

    def __call__(self, item: ScheduleItem, attempt: int) -> None:
        with self._lock:
            self.deliveries.append(Delivery(item, attempt, self.clock.now()))
            left = self._failures.get(item.id, 0)
            if left is None or left > 0:
                self._failures[item.id] = None if left is None else left - 1
                raise RuntimeError(f"handler failed for {item.id}")

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self.deliveries]

    def of(self, item_id: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.id == item_id]


@dataclass
class Trial:
    """What a check works with: a started ``scheduler`` on ``clock`` (at :data:`CLOCK_START`),
    ``recorder`` (not subscribed: a check subscribes what it needs), and ``build`` to
    start more schedulers (each on its own storage), closed after the check."""

    scheduler: SchedulerPort
    clock: ManualClock
    recorder: Recorder
    build: Callable[[ManualClock], SchedulerPort]
    new_clock: Callable[[datetime], ManualClock] = ManualClock
    """A new clock for a check that needs its own (the async check kit's drive their loop)."""

    def at(self, seconds: float = 0, **more: float) -> datetime:
        """``clock.now()`` plus a duration."""
        return self.clock.now() + timedelta(seconds=seconds, **more)

    def timer(
        self,
        item_id: str,
        due: datetime,
        flow_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> ScheduleItem:
        """Schedule a ``TIMER`` item on the trial's scheduler; return it as stored."""
        return self.scheduler.schedule(ScheduleItem(item_id, TIMER, due, flow_id, payload))


Check = Callable[[Trial], None]


@dataclass(frozen=True)
class Guarantee:
    """One promise of the port, in words, and the check that tries it.

    ``redelivery``: the check needs a scheduler built with that policy (it is skipped when
    the caller gave no way to build one). ``needs``: the name of an attribute the check
    needs on the scheduler; it is skipped on an adapter without one (a call being added)."""

    name: str
    check: Check
    redelivery: RedeliveryPolicy | None = None
    needs: str | None = None


@contextmanager
def held(what: str, guarantee: str, who: str) -> Iterator[None]:
    """Raise what fails inside as the :class:`AssertionError` naming ``guarantee`` (a
    ``what`` guarantee: port, store); an error of ``who`` (the adapter, the store) other
    than an ``AssertionError`` is named too, and chained."""
    try:
        yield
    except AssertionError as exc:
        detail = f": {exc}" if str(exc) else ""
        raise AssertionError(f"{what} guarantee not held: {guarantee}{detail}") from exc
    except Exception as exc:
        raise AssertionError(
            f"{what} guarantee not held: {guarantee}: the {who} raised {type(exc).__name__}: {exc}"
        ) from exc


def try_guarantee(
    guarantee: Guarantee,
    factory: Factory,
    redelivery_factory: RedeliveryFactory | None,
    new_clock: Callable[[datetime], ManualClock] = ManualClock,
) -> bool:
    """Run one guarantee's check on fresh schedulers; ``False`` if it was skipped.

    Raises :class:`AssertionError` naming the guarantee when it does not hold (also when
    the adapter raised something else, which is then chained)."""
    policy = guarantee.redelivery
    if policy is not None and redelivery_factory is None:
        return False
    built: list[SchedulerPort] = []

    def build(clock: ManualClock) -> SchedulerPort:
        if policy is not None:
            assert redelivery_factory is not None
            scheduler = redelivery_factory(clock, policy)
        else:
            scheduler = factory(clock)
        built.append(scheduler)
        scheduler.start()
        return scheduler

    clock = new_clock(CLOCK_START)
    try:
        with held("port", guarantee.name, "adapter"):
            trial = Trial(build(clock), clock, Recorder(clock), build, new_clock)
            if guarantee.needs is not None and not hasattr(trial.scheduler, guarantee.needs):
                return False
            guarantee.check(trial)
    finally:
        for scheduler in built:
            scheduler.close()
    return True
