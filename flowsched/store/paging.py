"""Internal: paging of ``timers()``, written once for every store: the cursor and the filter rules.

Order: soonest due first, ties by id. The cursor (:attr:`TimerPage.next`) is the last
row's ``(due, id)`` as ``"<due ISO 8601>|<id>"``: a page starts strictly after it, so paging
is stable while timers are added or removed (a database store serves it with an index on
``(due, id)`` and ``WHERE (due, id) > (cursor)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from flowsched.clock import ensure_utc
from flowsched.steering import TIMER_STATES, TimerInfo, TimerPage
from flowsched.store.records import TimerSelection

__all__ = ["decode_cursor", "encode_cursor", "matches", "page_of"]


def encode_cursor(due: datetime, item_id: str) -> str:
    """The cursor that starts a page after ``(due, item_id)``."""
    return f"{due.isoformat()}|{item_id}"


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """``(due, id)`` of a cursor; ``ValueError`` naming ``after`` for one not made here."""
    due_text, sep, item_id = cursor.partition("|") if isinstance(cursor, str) else ("", "", "")
    try:
        if not sep:
            raise ValueError
        due = ensure_utc(datetime.fromisoformat(due_text), "cursor")
    except (ValueError, TypeError):
        raise ValueError(
            f"timers: after={cursor!r} is not a cursor (pass a TimerPage.next)"
        ) from None
    return due, item_id


def matches(info: TimerInfo, query: TimerSelection) -> bool:
    """Whether ``info`` passes every filter of ``query`` (the cursor aside)."""
    if query.state is not None and query.state not in TIMER_STATES:
        raise ValueError(f"timers: state={query.state!r} is not one of {TIMER_STATES}")
    return (
        (query.id_prefix is None or info.id.startswith(query.id_prefix))
        and (query.flow_id is None or info.flow_id == query.flow_id)
        and (query.kind is None or info.kind == query.kind)
        and (query.handler is None or info.handler == query.handler)
        and (query.state is None or info.state == query.state)
        and (query.due_from is None or info.due >= query.due_from)
        and (query.due_to is None or info.due <= query.due_to)
    )


def page_of(infos: Iterable[TimerInfo], query: TimerSelection) -> TimerPage:
    """The page of ``infos`` that ``query`` asks for (for stores that filter in Python)."""
    after = decode_cursor(query.after) if query.after is not None else None
    rows = sorted(
        (
            info
            for info in infos
            if matches(info, query) and (after is None or (info.due, info.id) > after)
        ),
        key=lambda info: (info.due, info.id),
    )
    page = rows[: query.limit]
    more = len(rows) > query.limit
    return TimerPage(page, encode_cursor(page[-1].due, page[-1].id) if more else None)
