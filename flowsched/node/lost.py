"""Internal: a run lost with its node twice in a row counts as a failed delivery.

A node that dies (or is cut off) while a handler runs leaves a started claim that nobody
settles; when its lease ends another node claims the item and runs it again (at least once).
If the handler itself kills its node - a segfault in a native library, an out-of-memory
kill, ``os._exit`` - that would go on for ever, each node that takes the item dying in turn.
So the stores count a form's lost runs in a row (:attr:`~flowsched.store.Claim.lapsed`) and
the node, given a claim with :data:`~flowsched.store.records.LOST_TWICE` of them, does not
call the handler again: the last lost run counts as a failed delivery, with the item's
redelivery policy (backoff, then a dead letter at ``max_attempts``). The first lost run is
free - nodes die for many reasons besides their handlers - so with ``max_attempts=1`` a
handler that kills its node runs twice, then the item is dead-lettered, as on
``MongoScheduler`` (``deliveries`` and suspect claims, :mod:`flowsched.mongo.claims`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from flowsched.delivery import DeliveryCore
from flowsched.outcomes import Outcome
from flowsched.records import ScheduleItem, log_fields
from flowsched.store.records import LOST_TWICE, Claim

__all__ = ["LOST_TWICE", "DeliveryLost", "lost_run", "lost_slot"]

log = logging.getLogger("flowsched.node")


def lost_slot(claim: Claim, now: datetime, lease: timedelta) -> ScheduleItem:
    """The item to run for ``claim``, whose last run (or more) started and was lost
    (``claim.lapsed`` >= 1, below :data:`LOST_TWICE`). A one-shot item runs again. A
    recurring item's lost run took the latest slot due when it was claimed, no later than
    ``lease`` before ``now`` (its lease had to end first; nodes of one store share a lease):
    that slot - the stored one, ``item.due``, or a newer one if the item waited unclaimed
    past it - counts as applied, so no node runs it again (a tick is applied once; a slot
    that fell due after it still runs, told it as ``previous``)."""
    item = claim.item
    if item.recurrence is None or not claim.lapsed:
        return item
    taken = item.recurrence.slot_to_run(now - lease, item.due) or item.due
    return item.moved(taken, taken, item.runs + 1)


class DeliveryLost(Exception):
    """What a lost run is counted as: its node stopped renewing the lease before it ended."""


def lost_run(delivery: DeliveryCore, claim: Claim) -> Outcome:
    """The outcome of ``claim``, whose last :data:`LOST_TWICE` runs or more were lost with
    their nodes: the last counts as a failed delivery (a recurring item's slot as run, unless
    its recurrence retries failures), and the handler is not called."""
    item = claim.item
    if item.recurrence is not None:
        try:
            ticked = delivery.tick(item)
        except Exception as exc:  # a recurrence that cannot compute its slot
            return delivery.failure(item, claim.attempt, f"{type(exc).__name__}: {exc}")
        if not isinstance(ticked, ScheduleItem):
            return ticked  # nothing due yet (NextSlot), ended, or no slot left
        item = ticked
    log.warning(
        "%s %s: its last %d runs were lost with their nodes (the lease ended, never "
        "settled); the last counts as a failed delivery and the handler is not called again",
        item.kind.value,
        item.id,
        claim.lapsed,
        extra=log_fields(item),
    )
    error = DeliveryLost(
        f"{claim.lapsed} runs in a row were lost with their nodes (the lease ended before "
        "an outcome was written: the node crashed, was killed or was cut off)"
    )
    return delivery.outcome(item, claim.attempt, error)
