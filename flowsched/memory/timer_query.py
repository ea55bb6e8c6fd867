"""Internal: ``timers()``, ``pause`` and ``resume`` over a :class:`TimerHeap`.

Both in-memory schedulers call these under their own exclusion (the threaded one under its
lock, the asyncio one on its loop). An in-memory timer is ``"scheduled"``, ``"paused"`` or
(listed with ``state="dead"`` only) ``"dead"``: it has no claims, so never ``"claimed"`` -
an item whose handler runs right now is listed as scheduled.

A page is the ``limit`` smallest ``(due, id)`` after the cursor among the matching items:
one pass over the items keeping a heap of ``limit + 1`` (memory: one page; time: one pass
per page - there is no index to walk in a process's dict).

Pause keeps the item (``exists()`` and ``get()`` still see it) and drops its heap entries
when they are met; a running delivery may finish and its outcome is applied (a failure
moves the due time, a recurring tick moves to its next slot) but nothing fires until
:func:`resume` pushes the item back.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import datetime
from heapq import heappush

from flowsched.memory.store import TimerHeap
from flowsched.records import DeadLetter, ScheduleItem
from flowsched.steering import TimerInfo, TimerPage, TimerState
from flowsched.steering_query import TimerFilters, encode_cursor
from flowsched.store.info import dead_info, timer_info

__all__ = ["pause", "resume", "resumed_form", "timer_page"]


def timer_page(store: TimerHeap, filters: TimerFilters) -> TimerPage:
    """One page of ``store``'s timers under ``filters`` (see the module docstring)."""
    wanted = filters.limit + 1  # one more: whether another page follows
    if filters.state == "dead":
        letters = _dead_matches(store, filters)
        dead = heapq.nsmallest(wanted, letters, key=lambda d: (d.item.due, d.item.id))
        infos = [dead_info(letter) for letter in dead]
    else:
        items = heapq.nsmallest(wanted, _live_matches(store, filters), key=lambda i: (i.due, i.id))
        infos = [_info(store, item) for item in items]
    if len(infos) < wanted:
        return TimerPage(infos)
    page = infos[: filters.limit]
    return TimerPage(page, encode_cursor(page[-1].due, page[-1].id))


def _live_matches(store: TimerHeap, filters: TimerFilters) -> Iterator[ScheduleItem]:
    paused = store.paused
    want = filters.state
    if want == "claimed":
        return  # nothing in memory is claimed (see the module docstring)
    for item in store.items.values():
        if want is not None and (want == "paused") != (item.id in paused):
            continue
        if filters.admits(item.id, item.flow_id, item.kind.value, item.handler) and (
            filters.in_window(item.due, item.id)
        ):
            yield item


def _dead_matches(store: TimerHeap, filters: TimerFilters) -> Iterator[DeadLetter]:
    for dead in store.dead.values():
        item = dead.item
        if filters.admits(item.id, item.flow_id, item.kind.value, item.handler) and (
            filters.in_window(item.due, item.id)
        ):
            yield dead


def _info(store: TimerHeap, item: ScheduleItem) -> TimerInfo:
    state: TimerState = "paused" if item.id in store.paused else "scheduled"
    return timer_info(item, state, store.attempts.get(item.id, 0), store.errors.get(item.id))


def pause(store: TimerHeap, item_id: object) -> bool:
    """Pause ``item_id``; ``False`` if no such item is scheduled (pausing twice is fine)."""
    item = store.get(item_id)
    if item is None:
        return False
    store.paused.add(item.id)
    return True


def resume(store: TimerHeap, item_id: object, now: datetime) -> ScheduleItem | None:
    """Resume ``item_id`` (see :func:`resumed_form`); the form now scheduled, or ``None`` if
    no such item is scheduled. Resuming an item that is not paused changes nothing."""
    item = store.get(item_id)
    if item is None:
        return None
    if item.id not in store.paused:
        return item
    store.paused.discard(item.id)
    moved = resumed_form(item, now)
    entry = (moved.due, moved.generation, moved.id)
    if moved is not item:
        store.items[item.id] = moved  # a new due time: earlier heap entries are stale
    elif entry in store.heap:
        return item  # its entry was never met while paused (one scan: resume is rare)
    heappush(store.heap, entry)
    return moved


def resumed_form(item: ScheduleItem, now: datetime) -> ScheduleItem:
    """How a paused item goes on at ``now``: a one-shot item whose due time passed is due
    now; a recurring one whose next slot passed goes on at its first slot after ``now``
    (the missed ones are not replayed); an item due later keeps its due time."""
    if item.due > now:
        return item
    recurrence = item.recurrence
    if recurrence is None:
        return item.moved(now, item.previous)
    return item.moved(recurrence.next_slot(now), item.previous)
