"""Internal: the harness of :func:`flowsched.testing.check_timer_store`.

A check works with a :class:`StoreTrial`: a fresh empty store seen through its synchronous
face (an async store is driven on a private event loop through a blocking view) and a way
to move time: a :class:`~flowsched.ManualClock` jump when the factory takes a clock, else a
real sleep of the (short) lease.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from flowsched.clock import ManualClock
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.store.interface import AsyncTimerStore, TimerStore
from flowsched.testing._async_trial import Portal
from flowsched.testing._trial import CLOCK_START

__all__ = ["StoreCheck", "StoreFactory", "StoreTrial", "open_store"]

StoreFactory = Callable[
    ..., "TimerStore | AsyncTimerStore | Awaitable[TimerStore | AsyncTimerStore]"
]
"""``factory()`` or ``factory(clock)``: a fresh empty store (or an awaitable of one)."""

ROUTE_HANDLER = "store-check"
OTHER_HANDLER = "store-check-other"


@dataclass(frozen=True)
class StoreCheck:
    """One guarantee of the store interface, in words, and the check that tries it."""

    name: str
    check: Callable[[StoreTrial], None]


class StoreTrial:
    """What a check works with: ``store`` (synchronous face), ``lease`` (a lease no check
    outlives), ``short`` (one that :meth:`expire` outlives) and helpers that build items
    relative to the store's clock."""

    def __init__(
        self,
        store: TimerStore,
        clock: ManualClock | None,
        closer: Callable[[], object] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self._closer = closer
        self.lease = timedelta(seconds=30)
        # What expire() outlives: short without a clock, where it is waited out for real.
        self.short = self.lease if clock is not None else timedelta(seconds=3)
        self.route = "h:" + ROUTE_HANDLER
        self.routes = frozenset({self.route})
        self._count = 0

    def item(
        self,
        item_id: str | None = None,
        *,
        due_in: timedelta = timedelta(seconds=-1),
        flow_id: str | None = None,
        handler: str = ROUTE_HANDLER,
        payload: dict[str, Any] | None = None,
    ) -> ScheduleItem:
        """A new item for the check's route, due ``due_in`` from the store's now (due by
        default), its due time in whole milliseconds (some stores keep milliseconds)."""
        self._count += 1
        due = self.store.now() + due_in
        due = due.replace(microsecond=due.microsecond // 1000 * 1000)
        return ScheduleItem(
            item_id or f"item-{self._count}",
            ScheduleKind.TIMER,
            due,
            flow_id=flow_id,
            payload=payload,
            handler=handler,
        )

    def expire(self) -> None:
        """Move time past every lease taken with :attr:`short`."""
        if self.clock is not None:
            self.clock.jump(self.short + timedelta(seconds=1))
        else:
            time.sleep(self.short.total_seconds() + 0.05)

    def close(self) -> None:
        """Close the store (its pool, its connections) if it can be closed."""
        if self._closer is not None:
            self._closer()

    def later(self, delta: timedelta) -> datetime:
        """Move the store's time forward by ``delta`` (sleeping without a clock)."""
        if self.clock is not None:
            return self.clock.jump(delta)
        time.sleep(delta.total_seconds())
        return self.store.now()


class _Blocking:
    """A blocking view of an async store: each coroutine method run on ``portal``."""

    def __init__(self, portal: Portal, store: AsyncTimerStore) -> None:
        self._portal = portal
        self._store = store

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._portal.call(cast(Coroutine[Any, Any, Any], method(*args, **kwargs)))

        return call


async def _built(factory: StoreFactory, clock: ManualClock) -> TimerStore | AsyncTimerStore:
    takes_clock = _takes_argument(factory)
    made = factory(clock) if takes_clock else factory()
    if inspect.isawaitable(made):
        made = await made
    return made


def _takes_argument(factory: Callable[..., object]) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        and p.default is p.empty
        for p in parameters
    )


def open_store(factory: StoreFactory, portal: Portal) -> StoreTrial:
    """Build a fresh store with ``factory`` on ``portal``'s loop; its synchronous face."""
    clock = ManualClock(CLOCK_START) if _takes_argument(factory) else None
    store = portal.call(_built(factory, clock or ManualClock(CLOCK_START)))
    closer: Callable[[], object] | None = None
    aclose, close = getattr(store, "aclose", None), getattr(store, "close", None)
    if inspect.iscoroutinefunction(aclose):
        closer = lambda: portal.call(aclose())  # noqa: E731 - the store's own loop
    elif callable(close) and not inspect.iscoroutinefunction(close):
        closer = close
    if inspect.iscoroutinefunction(getattr(store, "claim_due", None)):
        store = cast(TimerStore, _Blocking(portal, cast(AsyncTimerStore, store)))
    return StoreTrial(cast(TimerStore, store), clock, closer)
