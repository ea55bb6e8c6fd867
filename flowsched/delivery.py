"""Internal: the delivery core shared by every adapter — run a handler, decide what happens next.

Adapters own storage and fencing (which form of an item is current); this module owns the
rules: who handles an item (routing), redelivery backoff (3 s doubling to 30 s by default),
the optional maximum of attempts and the dead letter, logging and observation. An adapter calls
:meth:`DeliveryCore.deliver` for one claimed item and applies the :data:`Outcome` it returns
under its own fence (id + generation).

Routing, written once here: an item's :attr:`~flowsched.ScheduleItem.route` is its
handler name (``"h:<name>"``, from :meth:`DeliveryCore.register`) or, without one, its kind
(``"k:<KIND>"``, from :meth:`DeliveryCore.subscribe`). :meth:`DeliveryCore.routes` is what this
scheduler can run; an adapter only takes (claims, pops) items whose route is in it, so an item
nobody here can run stays scheduled for a scheduler that can - it is never delivered to the
wrong handler, and never completed unrun.

Recurring items are ticked here too, the same way for every adapter: :meth:`DeliveryCore.tick`
picks the slot a claimed item runs for (the latest one due; missed slots are not replayed),
and :meth:`DeliveryCore.deliver` turns a tick into :class:`NextSlot` (the item stays, due at
its next slot) unless it failed with ``retry_failed`` set. The adapter fences the slot: it
must make sure no other delivery of the same item can apply it.

On every path (a tick with nothing due, one that ran, a failed one that counts) a recurrence
that ended (``until``, ``max_runs``) is :class:`Completed`: removed, a normal end. One with
no slot left before the year 10000 is :class:`Exhausted`: set aside, never redelivered, for
redelivery could only run an applied slot again, or fail the same way for ever.

Both faces share these rules: a synchronous adapter calls :meth:`DeliveryCore.deliver`; an
asyncio adapter (:mod:`flowsched.async_delivery`) looks the handler up with
:meth:`DeliveryCore.started`, awaits it (or runs it in a worker thread) and turns what
happened into an outcome with :meth:`DeliveryCore.outcome`. A synchronous core refuses
coroutine functions (``TypeError`` naming the async class to use), and a handler that
returns an awaitable anyway is a failed delivery: nothing completes unrun.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from datetime import timedelta

from flowsched.callables import (
    check_callable,
    check_not_generator,
    is_async_callable,
    refuse_awaitable,
    short_callable,
)
from flowsched.clock import Clock
from flowsched.errors import Undeliverable
from flowsched.handler_limits import HandlerLimits, HandlerTimedOut, call_timed, check_limits
from flowsched.history import Journal, close_attempt, open_attempt, with_failure
from flowsched.limits import check_handler_name
from flowsched.observer import Observer
from flowsched.outcomes import (
    _COMPLETED,
    MAX_ERROR_CHARS,
    Completed,
    DeadLettered,
    Exhausted,
    NextSlot,
    Outcome,
    Redeliver,
    storable_error,
)
from flowsched.port import FailedHandler, Handler
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind, log_fields
from flowsched.redelivery import RedeliveryPolicy, redelivery_policy
from flowsched.routes import kind_route, name_route
from flowsched.shutdown import InFlight

__all__ = [
    "Completed",
    "DeadLettered",
    "Exhausted",
    "MAX_ERROR_CHARS",
    "DeliveryCore",
    "NextSlot",
    "Observer",
    "Outcome",
    "Redeliver",
    "RedeliveryPolicy",
    "redelivery_policy",
    "storable_error",
]

log = logging.getLogger("flowsched.delivery")


class DeliveryCore:
    """Subscriptions plus the rule that turns one handler call into an :data:`Outcome`.

    Thread-safe: ``deliver`` may run on many worker threads at once. The observer is fixed at
    construction (which of its methods are overridden is looked up once).

    ``coroutines``: whether handlers may be coroutine functions (an asyncio adapter awaits
    them). A synchronous core (the default) refuses them at ``subscribe``/``register`` with
    a ``TypeError`` that points at ``async_class``, the asyncio adapter to use instead.
    """

    def __init__(
        self,
        clock: Clock,
        redelivery: RedeliveryPolicy | None = None,
        observer: Observer | None = None,
        *,
        coroutines: bool = False,
        async_class: str = "AsyncInMemoryScheduler or AsyncMongoScheduler",
    ) -> None:
        self.clock = clock
        self.coroutines = coroutines
        self._async_class = async_class
        self.redelivery = redelivery or RedeliveryPolicy()
        self.observer = observer or Observer()
        # Per delivery, skip the clock read and the calls an observer does not override
        # (the no-op default observes nothing): a measurable share of a fast delivery.
        kind = type(self.observer)
        self._observe_fired = kind.fired is not Observer.fired
        self._observe_completed = kind.completed is not Observer.completed
        self.observes_scheduled = kind.scheduled is not Observer.scheduled
        self.observes_cancelled = kind.cancelled is not Observer.cancelled
        # Route -> handler, and the routes as a set: replaced (never changed) under the
        # lock, so readers on other threads need no lock.
        self._handlers: dict[str, Handler] = {}
        self._on_failed: dict[str, FailedHandler] = {}
        self._limits: dict[str, HandlerLimits] = {}
        self._routes: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self.in_flight = InFlight()  # the deliveries running now: what a bounded close left
        self.journal: Journal | None = None  # the adapter's delivery history (set before start)

    def subscribe(self, kind: ScheduleKind, handler: Handler) -> str:
        """Handle items of ``kind`` without a handler name; return their route.

        ``ValueError`` if the kind already has a handler (nothing is replaced)."""
        try:
            kind = ScheduleKind(kind)
        except ValueError:
            valid = ", ".join(k.value for k in ScheduleKind)
            raise ValueError(f"subscribe: unknown kind {kind!r} (valid: {valid})") from None
        self._check_handler(handler, f"subscribe({kind.value})")
        route = kind_route(kind)
        with self._lock:
            if route in self._handlers:
                raise ValueError(
                    f"kind {kind.value} already has a handler on this scheduler; one handler "
                    "per kind (address items to named handlers with register(name, handler) "
                    "and ScheduleItem(..., handler=name))"
                )
            self._add(route, handler, None)
        return route

    def register(
        self,
        name: str,
        handler: Handler,
        on_failed: FailedHandler | None = None,
        *,
        redelivery: RedeliveryPolicy | None = None,
        timeout: timedelta | str | None = None,
    ) -> str:
        """Handle items addressed to ``name``; return their route.

        ``redelivery``: this handler's own policy; ``timeout``: its time limit (see
        :mod:`flowsched.handler_limits`). ``ValueError`` if the name is invalid or already
        registered, or ``timeout`` is not a duration above zero."""
        check_handler_name(name)
        self._check_handler(handler, f"register({name!r})")
        limits = check_limits(name, redelivery, timeout)
        if on_failed is not None:
            check_callable(on_failed, f"register({name!r}) on_failed")
            check_not_generator(on_failed, f"register({name!r}) on_failed")
            if is_async_callable(on_failed):
                raise TypeError(
                    f"register({name!r}) on_failed: {short_callable(on_failed)} is a coroutine "
                    "function (async def); on_failed is called synchronously on every "
                    "scheduler, so its coroutine would never run: pass a plain function"
                )
        route = name_route(name)
        with self._lock:
            if route in self._handlers:
                raise ValueError(f"handler {name!r} is already registered on this scheduler")
            if limits is not None:
                self._limits = {**self._limits, route: limits}
            self._add(route, handler, on_failed)
        return route

    def limits(self, route: str) -> HandlerLimits | None:
        """The handler's own limits for ``route`` (``None``: the scheduler's)."""
        return self._limits.get(route)

    def _check_handler(self, handler: object, what: str) -> None:
        check_callable(handler, what)
        check_not_generator(handler, what)
        if not self.coroutines and is_async_callable(handler):
            raise TypeError(
                f"{what}: {short_callable(handler)} is a coroutine function (async def); this "
                "scheduler calls handlers synchronously, so its coroutine would never run. "
                f"Use {self._async_class} (await scheduler.schedule(...)), or pass a plain "
                "function"
            )

    def _add(self, route: str, handler: Handler, on_failed: FailedHandler | None) -> None:
        self._handlers = {**self._handlers, route: handler}
        if on_failed is not None:
            self._on_failed = {**self._on_failed, route: on_failed}
        self._routes = frozenset(self._handlers)

    def routes(self) -> frozenset[str]:
        """Routes that have a handler here: an adapter takes only items of these routes."""
        return self._routes

    def handler(self, route: str) -> Handler | None:
        """The handler of ``route`` (``None``: nobody handles it here)."""
        return self._handlers.get(route)

    def tick(self, item: ScheduleItem) -> ScheduleItem | NextSlot | Exhausted | Completed:
        """For a recurring item claimed now: the form to deliver - ``due`` the latest slot
        due by now, ``previous`` the slot applied before it - or, if no slot after the
        applied one is due yet, the :class:`NextSlot` that moves it on without a delivery
        (:class:`Completed` if it has ended, :class:`Exhausted` if no slot is left at all)."""
        recurrence = item.recurrence
        if recurrence is None:
            raise ValueError(f"tick({item.id!r}): not a recurring item")
        try:
            ended = recurrence.ended(item.runs)
            slot = None if ended else recurrence.slot_to_run(self.clock.now(), item.previous)
            if slot is None:
                following = recurrence.after(item.previous, item.runs)
                if following is None:
                    return self._ended(item)
                return NextSlot(item.previous, following, runs=item.runs)
        except ValueError as exc:  # no slot left before the year 10000
            return self._exhausted(item, 0, str(exc))
        return item.moved(slot, item.previous)

    def run(self, item: ScheduleItem, attempt: int) -> Outcome:
        """:meth:`tick` (a recurring item) then :meth:`deliver`: how an adapter that needs no
        slot fence of its own (the in-memory one: the claimed form left its heap) runs a
        claim. Never raises an ``Exception``: a recurrence that cannot compute its slot is a
        failed delivery, redelivered rather than lost."""
        try:
            if item.recurrence is not None:
                ticked = self.tick(item)
                if not isinstance(ticked, ScheduleItem):
                    return ticked  # nothing due (NextSlot), ended (Completed), or Exhausted
                item = ticked
            return self.deliver(item, attempt)
        except Exception as exc:
            # deliver() turns every handler error into an outcome and ignores observer
            # errors: this is a recurrence that cannot compute its slot.
            return self.failure(item, attempt, f"{type(exc).__name__}: {exc}")

    def deliver(self, item: ScheduleItem, attempt: int) -> Outcome:
        """Call the handler for ``item`` and return what happens next; never raises, except
        ``KeyboardInterrupt`` (which only reaches a handler run inline on the main thread).

        Any other exception, ``BaseException``s such as ``asyncio.CancelledError`` and
        ``SystemExit`` included, is a failed delivery: redelivered with backoff (or
        dead-lettered), so a handler can neither lose its item nor stop a worker. Observer
        errors are logged and change nothing. For a recurring item, ``item`` is the form
        :meth:`tick` gave (``due`` = the slot)."""
        # started() + the call + outcome(), inlined: the synchronous adapters' hot path.
        handler = self._handlers.get(item.route)
        if handler is None:
            # Adapters take only items of routes() (which only grows): a bug if reached.
            raise LookupError(f"no handler for route {item.route!r} of {item.id!r}")
        if self._observe_fired:
            self._notify(self.observer.fired, item, attempt, self.clock.now() - item.due)
        running = self.in_flight.items
        running.append(item)
        opened = open_attempt(self.journal, item, attempt)
        try:
            if self._limits and (limits := self._limits.get(item.route)) and limits.timeout:
                result = call_timed(handler, item, attempt, limits.timeout)
            else:
                result = handler(item, attempt)
            if result is not None and inspect.isawaitable(result):
                refuse_awaitable(result, handler, self._async_class)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            return close_attempt(self.journal, opened, self.outcome(item, attempt, exc))
        finally:
            running.remove(item)
        if item.recurrence is not None:
            return close_attempt(self.journal, opened, self.outcome(item, attempt, None))
        if self._observe_completed:
            self._notify(self.observer.completed, item, attempt)
        return close_attempt(self.journal, opened, _COMPLETED) if opened else _COMPLETED

    def started(self, item: ScheduleItem, attempt: int) -> Handler:
        """A delivery of ``item`` is starting: its handler, after telling the observer.

        For an adapter that calls the handler itself (an asyncio adapter awaits it) and then
        asks :meth:`outcome` what happens next; :meth:`deliver` is the two together."""
        handler = self._handlers.get(item.route)
        if handler is None:
            # Adapters take only items of routes() (which only grows): a bug if reached.
            raise LookupError(f"no handler for route {item.route!r} of {item.id!r}")
        if self._observe_fired:
            self._notify(self.observer.fired, item, attempt, self.clock.now() - item.due)
        return handler

    def outcome(self, item: ScheduleItem, attempt: int, error: BaseException | None) -> Outcome:
        """What happens after the handler of a :meth:`started` delivery returned (``error``
        ``None``) or raised ``error``; never raises (observer errors are logged)."""
        if error is not None:
            return with_failure(self._failed(item, attempt, error), error)
        if self._observe_completed:
            self._notify(self.observer.completed, item, attempt)
        if item.recurrence is not None:
            return self._ran(item, attempt)
        return _COMPLETED

    def _failed(self, item: ScheduleItem, attempt: int, error: BaseException) -> Outcome:
        text = f"{type(error).__name__}: {error}"
        if isinstance(error, HandlerTimedOut):
            self._notify(self.observer.timed_out, item, attempt, error.elapsed)
        if isinstance(error, Undeliverable):
            # The handler says no delivery can ever succeed: a dead letter now, not a loop.
            self._notify(self.observer.failed, item, attempt, storable_error(text))
            return self._dead_letter(item, attempt + 1, storable_error(text))
        if item.recurrence is not None and not item.recurrence.retry_failed:
            return self._counted(item, attempt, text)
        return self.failure(item, attempt, text)

    def scheduled(self, item: ScheduleItem) -> None:
        """Tell the observer ``item`` was scheduled; an observer error is logged, never
        raised (the write has happened: the caller must not see it as failed)."""
        if self.observes_scheduled:
            self._notify(self.observer.scheduled, item)

    def cancelled(self, item_id: str) -> None:
        """Tell the observer ``item_id`` was cancelled; an observer error is logged only."""
        if self.observes_cancelled:
            self._notify(self.observer.cancelled, item_id)

    @staticmethod
    def _notify(call: Callable[..., object], *args: object) -> None:
        """Call an observer hook or an ``on_failed``; a failing one is logged, never a failed
        delivery."""
        try:
            call(*args)
        except Exception:
            log.exception("observer %s failed (ignored)", getattr(call, "__qualname__", call))

    def _ran(
        self, item: ScheduleItem, attempt: int, error: str | None = None
    ) -> NextSlot | Exhausted | Completed:
        """The tick for slot ``item.due`` ran (or failed with ``error``, counted): on to the
        next slot, or the end."""
        assert item.recurrence is not None
        try:
            following = item.recurrence.after(item.due, item.runs + 1)
        except ValueError as exc:  # that was the last slot before the year 10000
            failed = "" if error is None else f" (its last tick failed: {error})"
            return self._exhausted(item, attempt, f"{exc}{failed}")
        if following is None:
            return self._ended(item)
        return NextSlot(item.due, following, error, item.runs + 1)

    def _ended(self, item: ScheduleItem) -> Completed:
        """A recurrence that ended (``until``, ``max_runs``): the item is removed."""
        log.info("recurring %s ended (until or max_runs): removed", item.id, extra=log_fields(item))
        return _COMPLETED

    def _counted(
        self, item: ScheduleItem, attempt: int, error: str
    ) -> NextSlot | Exhausted | Completed:
        """A failed tick that counts as its slot's outcome: the next tick is the next slot."""
        error = storable_error(error)
        self._notify(self.observer.failed, item, attempt, error)
        moved = self._ran(item, attempt, error)
        if isinstance(moved, NextSlot):
            log.warning(
                "tick of %s %s for slot %s failed (counted; next slot %s): %s",
                item.kind.value,
                item.id,
                item.due.isoformat(),
                moved.due.isoformat(),
                error,
                extra=log_fields(item),
            )
        return moved

    def _exhausted(self, item: ScheduleItem, attempt: int, reason: str) -> Exhausted:
        """The rule for a recurring item with no slot left (see the module docstring)."""
        reason = storable_error(reason)
        log.error(
            "recurring %s %s has no slot left, set aside: %s",
            item.kind.value,
            item.id,
            reason,
            extra=log_fields(item),
        )
        return Exhausted(DeadLetter(item, attempt, reason, self.clock.now()))

    def failure(self, item: ScheduleItem, attempt: int, error: str) -> Redeliver | DeadLettered:
        """The outcome of a failed delivery (a raising handler, or one the adapter lost)."""
        error = storable_error(error)
        failures = attempt + 1
        self._notify(self.observer.failed, item, attempt, error)
        own = self._limits.get(item.route) if self._limits else None  # the handler's policy
        policy = own.redelivery if own is not None and own.redelivery else self.redelivery
        limit = policy.max_attempts
        if limit is not None and failures >= limit:
            return self._dead_letter(item, failures, error)
        try:
            due = self.clock.now() + policy.delay(failures)
        except OverflowError:  # past the year 9999: there is no next attempt
            return self._dead_letter(item, failures, f"{error} (next attempt past year 9999)")
        log.warning(
            "delivery of %s %s failed (attempt %d), redelivering at %s: %s",
            item.kind.value,
            item.id,
            attempt,
            due.isoformat(),
            error,
            extra=log_fields(item),
        )
        return Redeliver(due, failures, error)

    def _dead_letter(self, item: ScheduleItem, failures: int, error: str) -> DeadLettered:
        """Set ``item`` aside after ``failures`` failed deliveries (``error`` storable)."""
        dead = DeadLetter(item, failures, error, self.clock.now())
        log.error(
            "dead-lettered %s %s after %d failed attempts: %s",
            item.kind.value,
            item.id,
            failures,
            error,
            extra=log_fields(item),
        )
        self._notify(self.observer.dead_lettered, dead)
        on_failed = self._on_failed.get(item.route)
        if on_failed is not None:
            self._notify(on_failed, dead)
        return DeadLettered(dead)
