"""Internal: the sweeper's pacing - when a node claims, how far it looks ahead, how long
outcomes and start marks gather before they are written.

Pure numbers and two small functions, so the loop in :mod:`flowsched.mongo.sweeper` reads as
what it does and these trade-offs (fewer round trips against later firing) sit in one place.
"""

from __future__ import annotations

from datetime import timedelta

__all__ = [
    "BATCH_GAP",
    "FLUSH_INTERVAL",
    "PIPELINE",
    "SHORT_LOOKAHEAD",
    "START_GATHER",
    "WAKE_SLACK",
    "claim_lookahead",
    "wait_after_claim",
]

FLUSH_INTERVAL = 0.05
"""While deliveries are running, finished ones are written at least this often (seconds)."""

SHORT_LOOKAHEAD = timedelta(milliseconds=100)
"""How far a claim looks past now while items are falling due (see claim_lookahead)."""

PIPELINE = 2
"""Batches a node may hold at once: the next claim runs while the last batch is delivered
and settled, so the server works on one while the node works on the other."""

BATCH_GAP = 0.05
"""Seconds: the shortest wait for the next item the claim query saw coming
(see wait_after_claim)."""

WAKE_SLACK = 0.001
"""Seconds added to a wait for a lone item's due time (a timed wait may end a little early)."""

START_GATHER = 0.002
"""How long the first start mark asked for (suspect claims only) may wait for other workers
to ask too, so that one write marks a whole wave (seconds); not at all when no other worker
can ask."""


def claim_lookahead(poll: timedelta, *, behind: bool, busy: bool) -> timedelta:
    """How far the claim query looks past now: one ``poll`` when idle (to plan the next
    wake); not at all when behind (the last claim was full: the next turn comes at once);
    :data:`SHORT_LOOKAHEAD` when busy (the last claim found due items). Narrower ranges are
    cheaper on servers that read every match before the limit, and in a burst the next claim
    is at most :data:`BATCH_GAP` away anyway."""
    if behind:
        return timedelta(0)
    if busy:
        return min(SHORT_LOOKAHEAD, poll)
    return poll


def wait_after_claim(
    ahead: float | None, lookahead: timedelta, poll: float, *, found_due: bool = True
) -> float:
    """Seconds until the next claim after one that was not full: until the next item the
    query saw coming (``ahead`` seconds away), or to the end of the range it looked at when
    it saw none (``None``); at most ``poll``.

    Not sooner than :data:`BATCH_GAP` (or a tenth of a shorter poll): items falling due
    close together are claimed in one batch (a few round trips) rather than one claim each,
    and none waits for it longer than that. Except after a claim that found nothing due
    (``found_due=False``: it came just before the next item, a lone timer): then the next
    claim is at that item's time (plus :data:`WAKE_SLACK`), not a batch gap later - one
    claim either way, and the item is not held back by the gap. ``ahead`` must then be
    counted from the end of the claim on the clock that judges due times (never early), so
    that the next claim finds the item due."""
    gap = min(poll / 10, BATCH_GAP)
    if ahead is not None and not found_due:
        return min(max(ahead, 0.0) + WAKE_SLACK, poll)
    if ahead is None:
        return min(max(lookahead.total_seconds(), gap), poll)
    return min(max(ahead, gap), poll)
