"""Internal: :class:`MongoTimerStore` - the :class:`~flowsched.store.TimerStore` interface on a
pymongo ``Collection``, in the documents ``MongoScheduler`` writes (``mongo/documents.py``).

Items: one document each (``_id`` the item id, a random 63-bit ``generation``, ``ready_at``
= due, or the lease's end while claimed, ``claim: {owner, token, lease_until, at}``), plus
``paused: true`` while paused. Dead letters in ``<name>_dead``, unusable documents in
``<name>_quarantine`` (moved there, with the reason, when read), the history in
``<name>_history`` (:mod:`flowsched.mongo.history`: one document per item, its last
``history_limit`` attempts, removed ``history_retention`` after the last).

Claims are taken in batches: one ``find`` of the candidates and one conditional
``update_many`` (each document taken atomically: exactly one node wins it); every later
claim-side write is fenced by the claim's identity, ``_id``, ``generation``, ``claim.owner``
and ``claim.token``, in its filter (a confirm or a renewal also by ``claim.lease_until``
after the latest the database's time can be), never by equality with a lease end: a stale
claim's write matches nothing, and a renewal whose reply was lost leaves the claim valid.
Confirms, renewals, releases and settles are one ``bulk_write`` per call, whatever its
size; the round trips of each are in :mod:`flowsched.mongo.timer_claims`.
Times are the database's, in milliseconds (BSON dates): measured with
``hello`` through a :class:`~flowsched.store.measured_clock.MeasuredClock` (due judged by
the earliest it can be, leases and deadlines by the latest), or the injected clock's when
one is given. A ``deadline`` is checked before the write is sent (the test server's
``$$NOW`` cannot be trusted, and mongomock has none).

Every operation is a procedure of :class:`~flowsched.mongo.timer_ops.TimerSteps`, shared
with :class:`~flowsched.mongo.async_timer_store.AsyncMongoTimerStore`: this class only runs
them (``drive``) and says driver outages as the interface does
(:func:`~flowsched.mongo.timer_errors.outage`).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Collection as Routes
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, Unpack

from pymongo.collection import Collection

from flowsched.mongo.commands import Steps, drive
from flowsched.mongo.timer_errors import outage
from flowsched.mongo.timer_ops import MongoStoreArgs, MongoStoreAttributes, TimerSteps
from flowsched.records import DeadLetter, ScheduleItem
from flowsched.steering import Attempt, TimerPage
from flowsched.store.records import (
    Claim,
    QuarantinedRecord,
    Settlement,
    SettleResult,
    TimerSelection,
)

__all__ = ["MongoTimerStore"]

T = TypeVar("T")


class MongoTimerStore(MongoStoreAttributes):
    """Timers in ``collection`` (a pymongo ``Collection``) behind the store interface.

    The keywords (:class:`~flowsched.mongo.timer_ops.MongoStoreArgs`, defaults in
    parentheses): ``clock`` - judge time by it (tests; ``None``: the database's, measured on
    ``node_clock``, with ``max_clock_skew`` (1 s) before a skew warning); ``history_limit``
    (20) attempts kept per item, for ``history_retention`` (7 days) after the last;
    ``buckets`` (1) and ``serve_buckets`` (all); ``node`` ("store"), who records the bucket
    count and quarantines; ``op_timeout`` (``None``: no limit). The bucket count is checked
    and the indexes created at the first call (:meth:`open`); an unknown keyword is a
    ``TypeError`` naming it."""

    def __init__(
        self,
        collection: Collection[Any],
        **options: Unpack[MongoStoreArgs],
    ) -> None:
        find = getattr(collection, "find_one_and_delete", None)
        if find is None or inspect.iscoroutinefunction(find):
            raise TypeError(
                f"MongoTimerStore: collection must be a pymongo Collection (from MongoClient, "
                f"not AsyncMongoClient), got {type(collection).__name__}"
            )
        self.collection = collection
        self.steps = TimerSteps(collection, **options)
        self._opened = False
        self._opening = threading.Lock()

    def __repr__(self) -> str:
        return f"MongoTimerStore({self.collection.full_name})"

    def open(self, for_call: str | None = None, subject: str | None = None) -> None:
        """Check the bucket count and create the indexes (idempotent; the first call of any
        operation does it: building a store makes no round trip; an outage then names that
        call, ``for_call`` on ``subject``)."""
        if self._opened:
            return
        with self._opening:
            if not self._opened:
                self._call("open", self.steps.setup(), subject, for_call)
                self._opened = True

    def _run(self, what: str, steps: Steps[T], subject: str | None = None) -> T:
        if not self._opened:
            self.open(what, subject)
        return self._call(what, steps, subject)

    def _call(
        self, what: str, steps: Steps[T], subject: str | None = None, named: str | None = None
    ) -> T:
        try:
            with self.steps.limit(what):
                return drive(steps, self.steps.roles)
        except Exception as exc:
            raised = outage(
                exc,
                what,
                subject=subject,
                named=named,
                collection=self.collection,
                op_timeout=self.steps.op_timeout,
            )
            if raised is exc:
                raise
            raise raised from exc

    def now(self) -> datetime:
        """The database's time (the injected clock's, when one was given)."""
        return self._run("now", self.steps.now())

    def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        return self._run("put", self.steps.put(item, deadline), item.id)

    def get(self, item_id: str) -> ScheduleItem | None:
        return self._run("get", self.steps.get(item_id), item_id)

    def exists(self, item_id: str) -> bool:
        return self._run("exists", self.steps.exists(item_id), item_id)

    def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        return self._run("remove", self.steps.remove(item_id, generation, deadline), item_id)

    def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        return self._run("remove_flow", self.steps.remove_flow(flow_id, deadline), flow_id)

    def claim_due(
        self, routes: Routes[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        return self._run("claim_due", self.steps.claim_due(routes, owner, lease, limit))

    def claim_started(
        self, routes: Routes[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        """Beyond the interface: claims that are started as they are claimed (the node
        core's ``start_on_claim``; see ``ClaimSteps.claim_started``)."""
        return self._run("claim_started", self.steps.claim_started(routes, owner, lease, limit))

    def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        return self._run("confirm_start", self.steps.confirm_start(claims))

    def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        return self._run("renew", self.steps.renew(claims, lease))

    def release(self, claims: Sequence[Claim]) -> int:
        return self._run("release", self.steps.release(claims))

    def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        return self._run("settle", self.steps.settle(settlements))

    def next_due(self, routes: Routes[str], after: datetime | None = None) -> datetime | None:
        return self._run("next_due", self.steps.next_due(routes, after))

    def next_wake(self, routes: Routes[str], within: timedelta | None = None) -> datetime | None:
        """Beyond the interface: :meth:`next_due` on the node's clock (what its driver
        sleeps until; ``None`` if nothing is due ``within`` from now; see
        ``TimerSteps.next_wake``)."""
        return self._run("next_due", self.steps.next_wake(routes, within))

    def dead_letters(self) -> list[DeadLetter]:
        return self._run("dead_letters", self.steps.dead_letters())

    def requeue(self, item_id: str, due: datetime, *, replace: bool = False) -> ScheduleItem | None:
        return self._run("requeue", self.steps.requeue(item_id, due, replace))

    def ping(self) -> None:
        """Beyond the interface: reach the server once."""
        self._run("ping", self.steps.ping())

    def quarantined(self) -> list[QuarantinedRecord]:
        return self._run("quarantined", self.steps.quarantined())

    def timers(self, query: TimerSelection) -> TimerPage:
        return self._run("timers", self.steps.timers(query))

    def history(self, item_id: str) -> list[Attempt]:
        return self._run("history", self.steps.history(item_id))

    def heartbeat(self, node: str, routes: frozenset[str], ttl: timedelta) -> None:
        """Beyond the interface: ``node``'s heartbeat (:mod:`flowsched.node.heartbeats`)."""
        self._run("heartbeat", self.steps.heartbeat(node, routes, ttl))

    def leave(self, node: str) -> None:
        self._run("leave", self.steps.leave(node))

    def pause(self, item_id: str) -> bool:
        return self._run("pause", self.steps.pause(item_id))

    def resume(self, item_id: str) -> bool:
        return self._run("resume", self.steps.resume(item_id))
