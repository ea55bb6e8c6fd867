"""A firing node's bookkeeping survives bad documents and failed calls: odd ids break no
claim, a claim whose reply was lost leaves nothing half-held (the claims come back at lease
end, uncounted), and outcomes written one by one are kept when the server fails meanwhile.
Checked through the face and the store interface (the node core's, as on every store)."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any

from mongo_nodes import WAIT, eventually
from pymongo.errors import OperationFailure

from flowsched import SchedulerUnavailable
from flowsched.clock import SystemClock
from flowsched.port import ScheduleItem, ScheduleKind


def failures(caplog: Any) -> list[str]:
    """The node's lines about failed store calls (an outage, a refused outcome)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "flowsched.node"
        and r.levelno >= logging.WARNING
        and ("unavailable" in r.getMessage() or "refused" in r.getMessage())
    ]


def test_odd_ids_never_reach_the_held_set_and_no_turn_fails(make, collection, caplog):
    now = SystemClock().now()
    timer = {"bucket": 0, "kind": "TIMER", "route": "k:TIMER", "due": now, "ready_at": now}
    timer["generation"] = 1
    for odd in ({"sub": 1}, 7, 1.5):
        collection.insert_one({**timer, "_id": odd, "attempts": 0, "deliveries": 0})
    scheduler = make(clock=SystemClock(), poll_interval=timedelta(milliseconds=50))
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    caplog.set_level(logging.WARNING, logger="flowsched")
    with scheduler:
        for n in range(5):
            scheduler.schedule(ScheduleItem(f"good-{n}", ScheduleKind.TIMER, now))
        assert eventually(lambda: collection.count_documents({}) == 0)
    assert sorted(fired) == [f"good-{n}" for n in range(5)]
    assert not failures(caplog)  # no call failed on their account


class FailsAfterClaiming:
    """The collection, except that the first claiming update applies and then fails (its
    reply lost), so the turn that claimed fails after claiming."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.failed = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _claiming(self, result: Any) -> Any:
        if not self.failed.is_set():
            self.failed.set()
            raise OperationFailure("injected: the claim's reply was lost", code=8000)
        return result

    def update_many(self, query: Any, update: Any, *args: Any, **kwargs: Any) -> Any:
        result = self._inner.update_many(query, update, *args, **kwargs)
        if "claim" in update.get("$set", {}):
            return self._claiming(result)
        return result

    def update_one(self, query: Any, update: Any, *args: Any, **kwargs: Any) -> Any:
        # mongomock: a claim's update_many goes one document at a time (commands.py)
        result = self._inner.update_one(query, update, *args, **kwargs)
        if update.get("$set", {}).get("claim"):
            return self._claiming(result)
        return result

    def bulk_write(self, operations: Any, *args: Any, **kwargs: Any) -> Any:
        result = self._inner.bulk_write(operations, *args, **kwargs)
        if any("claim" in (getattr(op, "_doc", None) or {}).get("$set", {}) for op in operations):
            return self._claiming(result)
        return result


def test_a_turn_that_fails_after_claiming_leaves_the_claims_to_come_back_uncounted(
    make, collection
):
    failing = FailsAfterClaiming(collection)
    scheduler = make(
        collection=failing,
        clock=SystemClock(),
        poll_interval=timedelta(milliseconds=50),
        lease=timedelta(milliseconds=600),
    )
    attempts: dict[str, int] = {}
    scheduler.subscribe(
        ScheduleKind.TIMER, lambda item, attempt: attempts.setdefault(item.id, attempt)
    )
    now = SystemClock().now()
    with scheduler:
        for n in range(3):
            scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, now))
        assert failing.failed.wait(WAIT)
        assert eventually(lambda: len(attempts) == 3)
        assert eventually(lambda: collection.count_documents({}) == 0)
    # The failed turn had claimed them and never started them: no attempt counted.
    assert attempts == {"t-0": 0, "t-1": 0, "t-2": 0}


def test_outcomes_written_one_by_one_are_kept_when_the_server_fails_meanwhile(make, collection):
    # A batch with an outcome that cannot be encoded is written one outcome at a time; if
    # the server fails during that, the outcomes are kept and written on a later call (not
    # dropped while their claims are renewed for ever).
    scheduler = make(clock=SystemClock(), poll_interval=timedelta(milliseconds=50))
    store = scheduler.store
    settle = store.settle
    sizes: list[int] = []

    def flaky_settle(batch: Any) -> Any:
        sizes.append(len(batch))
        if len(sizes) == 1:
            raise ValueError("injected: an outcome that cannot be encoded")
        if len(sizes) == 2:
            raise SchedulerUnavailable("injected: the server went away")
        return settle(batch)

    store.settle = flaky_settle  # what the node calls: the store interface's settle
    together = threading.Barrier(2, timeout=WAIT)  # both end at once: one settle batch
    ran: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append(item.id)
        together.wait()

    scheduler.subscribe(ScheduleKind.TIMER, handler)
    now = SystemClock().now()
    with scheduler:
        for n in (1, 2):
            scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, now))
        assert eventually(lambda: collection.count_documents({}) == 0)
    assert sizes[0] == 2 and set(sizes[1:]) == {1}, sizes  # then one by one, kept and retried
    assert len(sizes) >= 4 and sorted(ran) == ["t-1", "t-2"]  # none dropped, none run again
