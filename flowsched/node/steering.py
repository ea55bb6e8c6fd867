"""Internal: ``timers()`` and ``iter_timers`` of the node schedulers (CONTRACT section 18),
written once for both faces, over any :class:`~flowsched.store.TimerStore`.

The arguments are checked as on every other adapter
(:func:`~flowsched.steering_query.timer_filters`: a bad one raises ``ValueError`` or
``TypeError`` naming it, at the call); the cursor is the stores' own (:attr:`TimerPage.next`,
:func:`flowsched.store.paging.encode_cursor`, written once for every store), so one they did
not make is refused at the call too, before any page is read.

The store lists dead letters among the timers and takes ``due_to`` as inclusive; the port
lists dead letters only with ``state="dead"`` and means ``due_from <= due < due_to``.
:func:`page_steps` bridges the two: timers at ``due_to`` come last in due order (they end
the listing), and dead letters are skipped, reading on until the page is full. A page
whose following timers are all dead letters may carry a ``next`` that leads to an empty last
page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import replace
from typing import Any

from flowsched.steering import TimerInfo, TimerPage
from flowsched.steering_query import ITER_PAGE, timer_filters
from flowsched.store.paging import decode_cursor
from flowsched.store.records import TimerSelection

__all__ = [
    "async_page",
    "async_pages",
    "checked_selection",
    "iter_selection",
    "page_steps",
    "sync_page",
    "sync_pages",
]

PageSteps = Generator[TimerSelection, TimerPage, TimerPage]
"""Yields the store queries to run, is sent each one's page, returns the port's page."""


def checked_selection(**filters: Any) -> TimerSelection:
    """The store's selection of ``timers(**filters)``; ``ValueError``/``TypeError`` naming a
    bad argument (an unknown keyword included)."""
    after = filters.pop("after", None)
    if after is not None and not isinstance(after, str):
        raise TypeError(f"timers() after must be a cursor string (a page's next), got {after!r}")
    if after is not None:
        decode_cursor(after)  # ValueError naming after: not a page's next
    checked = timer_filters(**filters)
    return TimerSelection(
        id_prefix=checked.id_prefix,
        flow_id=checked.flow_id,
        kind=checked.kind,
        handler=checked.handler,
        state=checked.state,
        due_from=checked.due_from,
        due_to=checked.due_to,
        limit=checked.limit,
        after=after,
    )


def iter_selection(**filters: Any) -> TimerSelection:
    """The checked selection of ``iter_timers(**filters)`` (pages of 500 unless ``limit``)."""
    return checked_selection(**{"limit": ITER_PAGE, **filters})


def page_steps(query: TimerSelection) -> PageSteps:
    """The port's page of ``query`` from the store's pages (see the module docstring)."""
    kept: list[TimerInfo] = []
    ask = query
    while True:
        page = yield ask
        for info in page.items:
            if query.due_to is not None and info.due >= query.due_to:
                return TimerPage(kept, None)  # the rest are at due_to or after
            if query.state is None and info.state == "dead":
                continue
            kept.append(info)
        if page.next is None or len(kept) >= query.limit:
            return TimerPage(kept, page.next)
        ask = replace(query, limit=query.limit - len(kept), after=page.next)


def sync_page(fetch: Callable[[TimerSelection], TimerPage], query: TimerSelection) -> TimerPage:
    """Run :func:`page_steps` with a synchronous store's ``timers``."""
    steps = page_steps(query)
    ask = next(steps)
    while True:
        try:
            ask = steps.send(fetch(ask))
        except StopIteration as done:
            page: TimerPage = done.value
            return page


async def async_page(
    fetch: Callable[[TimerSelection], Awaitable[TimerPage]], query: TimerSelection
) -> TimerPage:
    """Run :func:`page_steps` with an asynchronous store's ``timers``."""
    steps = page_steps(query)
    ask = next(steps)
    while True:
        try:
            ask = steps.send(await fetch(ask))
        except StopIteration as done:
            page: TimerPage = done.value
            return page


def sync_pages(
    fetch: Callable[[TimerSelection], TimerPage], query: TimerSelection
) -> Iterator[TimerInfo]:
    """Every timer of ``query``, page after page (one page in memory)."""
    while True:
        page = sync_page(fetch, query)
        yield from page.items
        if page.next is None:
            return
        query = replace(query, after=page.next)


async def async_pages(
    fetch: Callable[[TimerSelection], Awaitable[TimerPage]], query: TimerSelection
) -> AsyncIterator[TimerInfo]:
    """Every timer of ``query``, page after page (one page in memory)."""
    while True:
        page = await async_page(fetch, query)
        for info in page.items:
            yield info
        if page.next is None:
            return
        query = replace(query, after=page.next)
