"""Internal: what :class:`~flowsched.InMemoryScheduler` and
:class:`~flowsched.AsyncInMemoryScheduler` add alike to their node face (one copy for both):
claiming with no handler yet, a manual clock attached from construction, the log lines of
``cancel`` and ``requeue``, the check of a paging cursor and ``needs_start``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from flowsched.clock import Clock, attach_if_manual
from flowsched.delivery import DeliveryCore, Observer, RedeliveryPolicy
from flowsched.errors import SchedulerUnavailable
from flowsched.history import local_node
from flowsched.node.common import NodeArgs, stored_item
from flowsched.records import ScheduleItem, log_fields
from flowsched.store.memory import MemoryTimerStore
from flowsched.store.paging import decode_cursor

__all__ = ["CLAIM_BATCH", "HELD", "NO_ROUTE", "MemoryFace", "node_args"]

log = logging.getLogger("flowsched.memory")

CLAIM_BATCH = 256
"""Due items a node claims at a time: how many claimed items may wait for a free worker
(the rest stay in the heap, where replace and cancel are cheapest)."""

HELD = timedelta(days=36500)
"""The lease of an in-memory claim: held for as long as its handler runs (no other node can
take it over; a claim the handler abandoned is released at once)."""


NO_ROUTE = frozenset({""})
"""The routes a node with no handler claims for: none (so due items are set aside)."""


def node_args(
    clock: Clock,
    redelivery: RedeliveryPolicy | None,
    observer: Observer | None,
    workers: int,
    max_wait: timedelta,
    shutdown_timeout: timedelta,
) -> NodeArgs:
    """The node face's settings of an in-memory scheduler: this process's node id,
    :data:`CLAIM_BATCH` claims at a time, each :data:`HELD`, the clock read again at least
    every ``max_wait``; ``workers`` handlers at once; closing waits ``shutdown_timeout``."""
    return NodeArgs(
        clock=clock,
        redelivery=redelivery,
        observer=observer,
        node_id=local_node(),
        workers=workers,
        batch_size=CLAIM_BATCH,
        lease=HELD,
        poll_interval=max_wait,
        shutdown_timeout=shutdown_timeout,
    )


class MemoryFace:
    """A mixin, before the node face in the bases: it reads the face's parts."""

    _memory: MemoryTimerStore
    _clock: Clock
    _delivery: DeliveryCore
    _core: Any  # the node core and driver of either face
    _driver: Any
    _manual: bool
    _started: bool
    _closed: bool

    settle_here = True  # the store does no I/O: settle on the handler's thread/task

    def _serve_all(self, run_or_release: Callable[..., Any]) -> None:
        """Wire the in-memory ways into the built face: ``schedule``'s shortcuts, claims
        with no handler yet, ``run_or_release`` for each claim, the manual clock attached."""
        self._put = self._memory.put
        self._observe_scheduled = self._delivery.observes_scheduled
        # Claim even with no handler yet: a due item of a route nobody serves is set aside
        # (and logged) once, as it comes due.
        self._core.routes = self._driver.routes = self._serving
        self._driver.run_handler = run_or_release
        attach_if_manual(self._clock, self)

    def _put_here(self, item: ScheduleItem) -> ScheduleItem:
        """``schedule``'s hot path (bench/memory_bench.py, bench/async_bench.py): the node
        face's ``schedule``, inlined, on a store that answers at once."""
        if item.__class__ is not ScheduleItem:
            stored_item(item)
        if self._closed:
            raise SchedulerUnavailable(
                f"{type(self).__name__} is closed: cannot schedule {item.id!r}"
            )
        stored = self._put(item)
        if self._observe_scheduled:
            self._delivery.scheduled(stored)
        # Read without the lock: None means the node claims at once anyway, and a claim
        # that misses this item is followed by a look for the next due time.
        look_at = self._core.look_at
        if look_at is not None and stored.due < look_at:
            self._driver.wake_at(stored.due)
        return stored

    def _serving(self) -> frozenset[str]:
        return self._delivery.routes() or NO_ROUTE

    def _to_cancel(self, item_id: str) -> ScheduleItem | None:
        """The item ``cancel`` will log (``None``: no debug log to write)."""
        return self._memory.get(item_id) if log.isEnabledFor(logging.DEBUG) else None

    def _cancelled(self, item: ScheduleItem | None, removed: bool) -> bool:
        if removed and item is not None:
            log.debug("cancelled %s %s", item.kind.value, item.id, extra=log_fields(item))
        return removed

    def _requeued(self, item_id: str) -> bool:
        """Log and observe the dead letter ``item_id`` scheduled again; ``True``."""
        item = self._memory.get(item_id)
        if item is not None:
            log.info("requeued dead letter %s %s", item.kind.value, item.id, extra=log_fields(item))
            self._delivery.scheduled(item)
        return True

    @staticmethod
    def _check_cursor(filters: dict[str, Any]) -> dict[str, Any]:
        """``filters``, once its ``after`` is this store's cursor (else a ``ValueError``
        naming ``after``): checked at the call, not at the first page."""
        after = filters.get("after")
        if isinstance(after, str):
            decode_cursor(after)
        return filters

    @property
    def needs_start(self) -> bool:
        """Whether it fires nothing until started (``start()``, ``with`` or ``async with``):
        on a real clock, never started and not closed (an ``AsyncFlowDomain`` on such an
        asyncio one warns once, at its first timer)."""
        return not (self._manual or self._started or self._closed)
