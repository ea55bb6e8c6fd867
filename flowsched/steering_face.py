"""Internal: the steering calls of CONTRACT section 18, written once per face.

:class:`TimerSteering` (synchronous schedulers) and :class:`AsyncTimerSteering` (asyncio
ones) give a scheduler ``timers``, ``iter_timers``, ``pause`` and ``resume``, checking the
arguments (:func:`~flowsched.steering_query.timer_filters`) and paging; the adapter supplies
three hooks: ``_timer_page(filters)``, ``_pause(item_id)`` and ``_resume(item_id)``
(MongoDB: :mod:`flowsched.mongo.timer_query`; the node schedulers: :mod:`flowsched.node.steering`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Unpack

from flowsched.steering import TimerInfo, TimerPage
from flowsched.steering_query import (
    ITER_PAGE,
    TimerFilterArgs,
    TimerFilters,
    timer_filters,
)

__all__ = ["AsyncTimerSteering", "TimerSteering"]


class TimerSteering:
    """``timers``, ``iter_timers``, ``pause`` and ``resume`` of a synchronous scheduler."""

    def timers(self, **filters: Unpack[TimerFilterArgs]) -> TimerPage:
        """One page of stored timers, soonest due first (ties by id), as :class:`TimerInfo`.

        Every given filter must hold: ``id_prefix`` (ids starting with it), ``flow_id``,
        ``kind`` (a :class:`ScheduleKind` or its name), ``handler`` (items addressed to that
        named handler), ``state`` (``"scheduled"``, ``"claimed"``, ``"paused"``; ``"dead"``
        lists the dead letters instead, which are otherwise left out), ``due_from <= due <
        due_to`` (timezone-aware). ``limit``: 1 to 1000. ``after``: the ``next`` of the page
        before; ``next`` is ``None`` on the last page. Pages are by keyset: stable while timers
        fire meanwhile, and the last costs what the first does (on MongoDB, one indexed
        ``find``). A bad argument raises ``ValueError``/``TypeError`` naming it.

        >>> page = scheduler.timers(kind="TIMER", limit=100)  # doctest: +SKIP
        >>> more = scheduler.timers(kind="TIMER", limit=100, after=page.next)  # doctest: +SKIP
        """
        return self._timer_page(timer_filters(**filters))

    def iter_timers(self, **filters: Any) -> Iterator[TimerInfo]:
        """Every timer :meth:`timers` would list with ``filters``, page after page (one page
        in memory at a time; ``limit`` is the page size read, 500 unless given). The
        arguments are checked here, before the first page is read."""
        checked = timer_filters(**{"limit": ITER_PAGE, **filters})
        return self._iterate(checked)

    def _iterate(self, filters: TimerFilters) -> Iterator[TimerInfo]:
        while True:
            page = self._timer_page(filters)
            yield from page.items
            if page.next is None:
                return
            filters = filters.following(page.next)

    def pause(self, item_id: str) -> bool:
        """Stop ``item_id`` firing, on every node and across restarts, until :meth:`resume`;
        it still ``exists()`` and :meth:`timers` shows it ``"paused"``. ``False`` if no such
        timer is scheduled. A delivery already running may finish (its outcome is applied,
        the item stays paused). Scheduling again under the id replaces it unpaused."""
        return self._pause(item_id)

    def resume(self, item_id: str) -> bool:
        """Let a paused ``item_id`` fire again: a one-shot item whose due time passed is due
        now, a recurring one goes on at its next slot after now (missed slots are not
        replayed), anything else keeps its due time. ``False`` if no such timer is
        scheduled; ``True`` for one that was not paused (nothing changes)."""
        return self._resume(item_id)

    def _timer_page(self, filters: TimerFilters) -> TimerPage:
        raise NotImplementedError

    def _pause(self, item_id: str) -> bool:
        raise NotImplementedError

    def _resume(self, item_id: str) -> bool:
        raise NotImplementedError


class AsyncTimerSteering:
    """The same calls for an asyncio scheduler: ``await`` them; ``iter_timers`` is an async
    iterator (``async for info in scheduler.iter_timers(kind="TIMER")``)."""

    async def timers(self, **filters: Unpack[TimerFilterArgs]) -> TimerPage:
        """One page of stored timers (as :meth:`TimerSteering.timers`)."""
        return await self._timer_page(timer_filters(**filters))

    def iter_timers(self, **filters: Any) -> AsyncIterator[TimerInfo]:
        """Every timer :meth:`timers` would list with ``filters``, page after page (as
        :meth:`TimerSteering.iter_timers`); the arguments are checked at the call."""
        checked = timer_filters(**{"limit": ITER_PAGE, **filters})
        return self._iterate(checked)

    async def _iterate(self, filters: TimerFilters) -> AsyncIterator[TimerInfo]:
        while True:
            page = await self._timer_page(filters)
            for info in page.items:
                yield info
            if page.next is None:
                return
            filters = filters.following(page.next)

    async def pause(self, item_id: str) -> bool:
        """As :meth:`TimerSteering.pause`."""
        return await self._pause(item_id)

    async def resume(self, item_id: str) -> bool:
        """As :meth:`TimerSteering.resume`."""
        return await self._resume(item_id)

    async def _timer_page(self, filters: TimerFilters) -> TimerPage:
        raise NotImplementedError

    async def _pause(self, item_id: str) -> bool:
        raise NotImplementedError

    async def _resume(self, item_id: str) -> bool:
        raise NotImplementedError
