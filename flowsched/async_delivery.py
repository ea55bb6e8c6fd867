"""Internal: delivering on an event loop — the pieces every asyncio adapter shares.

The rules stay in :class:`~flowsched.delivery.DeliveryCore` (routing, redelivery backoff,
dead letters, ticks of recurring items, observation); this module only runs them on a loop:

* :class:`AsyncDelivery` makes one delivery of a claimed item and returns its
  :data:`~flowsched.delivery.Outcome`: an ``async def`` handler is awaited on the loop, a
  plain one runs in a worker thread (the loop's executor, the caller's context copied, as
  :func:`asyncio.to_thread` does), so that it never blocks the loop. A handler's own
  exception (``CancelledError`` and ``SystemExit`` included) is a failed delivery, as on
  the synchronous face. **Cancellation is honest**: when the delivery's task is cancelled
  (shutdown), the ``CancelledError`` goes through - there is no outcome, the caller must
  not settle the item, and it is delivered again.
* :class:`Deliveries` holds the delivery tasks of one scheduler: at most ``limit`` at once,
  drained (waited for) or cancelled on close, so that no task outlives the scheduler.
* :class:`Alarm` is the firing loop's sleep: until a time, or until rung (an earlier item
  arrived, a slot became free).

An adapter claims items (from its heap, from its collection), spawns ``delivery.run`` for
each in :class:`Deliveries`, and applies each outcome under its own fence (id +
generation), exactly as its synchronous twin applies ``DeliveryCore.deliver``'s.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, ThreadPoolExecutor
from types import CoroutineType
from typing import Any

from flowsched.async_timed import run_timed
from flowsched.callables import is_async_callable
from flowsched.delivery import DeliveryCore, Outcome
from flowsched.history import close_attempt, open_attempt
from flowsched.port import ScheduleItem
from flowsched.shutdown import CANCEL_GRACE

__all__ = ["Alarm", "AsyncDelivery", "Deliveries", "StillRunning", "cancelled_from_outside"]


class StillRunning(asyncio.CancelledError):
    """A delivery cancelled (shutdown) while its plain handler runs on in its worker thread,
    which nothing can stop. It has no outcome, like any cancelled delivery, but its claim must
    not be given back: another node would run the same attempt beside it. A Mongo node keeps
    it until its lease runs out (no longer renewed); then the item is delivered again."""


class _ThreadCall:
    """A plain handler's call in a worker thread that the loop can abandon before it starts:
    once abandoned it never runs, and whether it had started is known for certain."""

    def __init__(self, handler: Callable[..., object], args: tuple[object, ...]) -> None:
        self._call = functools.partial(contextvars.copy_context().run, handler, *args)
        self._lock = threading.Lock()
        self._started = self._abandoned = False

    def __call__(self) -> object:
        with self._lock:
            if self._abandoned:
                return None  # the delivery was cancelled before a thread took it
            self._started = True
        return self._call()

    def abandon(self) -> bool:
        """Never start it; whether it had started already (and so may still be running)."""
        with self._lock:
            self._abandoned = True
            return self._started


log = logging.getLogger("flowsched.delivery")


def cancelled_from_outside() -> bool:
    """Whether the running task has been asked to cancel (a shutdown), as opposed to a
    handler raising ``CancelledError`` of its own accord (a failed delivery)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class AsyncDelivery:
    """One delivery at a time, through ``core``, on the running loop.

    ``executor``: where plain handlers run; ``None``: a pool of this delivery's own of
    ``threads`` threads (the node's handler slots, so that a plain handler whose start was
    recorded never waits for a thread; closed by :meth:`close`), or without ``threads`` the
    loop's default executor."""

    def __init__(
        self, core: DeliveryCore, executor: Executor | None = None, *, threads: int | None = None
    ) -> None:
        if not core.coroutines:
            raise ValueError("AsyncDelivery needs a DeliveryCore built with coroutines=True")
        self.core = core
        self._executor = executor
        self._threads = threads
        self._own: ThreadPoolExecutor | None = None
        self._closed = False
        # Route -> whether its handler is a coroutine function (routes are never re-bound).
        self._awaited: dict[str, bool] = {}

    @property
    def threads_at_once(self) -> bool:
        """Whether a plain handler always finds a thread at once (the own pool, a thread
        per slot): only then may a claim's start be recorded before its handler is called.
        A caller's ``executor`` may be smaller than the slots."""
        return self._executor is None and self._threads is not None

    async def run(self, item: ScheduleItem, attempt: int) -> Outcome:
        """Deliver ``item`` (a recurring one as the slot it ticks for) and return what
        happens next. Raises ``CancelledError`` only when this task is cancelled (no
        outcome: do not settle), and ``KeyboardInterrupt``."""
        core = self.core
        if item.recurrence is not None:
            try:
                ticked = core.tick(item)
            except Exception as exc:  # a recurrence that cannot compute its slot
                return core.failure(item, attempt, f"{type(exc).__name__}: {exc}")
            if not isinstance(ticked, ScheduleItem):
                return ticked  # nothing due yet (NextSlot), or no slot left (Exhausted)
            item = ticked
        handler = core.started(item, attempt)
        route = item.route
        awaited = self._awaited.get(route)
        if awaited is None:
            awaited = self._awaited[route] = is_async_callable(handler)
        limits = core.limits(route)
        if limits is not None and limits.timeout is not None:
            return await run_timed(core, handler, item, attempt, limits.timeout, awaited)
        opened = open_attempt(core.journal, item, attempt)
        thread: _ThreadCall | None = None
        task = asyncio.current_task()
        assert task is not None  # a delivery runs in a task
        core.in_flight.tasks[task] = item.id
        try:
            if awaited:
                result = handler(item, attempt)
            else:
                thread = _ThreadCall(handler, (item, attempt))
                result = await asyncio.get_running_loop().run_in_executor(self._pool(), thread)
                thread = None  # returned: nothing runs on
            if result is not None and (
                type(result) is CoroutineType or inspect.isawaitable(result)
            ):
                await result  # an async def's coroutine, or a plain function's awaitable
        except KeyboardInterrupt:
            raise
        except asyncio.CancelledError as exc:
            if cancelled_from_outside():
                if thread is not None and thread.abandon():
                    raise StillRunning(f"{item.id!r}: its handler runs on in a thread") from exc
                raise
            return close_attempt(core.journal, opened, core.outcome(item, attempt, exc))
        except BaseException as exc:
            return close_attempt(core.journal, opened, core.outcome(item, attempt, exc))
        finally:
            core.in_flight.tasks.pop(task, None)
        outcome = core.outcome(item, attempt, None)
        return outcome if opened is None else close_attempt(core.journal, opened, outcome)

    def _pool(self) -> Executor | None:
        if self._executor is not None or self._threads is None or self._closed:
            return self._executor  # after close (a late start): the loop's default
        if self._own is None:  # threads start as handlers need them (at most ``threads``)
            self._own = ThreadPoolExecutor(self._threads, thread_name_prefix="flowsched-handler")
        return self._own

    def close(self) -> None:
        """Shut the own pool down (a thread still running goes on: ``StillRunning``)."""
        self._closed = True
        if self._own is not None:
            self._own.shutdown(wait=False)
            self._own = None


class Deliveries:
    """The delivery tasks of one scheduler (at most ``limit`` at once).

    ``on_free()`` is called when a task ends while all ``limit`` slots were taken (wake the
    firing loop: it can claim again)."""

    def __init__(self, limit: int, on_free: Callable[[], None] = lambda: None) -> None:
        if limit < 1:
            raise ValueError(f"concurrency must be at least 1 (got {limit})")
        self.limit = limit
        self._on_free = on_free
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def running_here(self) -> bool:
        """Whether the calling task is one of these deliveries (a handler calling in)."""
        return asyncio.current_task() in self._tasks

    @property
    def free(self) -> int:
        """How many more deliveries may start now."""
        return self.limit - len(self._tasks)

    def spawn(self, delivery: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``delivery`` as a task of its own, held until it ends."""
        task = asyncio.get_running_loop().create_task(delivery)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        full = len(self._tasks) >= self.limit
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a delivery task failed", exc_info=task.exception())
        if full:
            self._on_free()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for every delivery in flight (but the caller's own); after ``timeout``
        seconds, cancel those still running (they are not settled) and wait for them.

        Cancelled meanwhile, it cancels them too, waits for them, and re-raises."""
        me = asyncio.current_task()
        pending = {task for task in self._tasks if task is not me}
        try:
            while pending:
                _, pending = await asyncio.wait(pending, timeout=timeout)
                if pending and timeout is not None:
                    break
                pending = {task for task in self._tasks if task is not me and not task.done()}
        except asyncio.CancelledError:
            await self.cancel()
            raise
        if pending:
            log.warning("%d handler(s) still running after %s s: cancelled", len(pending), timeout)
            await self.cancel()

    async def cancel(self) -> None:
        """Cancel every delivery in flight (but the caller's own) and wait, at most
        ``CANCEL_GRACE`` seconds, for them to end."""
        me = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not me]
        for task in tasks:
            task.cancel()
        if tasks:
            # Bounded: a handler that ignores its cancellation is left running (the close
            # that cancelled it logs its item; its outcome is never written).
            await asyncio.wait(tasks, timeout=CANCEL_GRACE)


class Alarm:
    """A sleep that can be cut short: ``await alarm.sleep(seconds)`` returns after that
    long or as soon as :meth:`ring` is called, whichever comes first."""

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def ring(self) -> None:
        """Wake the sleeper, if any (a no-op otherwise)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        handle = loop.call_later(max(seconds, 0.0), _wake, waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._waiter = None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
