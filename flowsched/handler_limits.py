"""Internal: per-handler limits - a redelivery policy and a time limit for one handler name.

``register(name, handler, *, redelivery=None, timeout=None)`` (CONTRACT section 18) gives a
named handler its own :class:`~flowsched.RedeliveryPolicy` (its items are redelivered and
dead-lettered by it instead of the scheduler's) and a time limit. A run past its limit is a
failed delivery whose attempt records ``outcome="timed_out"``, redelivered by the policy:

* an ``async def`` handler is cancelled (``asyncio.wait_for``);
* a plain handler runs on a thread of its own (:class:`TimedThread`, one per run of a
  handler that has a limit), which is abandoned at the limit: the worker that waited for it
  is free at once, the run's late result or error is dropped when it ends - it never
  completes, fails or changes the item - and the lease is no longer renewed for it (its
  outcome, the time-out, has been settled).

Python cannot stop a thread: an abandoned run goes on until its handler returns. Give a
handler that may hang a time-out of its own (a socket or HTTP time-out) too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict

from flowsched.config.scheduler_settings import LONGEST_SETTING
from flowsched.durations import parse_duration
from flowsched.records import DeadLetter, ScheduleItem
from flowsched.redelivery import RedeliveryPolicy

__all__ = [
    "HandlerLimits",
    "HandlerOptions",
    "HandlerTimedOut",
    "TimedThread",
    "call_timed",
    "check_limits",
    "wait_async",
]


class HandlerTimedOut(Exception):
    """A handler ran past its time limit (``timeout`` of ``register``): a failed delivery
    whose attempt is recorded as ``"timed_out"``. ``elapsed`` is how long it had run."""

    def __init__(self, name: str, timeout: timedelta, elapsed: timedelta) -> None:
        super().__init__(
            f"handler {name!r} ran past its time limit of {timeout.total_seconds():g}s "
            f"(after {elapsed.total_seconds():.3f}s)"
        )
        self.name = name
        self.timeout = timeout
        self.elapsed = elapsed


class HandlerOptions(TypedDict, total=False):
    """``register``'s keywords (see :meth:`flowsched.SchedulerPort.register`)."""

    on_failed: Callable[[DeadLetter], object] | None
    redelivery: RedeliveryPolicy | None
    timeout: timedelta | str | None


@dataclass(frozen=True, slots=True)
class HandlerLimits:
    """One handler's own limits (``None``: the scheduler's policy / no time limit)."""

    redelivery: RedeliveryPolicy | None = None
    timeout: timedelta | None = None


def check_limits(name: str, redelivery: object, timeout: object) -> HandlerLimits | None:
    """The limits ``register(name, ..., redelivery=, timeout=)`` asked for (``None``: none).

    ``TypeError`` for a ``redelivery`` that is not a :class:`RedeliveryPolicy`;
    ``ValueError`` naming ``timeout`` for a duration that is not above zero (a
    :class:`~datetime.timedelta` or a HOCON duration string such as ``"2s"``)."""
    if redelivery is not None and not isinstance(redelivery, RedeliveryPolicy):
        raise TypeError(
            f"register({name!r}) redelivery: expected a RedeliveryPolicy, got {redelivery!r}"
        )
    limit: timedelta | None = None
    if timeout is not None:
        try:
            limit = parse_duration(timeout)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"register({name!r}) timeout: {exc}") from None
        if limit <= timedelta(0) or limit > LONGEST_SETTING:
            raise ValueError(
                f"register({name!r}) timeout must be a duration above zero and at most "
                f"{LONGEST_SETTING.days}d (got {timeout!r})"
            )
    if redelivery is None and limit is None:
        return None
    return HandlerLimits(redelivery, limit)


class TimedThread:
    """One run of a plain handler on a daemon thread of its own, which the caller may stop
    waiting for (:meth:`wait`, :meth:`wait_async`): then the run is abandoned, and its
    result or error, when it comes, is dropped."""

    def __init__(self, call: Callable[[], object], name: str) -> None:
        self._call = contextvars.copy_context().run
        self._target = call
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._result: object = None
        self._error: BaseException | None = None
        self._abandoned = False
        self._waiters: list[Callable[[], None]] = []
        self.started = time.monotonic()
        thread_name = f"flowsched-timed-{name}"
        threading.Thread(target=self._run, name=thread_name, daemon=True).start()

    def _run(self) -> None:
        try:
            self._result = self._call(self._target)
        except BaseException as exc:  # delivered to the waiter, or dropped if abandoned
            self._error = exc
        with self._lock:
            self._done.set()
            waiters, self._waiters = self._waiters, []
            abandoned = self._abandoned
        if abandoned:  # the late outcome: dropped, and nobody waits for it any more
            self._result = self._error = None
            return
        for wake in waiters:
            with contextlib.suppress(RuntimeError):  # the waiter's loop has closed meanwhile
                wake()

    def outcome(self) -> object:
        """The run's result, or raise its error (once it is done)."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._result

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True

    def wait(self, timeout: timedelta) -> bool:
        """Wait up to ``timeout``; ``False`` (the run abandoned) if it has not ended."""
        if self._done.wait(timeout.total_seconds()):
            return True
        self.abandon()
        return False

    async def wait_async(self, timeout: timedelta) -> bool:
        """:meth:`wait` on the running loop (the loop never blocks)."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            loop.call_soon_threadsafe(_resolve, ended)

        with self._lock:
            if self._done.is_set():
                return True
            self._waiters.append(wake)
        ran, _ = await wait_async(asyncio.shield(ended), timeout)
        if not ran:
            self.abandon()
            return False
        return True

    def elapsed(self) -> timedelta:
        return timedelta(seconds=time.monotonic() - self.started)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def wait_async(awaitable: Awaitable[Any], timeout: timedelta) -> tuple[bool, Any]:
    """Await ``awaitable`` for at most ``timeout``: ``(True, result)``, or ``(False, None)``
    once it was cancelled at the limit."""
    scope = asyncio.timeout(timeout.total_seconds())
    try:
        async with scope:
            return True, await awaitable
    except TimeoutError:
        if scope.expired():
            return False, None
        raise  # the handler's own TimeoutError: a plain failure


def call_timed(
    handler: Callable[[ScheduleItem, int], object],
    item: ScheduleItem,
    attempt: int,
    timeout: timedelta,
) -> object:
    """Run a plain handler with a time limit on a thread of its own (:class:`TimedThread`):
    its result, or its error raised here; :class:`HandlerTimedOut` at the limit (the run is
    abandoned, its late outcome dropped)."""
    run = TimedThread(lambda: handler(item, attempt), item.route)
    if run.wait(timeout):
        return run.outcome()
    raise HandlerTimedOut(item.route.partition(":")[2], timeout, run.elapsed())
