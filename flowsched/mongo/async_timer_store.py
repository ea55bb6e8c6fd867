"""Internal: :class:`AsyncMongoTimerStore` - the :class:`~flowsched.store.AsyncTimerStore`
interface on pymongo's ``AsyncCollection`` (from ``AsyncMongoClient``).

The twin of :class:`~flowsched.mongo.timer_store.MongoTimerStore`: the same documents, the
same guarantees and round trips, the same procedures
(:class:`~flowsched.mongo.timer_ops.TimerSteps`), run with ``drive_async``; the two differ
only in awaiting. The indexes are created by the first call (or by :meth:`open`): a
constructor cannot await.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Collection as Routes
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, Unpack

from flowsched.mongo.commands import Steps, drive_async
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

__all__ = ["AsyncMongoTimerStore"]

T = TypeVar("T")


class AsyncMongoTimerStore(MongoStoreAttributes):
    """Timers in ``collection`` (a pymongo ``AsyncCollection``) behind the async store
    interface; the arguments are :class:`~flowsched.mongo.MongoTimerStore`'s.

    >>> store = AsyncMongoTimerStore(AsyncMongoClient(uri).app.timers)  # doctest: +SKIP
    >>> await store.open()  # doctest: +SKIP
    """

    def __init__(
        self,
        collection: Any,
        **options: Unpack[MongoStoreArgs],
    ) -> None:
        find = getattr(collection, "find_one_and_delete", None)
        if find is None or not inspect.iscoroutinefunction(find):
            raise TypeError(
                "AsyncMongoTimerStore: collection must be a pymongo AsyncCollection (from "
                f"AsyncMongoClient, not MongoClient), got {type(collection).__name__}"
            )
        self.collection = collection
        self.steps = TimerSteps(collection, **options)
        self._opened = False
        self._opening: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"AsyncMongoTimerStore({self.collection.full_name})"

    async def open(self, for_call: str | None = None, subject: str | None = None) -> None:
        """Create the indexes (idempotent; the first call of any operation does it: an
        outage then names that call, ``for_call`` on ``subject``)."""
        if self._opened:
            return
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if not self._opened:
                await self._call("open", self.steps.setup(), subject, for_call)
                self._opened = True

    async def _run(self, what: str, steps: Steps[T], subject: str | None = None) -> T:
        if not self._opened:
            await self.open(what, subject)
        return await self._call(what, steps, subject)

    async def _call(
        self, what: str, steps: Steps[T], subject: str | None = None, named: str | None = None
    ) -> T:
        try:
            with self.steps.limit(what):
                return await drive_async(steps, self.steps.roles)
        except Exception as exc:
            raised = outage(
                exc,
                what,
                "AsyncMongoTimerStore",
                subject=subject,
                named=named,
                collection=self.collection,
                op_timeout=self.steps.op_timeout,
            )
            if raised is exc:
                raise
            raise raised from exc

    async def now(self) -> datetime:
        """The database's time (the injected clock's, when one was given)."""
        return await self._run("now", self.steps.now())

    async def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        return await self._run("put", self.steps.put(item, deadline), item.id)

    async def get(self, item_id: str) -> ScheduleItem | None:
        return await self._run("get", self.steps.get(item_id), item_id)

    async def exists(self, item_id: str) -> bool:
        return await self._run("exists", self.steps.exists(item_id), item_id)

    async def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        return await self._run("remove", self.steps.remove(item_id, generation, deadline), item_id)

    async def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        return await self._run("remove_flow", self.steps.remove_flow(flow_id, deadline), flow_id)

    async def claim_due(
        self, routes: Routes[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        return await self._run("claim_due", self.steps.claim_due(routes, owner, lease, limit))

    async def claim_started(
        self, routes: Routes[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        """Beyond the interface: claims that are started as they are claimed (the node
        core's ``start_on_claim``; see ``ClaimSteps.claim_started``)."""
        return await self._run(
            "claim_started", self.steps.claim_started(routes, owner, lease, limit)
        )

    async def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        return await self._run("confirm_start", self.steps.confirm_start(claims))

    async def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        return await self._run("renew", self.steps.renew(claims, lease))

    async def release(self, claims: Sequence[Claim]) -> int:
        return await self._run("release", self.steps.release(claims))

    async def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        return await self._run("settle", self.steps.settle(settlements))

    async def next_due(self, routes: Routes[str], after: datetime | None = None) -> datetime | None:
        return await self._run("next_due", self.steps.next_due(routes, after))

    async def next_wake(
        self, routes: Routes[str], within: timedelta | None = None
    ) -> datetime | None:
        """Beyond the interface: :meth:`next_due` on the node's clock (what its driver
        sleeps until; ``None`` if nothing is due ``within`` from now; see
        ``TimerSteps.next_wake``)."""
        return await self._run("next_due", self.steps.next_wake(routes, within))

    async def dead_letters(self) -> list[DeadLetter]:
        return await self._run("dead_letters", self.steps.dead_letters())

    async def requeue(
        self, item_id: str, due: datetime, *, replace: bool = False
    ) -> ScheduleItem | None:
        return await self._run("requeue", self.steps.requeue(item_id, due, replace))

    async def ping(self) -> None:
        """Beyond the interface: reach the server once."""
        await self._run("ping", self.steps.ping())

    async def quarantined(self) -> list[QuarantinedRecord]:
        return await self._run("quarantined", self.steps.quarantined())

    async def timers(self, query: TimerSelection) -> TimerPage:
        return await self._run("timers", self.steps.timers(query))

    async def history(self, item_id: str) -> list[Attempt]:
        return await self._run("history", self.steps.history(item_id))

    async def heartbeat(self, node: str, routes: frozenset[str], ttl: timedelta) -> None:
        """Beyond the interface: ``node``'s heartbeat (:mod:`flowsched.node.heartbeats`)."""
        await self._run("heartbeat", self.steps.heartbeat(node, routes, ttl))

    async def leave(self, node: str) -> None:
        await self._run("leave", self.steps.leave(node))

    async def pause(self, item_id: str) -> bool:
        return await self._run("pause", self.steps.pause(item_id))

    async def resume(self, item_id: str) -> bool:
        return await self._run("resume", self.steps.resume(item_id))
