"""Internal: what both drivers hold and judge alike - the core, the store, how one claim
is delivered, the routes served, the store's time and how long a close may wait - so that
:mod:`flowsched.drivers.threads` and :mod:`flowsched.drivers.asyncio` differ only in how
they wait."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Generic, TypeVar

from flowsched.clock import Clock
from flowsched.node.actions import Sleep
from flowsched.node.core import NodeCore
from flowsched.node.store_time import claimable_at, core_clock

__all__ = ["DriverBase"]

S = TypeVar("S")
R = TypeVar("R")


class DriverBase(Generic[S, R]):
    """Runs ``core`` over ``store`` (an ``S``); ``run_handler(claim)`` (an ``R``) makes one
    delivery. A driver sets up how it waits in :meth:`_prepare`."""

    def __init__(
        self,
        core: NodeCore,
        store: S,
        run_handler: R,
        routes: Callable[[], frozenset[str]],
        clock: Clock,
        *,
        shutdown_timeout: timedelta,
        settle_here: bool = False,
    ) -> None:
        """``settle_here``: settle each outcome as its handler returns, on the handler's own
        thread or task (a store with no I/O: the outcome is applied before anything else can
        read the item), instead of in batches from the loop."""
        self.core = core
        self.settle_here = settle_here
        self.clock = clock
        self.store = store
        self.run_handler = run_handler
        self.routes = routes
        self.now = core_clock(store, clock)  # the store's time, as the core judges it
        self.claimable = claimable_at(store)  # a due time as the core wakes for it (wake_at)
        self.shutdown_timeout = shutdown_timeout
        self._prepare()

    def _prepare(self) -> None:
        """Set up what this driver waits with (called once, at the end of construction)."""

    def _timeout(self, action: Sleep) -> float:
        """Seconds to wait for ``action``: until its time, at most a poll interval."""
        poll = self.core.settings.poll_interval.total_seconds()
        if action.until is None:
            return poll
        left = (action.until - self.now()).total_seconds()
        return min(max(left, 0.0), poll)
