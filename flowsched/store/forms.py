"""Internal: how the reference store moves a stored form - the form a resume gives, and a
lease's end (both pure: no store state)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowsched.records import ScheduleItem

__all__ = ["lease_end", "resumed_form"]


def resumed_form(item: ScheduleItem, now: datetime, claimed: bool) -> ScheduleItem:
    """How a paused ``item`` goes on at ``now``: a one-shot whose time passed is due now
    (unless ``claimed``: its run decides); a recurring one whose next slot passed goes on at
    its first slot after ``now`` - missed slots are not replayed, the last one missed counts
    as applied; an item due later keeps its due time."""
    if item.recurrence is None:
        return item.moved(now, item.previous) if not claimed and item.due < now else item
    try:
        following = item.recurrence.next_slot(now)
    except ValueError:
        return item  # no slot left: the next tick sets it aside
    return item.moved(following, max(item.due, now)) if following > item.due else item


def lease_end(now: datetime, lease: timedelta) -> datetime:
    """``now + lease``, or the last instant there is (a long lease near the year 9999)."""
    try:
        return now + lease
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)
