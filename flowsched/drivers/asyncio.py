"""Internal: the asyncio driver — one task makes the store calls (awaited), each handler runs
in a task of its own; :meth:`AsyncioDriver.run_inline` drives the same core in the caller's
task (``run_due``, :meth:`~flowsched.ManualClock.advance_async`).

It waits on one :class:`~flowsched.async_delivery.Alarm`: until the core's next time, a
wake-up, a handler ending or a store call answering (each store call is a task, one per lane
of the core at most: a claim may be on its way while a confirm or a settle is; inline, they
are awaited one at a time). Everything runs on the loop's thread, so the core needs no
lock; it differs from :mod:`flowsched.drivers.threads` only in how it waits.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from flowsched.async_delivery import Alarm
from flowsched.drivers.base import DriverBase
from flowsched.node.actions import Action, Sleep, StartHandler
from flowsched.node.core import store_call
from flowsched.outcomes import Outcome
from flowsched.shutdown import CANCEL_GRACE
from flowsched.store.interface import AsyncTimerStore
from flowsched.store.records import Claim, Settlement

__all__ = ["AsyncioDriver"]

log = logging.getLogger("flowsched.node")

RunHandler = Callable[[Claim], Awaitable[Outcome]]


class AsyncioDriver(DriverBase[AsyncTimerStore, RunHandler]):
    """Runs ``core`` over ``store`` on the running loop; ``run_handler(claim)`` delivers."""

    def _prepare(self) -> None:
        """The alarm it waits on, its tasks, its context flags."""
        self.alarm = Alarm()
        self._task: asyncio.Task[None] | None = None
        self._home: asyncio.AbstractEventLoop | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._calls: set[asyncio.Task[None]] = set()  # store calls in flight (one per lane)
        self._waiters: list[asyncio.Future[None]] = []
        self._inline: contextvars.ContextVar[bool] = contextvars.ContextVar(
            f"flowsched-inline-{id(self)}", default=False
        )
        self._handling: contextvars.ContextVar[bool] = contextvars.ContextVar(
            f"flowsched-handling-{id(self)}", default=False
        )
        # The context each handler task the loop starts gets a copy of: the loop task's, with
        # _handling set (made at its first; a copy per task: what a handler sets stays its own).
        self._handler_context: contextvars.Context | None = None
        self._ended_context: contextvars.Context | None = None  # the done callbacks' own
        self._on_ended = self._ended  # one bound method, not one per task

    def wake(self) -> None:
        """Look again now; callable from any thread (a listener's, say)."""
        if self._off_loop():
            assert self._home is not None
            self._home.call_soon_threadsafe(self.wake)
            return
        self.core.wake()
        self.alarm.ring()

    def wake_at(self, when: datetime) -> None:
        """Look again by ``when``; callable from any thread."""
        if self._off_loop():
            assert self._home is not None
            self._home.call_soon_threadsafe(self.wake_at, when)
            return
        self.core.wake_at(self.claimable(when))  # once it can be claimed
        self.alarm.ring()

    def _off_loop(self) -> bool:
        loop = self._home
        if loop is None or loop.is_closed():
            return False
        try:
            return asyncio.get_running_loop() is not loop
        except RuntimeError:
            return True

    def in_handler(self) -> bool:
        """Whether the caller is one of this driver's handlers."""
        return self._handling.get()

    def start(self, name: str) -> None:
        self._home = asyncio.get_running_loop()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=name)

    async def _loop(self) -> None:
        while True:
            action = self.core.next_action(self.now())
            if isinstance(action, Sleep):
                if self.core.closing and action.idle:
                    return
                await self.alarm.sleep(self._timeout(action))
                continue
            if isinstance(action, StartHandler):
                self._spawn(action)
                continue
            # A task of its own: the other lanes go on (the core keeps one call per lane).
            call = asyncio.get_running_loop().create_task(self._perform(action))
            self._calls.add(call)
            call.add_done_callback(self._answered)

    def _spawn(self, action: StartHandler, *, here: bool = False) -> asyncio.Task[None]:
        """A handler task in a copy of the caller's context with ``_handling`` set: the loop
        task's is made once and copied for each (``here``: the caller's own, made now)."""
        base = None if here else self._handler_context
        if base is None:
            base = contextvars.copy_context()
            base.run(self._handling.set, True)
            if not here:
                self._handler_context = base
                self._ended_context = base.copy()
        # One copy of a ready context, where setting the flag in each task would add a
        # token and a new context mapping per timer (objects for the collector to trace).
        task = asyncio.get_running_loop().create_task(self._run(action), context=base.copy())
        self._handlers.add(task)
        # Else a context copied per task; not ``base``: what the callback's code (a logging
        # handler, say) sets must not reach the handlers that start later.
        task.add_done_callback(self._on_ended, context=self._ended_context or base.copy())
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._handlers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("handler task failed", exc_info=task.exception())
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _answered(self, call: asyncio.Task[None]) -> None:
        self._calls.discard(call)
        self.alarm.ring()

    async def _run(self, action: StartHandler) -> None:
        try:
            outcome = await self.run_handler(action.claim)
        except BaseException:
            self.core.abandoned(action.ticket)  # cancelled by shutdown: the claim lapses
            self.alarm.ring()
            raise
        settled = None
        if self.settle_here:
            try:
                [settled] = await self.store.settle([Settlement.of(action.claim, outcome)])
            except Exception:  # owed to the store as usual: the loop retries it
                settled = None
        self.core.finished(action.ticket, outcome, settled=settled)
        self.alarm.ring()

    async def _perform(self, action: Action) -> None:
        sent = self.now()
        try:
            result = await store_call(action, self.store, self.core.settings, self.routes())
        except Exception as exc:
            self.core.outage.sent(sent)  # an outage is as long as from then
            self.core.failed(action, exc, self.now())
            return
        self.core.succeeded(action, result, self.now())

    async def run_inline(self) -> int:
        """Drive the core in this task until it sleeps; how many handlers ran. From a
        handler it runs, 0 (the running loop goes on)."""
        if self._inline.get():
            return 0
        token = self._inline.set(True)
        ran = 0
        try:
            self.core.wake()
            while True:
                action = self.core.next_action(self.now())
                if isinstance(action, Sleep):
                    return ran
                if isinstance(action, StartHandler):
                    # A task of its own, so that a bounded close can cancel it.
                    await asyncio.wait({self._spawn(action, here=True)})
                    ran += 1
                    continue
                await self._perform(action)
        finally:
            self._inline.reset(token)

    async def close(self, timeout: timedelta | None = None) -> None:
        """Stop claiming, release queued claims, wait for handlers (at most ``timeout``,
        default ``shutdown_timeout``; then they are cancelled, logged, and their claims
        lapse: delivered again)."""
        self.core.close()
        self.alarm.ring()
        if self._handling.get():
            return  # a handler closing its own scheduler: the loop ends once it returns
        limit = (timeout or self.shutdown_timeout).total_seconds()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while self._handlers and loop.time() < deadline:
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait({waiter}, timeout=deadline - loop.time())
            finally:
                self._waiters.remove(waiter)
        if self._handlers:
            left = [claim.item.key for claim in self.core.running.values()]
            log.warning(
                "node %s closed after %ss with handlers still running: %s (cancelled; their "
                "claims lapse and they are delivered again)",
                self.core.settings.owner,
                limit,
                ", ".join(left) or "none",
            )
            for handler in list(self._handlers):
                handler.cancel()
            # At most CANCEL_GRACE for them to end: one that ignores its cancellation is
            # left running.
            await asyncio.wait(set(self._handlers), timeout=CANCEL_GRACE)
        task = self._task
        if task is None:
            await self.run_inline()  # release queued claims, settle what ran
            return
        self.alarm.ring()
        await asyncio.wait({task}, timeout=max(limit, 1.0))
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
