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

A recurring item with no slot left - none after the one it ran or is due for, before the year
10000 - is :class:`Exhausted`, on every path (a tick with nothing due, a tick that ran, a failed
tick that counts): it is set aside with the reason, never redelivered, for redelivery could
only run an applied slot again, or fail the same way for ever.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from flowsched.clock import Clock
from flowsched.config.scheduler_settings import LONGEST_SETTING, SchedulerSettings
from flowsched.limits import check_handler_name
from flowsched.port import FailedHandler, Handler
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.routes import kind_route, name_route

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


@dataclass(frozen=True, slots=True)
class RedeliveryPolicy:
    """Backoff for failed deliveries: ``initial``, times ``factor`` per failure, capped.

    ``max_attempts`` (``None``: retry for as long as it fails) is the number of failed
    deliveries after which the item goes to the dead letters. ``maximum`` is at most 365 days.

    >>> [RedeliveryPolicy().delay(n).seconds for n in range(1, 7)]
    [3, 6, 12, 24, 30, 30]
    """

    initial: timedelta = timedelta(seconds=3)
    maximum: timedelta = timedelta(seconds=30)
    factor: float = 2.0
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        if self.initial <= timedelta(0):
            raise ValueError(f"redelivery initial must be positive (got {self.initial})")
        if self.maximum > LONGEST_SETTING:
            raise ValueError(
                f"redelivery maximum must be at most {LONGEST_SETTING.days} days "
                f"(got {self.maximum})"
            )
        if self.maximum < self.initial:
            raise ValueError(
                f"redelivery maximum ({self.maximum}) must be at least initial ({self.initial})"
            )
        if not self.factor >= 1:  # NaN too
            raise ValueError(f"redelivery factor must be a number >= 1 (got {self.factor})")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 or None (got {self.max_attempts})")

    def delay(self, failures: int) -> timedelta:
        """The wait after the ``failures``-th consecutive failure (1-based)."""
        if failures < 1:
            raise ValueError(f"failures is 1-based (got {failures})")
        # In closed form, compared in logarithms before multiplying: a huge failure count (a
        # counter read from a document) neither overflows nor loops a billion times.
        seconds = self.initial.total_seconds()
        cap = self.maximum.total_seconds()
        steps = failures - 1
        if steps == 0 or self.factor == 1 or seconds >= cap:
            return min(self.initial, self.maximum)
        if steps >= math.log(cap / seconds) / math.log(self.factor):
            return self.maximum
        return min(timedelta(seconds=seconds * self.factor**steps), self.maximum)


def redelivery_policy(settings: SchedulerSettings) -> RedeliveryPolicy:
    """The policy ``ipf-scheduler.flowsched.redelivery`` and ``max-attempts`` set."""
    return RedeliveryPolicy(
        initial=settings.redelivery_initial,
        maximum=settings.redelivery_maximum,
        factor=settings.redelivery_factor,
        max_attempts=settings.max_attempts,
    )


class Observer:
    """Hook for metrics: override what you need; every method is called synchronously.

    Calls come from scheduler threads; keep them cheap and thread-safe."""

    def scheduled(self, item: ScheduleItem) -> None:
        """An item was scheduled (or replaced)."""

    def cancelled(self, item_id: str) -> None:
        """An item was cancelled."""

    def fired(self, item: ScheduleItem, attempt: int, lateness: timedelta) -> None:
        """A delivery is starting; ``lateness`` is fire time minus due time."""

    def completed(self, item: ScheduleItem, attempt: int) -> None:
        """A handler returned: the item is done."""

    def failed(self, item: ScheduleItem, attempt: int, error: str) -> None:
        """A handler raised; the item will be redelivered or dead-lettered."""

    def dead_lettered(self, dead: DeadLetter) -> None:
        """An item exhausted ``max_attempts``."""

    def late_completion(self, item: ScheduleItem, attempt: int, late: timedelta) -> None:
        """A handler returned ``late`` after its claim's lease ended (MongoDB): no failure,
        the item is done, but another node may have run it too."""


@dataclass(frozen=True, slots=True)
class Completed:
    """The handler returned: remove the item (if it is still the delivered generation)."""


@dataclass(frozen=True, slots=True)
class Redeliver:
    """The handler raised: deliver again at ``due`` with ``attempt`` earlier failures."""

    due: datetime
    attempt: int
    error: str


@dataclass(frozen=True, slots=True)
class DeadLettered:
    """The handler raised for the last allowed time: set the item aside."""

    dead: DeadLetter


@dataclass(frozen=True, slots=True)
class NextSlot:
    """A recurring item's tick is over - it ran, it failed and counts (``error``), or no slot
    was due: keep the item (same generation, failures reset) with ``applied`` as its last
    applied slot, due again at ``due``."""

    applied: datetime | None
    due: datetime
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Exhausted:
    """A recurring item whose recurrence has no slot left (none before the year 10000): set
    it aside, never redeliver it - MongoDB moves it to quarantine, the in-memory adapter to
    its dead letters (``dead``; ``dead.error`` says why). See :meth:`DeliveryCore.tick`."""

    dead: DeadLetter


Outcome = Completed | Redeliver | DeadLettered | NextSlot | Exhausted

_COMPLETED = Completed()


MAX_ERROR_CHARS = 2000
"""The most of a failure's text an outcome keeps (and a store writes as ``last_error``)."""


def storable_error(text: str) -> str:
    """``text`` as every store can keep it: valid UTF-8 (a lone surrogate, as in the message
    of an ``OSError`` on an undecodable file name, escaped) and at most
    :data:`MAX_ERROR_CHARS` characters. A text a store refused would lose the outcome, and
    the item would be delivered again and again without its failures being counted."""
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "\u2026"
    return text


class DeliveryCore:
    """Subscriptions plus the rule that turns one handler call into an :data:`Outcome`.

    Thread-safe: ``deliver`` may run on many worker threads at once. The observer is fixed at
    construction (which of its methods are overridden is looked up once).
    """

    def __init__(
        self,
        clock: Clock,
        redelivery: RedeliveryPolicy | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.clock = clock
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
        self._routes: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def subscribe(self, kind: ScheduleKind, handler: Handler) -> str:
        """Handle items of ``kind`` without a handler name; return their route.

        ``ValueError`` if the kind already has a handler (nothing is replaced)."""
        try:
            kind = ScheduleKind(kind)
        except ValueError:
            valid = ", ".join(k.value for k in ScheduleKind)
            raise ValueError(f"subscribe: unknown kind {kind!r} (valid: {valid})") from None
        _check_callable(handler, f"subscribe({kind.value})")
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

    def register(self, name: str, handler: Handler, on_failed: FailedHandler | None = None) -> str:
        """Handle items addressed to ``name``; return their route.

        ``ValueError`` if the name is invalid or already registered."""
        check_handler_name(name)
        _check_callable(handler, f"register({name!r})")
        if on_failed is not None:
            _check_callable(on_failed, f"register({name!r}) on_failed")
        route = name_route(name)
        with self._lock:
            if route in self._handlers:
                raise ValueError(f"handler {name!r} is already registered on this scheduler")
            self._add(route, handler, on_failed)
        return route

    def _add(self, route: str, handler: Handler, on_failed: FailedHandler | None) -> None:
        self._handlers = {**self._handlers, route: handler}
        if on_failed is not None:
            self._on_failed = {**self._on_failed, route: on_failed}
        self._routes = frozenset(self._handlers)

    def routes(self) -> frozenset[str]:
        """Routes that have a handler here: an adapter takes only items of these routes."""
        return self._routes

    def tick(self, item: ScheduleItem) -> ScheduleItem | NextSlot | Exhausted:
        """For a recurring item claimed now: the form to deliver - ``due`` the latest slot
        due by now, ``previous`` the slot applied before it - or, if no slot after the
        applied one is due yet, the :class:`NextSlot` that moves it on without a delivery
        (:class:`Exhausted` if there is no slot left at all)."""
        recurrence = item.recurrence
        if recurrence is None:
            raise ValueError(f"tick({item.id!r}): not a recurring item")
        try:
            slot = recurrence.slot_to_run(self.clock.now(), item.previous)
            if slot is None:
                floor = item.previous or recurrence.start
                assert floor is not None  # a recurring ScheduleItem's recurrence has a start
                return NextSlot(item.previous, recurrence.next_slot(floor))
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
                    return ticked  # nothing due yet (NextSlot), or no slot left (Exhausted)
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
        handler = self._handlers.get(item.route)
        if handler is None:
            # Adapters take only items of routes() (which only grows): a bug if reached.
            raise LookupError(f"no handler for route {item.route!r} of {item.id!r}")
        if self._observe_fired:
            self._notify(self.observer.fired, item, attempt, self.clock.now() - item.due)
        try:
            handler(item, attempt)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            if item.recurrence is not None and not item.recurrence.retry_failed:
                return self._counted(item, attempt, error)
            return self.failure(item, attempt, error)
        if self._observe_completed:
            self._notify(self.observer.completed, item, attempt)
        if item.recurrence is not None:
            try:
                return NextSlot(item.due, item.recurrence.next_slot(item.due))
            except ValueError as exc:  # that was the last slot before the year 10000
                return self._exhausted(item, attempt, str(exc))
        return _COMPLETED

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

    def _counted(self, item: ScheduleItem, attempt: int, error: str) -> NextSlot | Exhausted:
        """A failed tick that counts as its slot's outcome: the next tick is the next slot."""
        assert item.recurrence is not None
        error = storable_error(error)
        self._notify(self.observer.failed, item, attempt, error)
        try:
            following = item.recurrence.next_slot(item.due)
        except ValueError as exc:  # that was the last slot before the year 10000
            return self._exhausted(item, attempt, f"{exc} (its last tick failed: {error})")
        log.warning(
            "tick of %s %s for slot %s failed (counted; next slot %s): %s",
            item.kind.value,
            item.id,
            item.due.isoformat(),
            following.isoformat(),
            error,
            extra={"item_id": item.id, "kind": item.kind.value},
        )
        return NextSlot(item.due, following, error)

    def _exhausted(self, item: ScheduleItem, attempt: int, reason: str) -> Exhausted:
        """The rule for a recurring item with no slot left (see the module docstring)."""
        reason = storable_error(reason)
        log.error(
            "recurring %s %s has no slot left, set aside: %s",
            item.kind.value,
            item.id,
            reason,
            extra={"item_id": item.id, "kind": item.kind.value},
        )
        return Exhausted(DeadLetter(item, attempt, reason, self.clock.now()))

    def failure(self, item: ScheduleItem, attempt: int, error: str) -> Redeliver | DeadLettered:
        """The outcome of a failed delivery (a raising handler, or one the adapter lost)."""
        error = storable_error(error)
        failures = attempt + 1
        self._notify(self.observer.failed, item, attempt, error)
        limit = self.redelivery.max_attempts
        if limit is not None and failures >= limit:
            dead = DeadLetter(item, failures, error, self.clock.now())
            log.error(
                "dead-lettered %s %s after %d failed attempts: %s",
                item.kind.value,
                item.id,
                failures,
                error,
                extra={"item_id": item.id, "kind": item.kind.value},
            )
            self._notify(self.observer.dead_lettered, dead)
            on_failed = self._on_failed.get(item.route)
            if on_failed is not None:
                self._notify(on_failed, dead)
            return DeadLettered(dead)
        due = self.clock.now() + self.redelivery.delay(failures)
        log.warning(
            "delivery of %s %s failed (attempt %d), redelivering at %s: %s",
            item.kind.value,
            item.id,
            attempt,
            due.isoformat(),
            error,
            extra={"item_id": item.id, "kind": item.kind.value},
        )
        return Redeliver(due, failures, error)


def _check_callable(value: object, what: str) -> None:
    if not callable(value):
        raise TypeError(f"{what}: expected a callable, got {value!r}")
