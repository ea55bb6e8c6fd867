"""Internal: the console's charts as aggregation pipelines (pure, no driver): slot boundaries,
the due-load forecast, lateness, and dead letters per handler."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from flowsched.mongo.inspection import overdue_query

__all__ = ["failures_pipeline", "forecast_pipeline", "lateness_pipeline", "slots"]


def slots(now: datetime, per: str, span: timedelta) -> list[datetime]:
    """Slot boundaries from ``now`` (rounded down to ``per``) covering ``span``."""
    step = timedelta(hours=1) if per == "hour" else timedelta(minutes=1)
    start = now.replace(second=0, microsecond=0)
    if per == "hour":
        start = start.replace(minute=0)
    count = int(span / step) + 1
    return [start + n * step for n in range(count + 1)]


def forecast_pipeline(boundaries: Sequence[datetime]) -> list[dict[str, Any]]:
    """Due load per slot (one aggregation): items whose ``ready_at`` falls in each slot.

    ``ready_at`` is ``due`` while unclaimed and the lease's end while claimed: when the item
    is next up for a node. Run with the claim index as its hint: the range is on that index's
    last field, so the server reads index keys, not the whole collection."""
    window = {"ready_at": {"$gte": boundaries[0], "$lt": boundaries[-1]}}
    return [
        {"$match": window},
        {
            "$bucket": {
                "groupBy": "$ready_at",
                "boundaries": list(boundaries),
                "default": "later",
                "output": {"n": {"$sum": 1}},
            }
        },
    ]


def lateness_pipeline(now: datetime, boundaries: Sequence[datetime]) -> list[dict[str, Any]]:
    """Items due and still not delivered at ``now``, per minute of their due time over the
    last hour (``earlier``: due before that), one aggregation."""
    return [
        {"$match": overdue_query(now)},
        {
            "$bucket": {
                "groupBy": "$due",
                "boundaries": list(boundaries),
                "default": "earlier",
                "output": {"n": {"$sum": 1}},
            }
        },
    ]


def failures_pipeline() -> list[dict[str, Any]]:
    """Dead letters per handler (or per kind for kind-routed items)."""
    return [
        {"$group": {"_id": {"handler": "$handler", "kind": "$kind"}, "n": {"$sum": 1}}},
    ]
