"""Internal: the scheduler port - ``SchedulerPort``, the interface every adapter implements.

Adapters (``InMemoryScheduler``, ``MongoScheduler``) implement :class:`SchedulerPort`; the flow
domain and user code talk only to this interface. The records it carries
(``ScheduleItem``, ``ScheduleKind``, ``DeadLetter``) are in :mod:`flowsched.records`, the
limits in :mod:`flowsched.limits`, routes in :mod:`flowsched.routes`; this module re-exports
them so ``from flowsched.port import ScheduleItem`` keeps working.

Guarantees every adapter keeps:

* ``schedule`` stores an item; an item with the same ``id`` is replaced.
* Once ``schedule`` or ``cancel`` has returned, the old form of a replaced or cancelled item is
  never delivered again (a delivery already running may finish), and a stale delivery never
  removes the item that replaced it.
* Delivery is at least once: a handler that returns completes the item; one that raises is
  redelivered with backoff. "Nothing to do" is success — return normally, or the item is
  redelivered for as long as it keeps failing.
* A recurring item (one with a :class:`~flowsched.recurrence.Recurrence`) is not removed by a
  tick: it moves on to its next slot. After a gap only the latest due slot runs, once; a slot
  at or before the applied one never runs again (across nodes too); a failed tick still
  counts unless ``retry_failed``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Self, Unpack

from flowsched.calendar import Calendar
from flowsched.clock import ensure_utc, later
from flowsched.errors import SchedulerUnavailable
from flowsched.limits import (
    MAX_HANDLER_NAME,
    MAX_ID_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    check_handler_name,
    check_id,
    short_repr,
)
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind, not_an_item, set_generation
from flowsched.recurrence import Recurrence
from flowsched.routes import kind_route, name_route, route_target

if TYPE_CHECKING:
    from flowsched.handler_limits import HandlerOptions
    from flowsched.steering import Attempt

__all__ = [
    "MAX_HANDLER_NAME",
    "MAX_ID_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "DeadLetter",
    "FailedHandler",
    "Handler",
    "Recurrence",
    "ScheduleItem",
    "ScheduleKind",
    "SchedulerPort",
    "SchedulerUnavailable",
    "check_handler_name",
    "check_id",
    "kind_route",
    "name_route",
    "not_an_item",
    "recurring_item",
    "route_target",
    "set_generation",
    "single_timer_item",
    "short_repr",
]

Handler = Callable[[ScheduleItem, int], object]
"""``handler(item, attempt)``: ``attempt`` counts earlier failed deliveries (0 the first time).
Return normally to complete the item; raise to have it redelivered with backoff."""


FailedHandler = Callable[[DeadLetter], object]
"""``on_failed(dead_letter)``: told when an item of a named handler is dead-lettered."""


def single_timer_item(
    now: datetime,
    timer_id: str,
    delay: timedelta | datetime,
    handler: str,
    arg: Mapping[str, Any] | None = None,
) -> ScheduleItem:
    """The item ``create_single_timer`` schedules (on either face of the port). ``TypeError``
    for a callable where the handler's name belongs (see :func:`handler_name_expected`)."""
    if callable(handler):
        handler_name_expected(timer_id, handler)
    if isinstance(delay, timedelta):
        due = later(now, delay, f"create_single_timer({timer_id!r}) delay")
    elif isinstance(delay, datetime):
        due = ensure_utc(delay, f"create_single_timer({timer_id!r}) delay")
    else:
        raise TypeError(
            f"create_single_timer({timer_id!r}): delay must be a timedelta or an aware "
            f"datetime (got {delay!r})"
        )
    return ScheduleItem(timer_id, ScheduleKind.TIMER, due, payload=arg, handler=handler)


def handler_name_expected(timer_id: str, handler: object) -> NoReturn:
    """A function given where a handler's name belongs: the name, not a Python reference, is
    what is stored (a timer outlives the process), so the function must be registered."""
    from flowsched.callables import short_callable

    function = short_callable(handler)
    raise TypeError(
        f"create_single_timer({timer_id!r}): handler must be the name of a registered "
        f"handler, not the callable {function}: register it first with "
        f"scheduler.register('<name>', {function}) and pass that name"
    )


def recurring_item(
    now: datetime,
    item_id: str,
    recurrence: Recurrence,
    kind: ScheduleKind = ScheduleKind.TIMER,
    flow_id: str | None = None,
    payload: Mapping[str, Any] | None = None,
    handler: str | None = None,
    calendars: Mapping[str, Calendar] = MappingProxyType({}),
) -> ScheduleItem:
    """The item ``schedule_recurring`` schedules: anchored at ``now`` (unless ``recurrence``
    has a start), its calendar name (if it gives one) looked up in ``calendars``, due at its
    first slot. ``ValueError`` if the calendar is unknown or the recurrence has no slot."""
    if not isinstance(recurrence, Recurrence):
        raise TypeError(
            f"schedule_recurring({item_id!r}): recurrence must be a Recurrence (Recurrence.every"
            f"(...) or Recurrence.cron(...)), got {type(recurrence).__name__}: {recurrence!r:.80}"
        )
    try:
        anchored = recurrence.resolved(calendars).anchored(now)
        assert anchored.start is not None  # anchored() sets it
        first = anchored.next_slot(anchored.start)
    except ValueError as exc:
        raise ValueError(f"schedule_recurring({item_id!r}): {exc}") from None
    return ScheduleItem(
        item_id, kind, first, flow_id, payload, recurrence=anchored, handler=handler
    )


class SchedulerPort(ABC):
    """The interface both scheduler adapters implement.

    Use it as a context manager to start background firing and close it on exit::

        with InMemoryScheduler() as scheduler:
            scheduler.subscribe(ScheduleKind.TIMER, handler)
            scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, due))
    """

    calendars: Mapping[str, Calendar] = MappingProxyType({})
    """Named calendars, by name: ``schedule_recurring`` resolves a recurrence's
    ``calendar="name"`` here. ``from_config`` sets the ``ipf-scheduler.calendars`` of the
    configuration; a scheduler built by hand may be given its own (assign a dict)."""

    @abstractmethod
    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item``, replacing any item with the same id; return it with its generation."""

    @abstractmethod
    def now(self) -> datetime:
        """The time on this scheduler's clock (timezone-aware UTC): due times are compared
        against it."""

    def create_single_timer(
        self,
        timer_id: str,
        delay: timedelta | datetime,
        handler: str,
        arg: Mapping[str, Any] | None = None,
    ) -> ScheduleItem:
        """Schedule a one-shot ``TIMER`` for the named ``handler``; return it as stored.

        Due ``delay`` from now (a ``timedelta``), or at ``delay`` (a timezone-aware
        ``datetime``). ``arg``, a JSON object of at most 1024 encoded bytes, arrives as the
        item's ``payload``. Scheduling under an existing ``timer_id`` replaces that item;
        ``cancel(timer_id)`` cancels it.

        >>> from datetime import UTC, datetime, timedelta
        >>> from flowsched import InMemoryScheduler, ManualClock
        >>> clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
        >>> scheduler = InMemoryScheduler(clock=clock)
        >>> scheduler.register("expire-order", lambda item, attempt: print(item.payload))
        >>> _ = scheduler.create_single_timer(
        ...     "expire-o-1", timedelta(minutes=5), "expire-order", {"order": "o-1"})
        >>> _ = clock.advance(timedelta(minutes=5))
        {'order': 'o-1'}
        """
        return self.schedule(single_timer_item(self.now(), timer_id, delay, handler, arg))

    def schedule_recurring(
        self,
        item_id: str,
        recurrence: Recurrence,
        kind: ScheduleKind = ScheduleKind.TIMER,
        flow_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        *,
        handler: str | None = None,
    ) -> ScheduleItem:
        """Schedule a recurring item, replacing any item with that id; return it as stored.

        Slots are counted from the scheduler's now (unless ``recurrence`` has a ``start``):
        ``Recurrence.every(timedelta(hours=1))`` scheduled at 10:00 ticks at 11:00, 12:00, ...
        The item is due at its first slot; replacing it restarts the slot count. ``handler``
        addresses it to a named handler (else it is routed by ``kind``).

        >>> from datetime import UTC, datetime, timedelta
        >>> from flowsched import InMemoryScheduler, ManualClock
        >>> scheduler = InMemoryScheduler(clock=ManualClock(datetime(2026, 1, 1, 10, tzinfo=UTC)))
        >>> every_hour = Recurrence.every(timedelta(hours=1))
        >>> scheduler.schedule_recurring("sweep", every_hour).due.isoformat()
        '2026-01-01T11:00:00+00:00'
        """
        return self.schedule(
            recurring_item(
                self.now(), item_id, recurrence, kind, flow_id, payload, handler, self.calendars
            )
        )

    @abstractmethod
    def cancel(self, item_id: str) -> bool:
        """Remove the item; ``False`` (not an error) if there was none.

        Once this has returned ``True``, the removed form never starts, on any node: a
        delivery starts only after its node has checked that its claim still holds, so a
        claim still waiting in a node's queue loses to the cancel. A delivery that had
        already started may finish; the caller learns of it from ``history(item_id)``: its
        last attempt is open (``ended`` is ``None``), or ended after the cancel, and its
        ``started`` - when the node recorded the start, by the database's clock - precedes
        the cancel. ``True`` also when the first reply was lost and a retry found the item
        gone. Gives up after ``op_timeout`` with ``OutcomeUnknown`` if the delete may have
        been applied (a late delete never removes a form stored after that), or with
        ``SchedulerUnavailable`` if nothing was sent."""

    @abstractmethod
    def cancel_flow(self, flow_id: str) -> int:
        """Remove every item of that flow instance; return how many were removed."""

    @abstractmethod
    def exists(self, item_id: str) -> bool:
        """Whether the item is still scheduled (not fired successfully, not cancelled)."""

    @abstractmethod
    def get(self, item_id: str) -> ScheduleItem | None:
        """The item as currently scheduled (its due time moves on redelivery), or ``None``."""

    @abstractmethod
    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        """Deliver due items of ``kind`` that have no handler name to ``handler``.

        One handler per kind: ``ValueError`` if ``kind`` already has one (nothing is
        replaced). Items of a kind nobody subscribed to stay scheduled until someone does."""

    @abstractmethod
    def register(self, name: str, handler: Handler, **options: Unpack[HandlerOptions]) -> None:
        """Deliver due items addressed to ``name`` (``ScheduleItem(..., handler=name)``) to
        ``handler``; the keyword ``on_failed(dead_letter)`` is called when one of them is
        dead-lettered (beside the observer; its errors are logged and change nothing).

        ``redelivery``: a :class:`~flowsched.RedeliveryPolicy` for this handler's items
        instead of the scheduler's. ``timeout`` (a ``timedelta`` or a duration string such
        as ``"2s"``; ``ValueError`` naming it unless above zero): a run past it counts as
        failed (its attempt ``"timed_out"``) and is redelivered by the policy; the handler
        is abandoned (a thread) or cancelled (``async def``), its late result ignored
        (:mod:`flowsched.handler_limits`).

        ``ValueError`` if ``name`` is not a valid handler name or is already registered on
        this scheduler. Items addressed to a name nobody registered stay scheduled until a
        scheduler (this one later, or another node) registers it."""

    def history(self, item_id: str) -> list[Attempt]:
        """The recent attempts of ``item_id``, oldest first, the running one last (``ended``
        ``None``): node, start and end (by the store's clock), outcome and error. Bounded per
        item (``history-limit``) and kept after the item is gone (``history-retention``)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no delivery history")

    @abstractmethod
    def dead_letters(self) -> list[DeadLetter]:
        """Items that exhausted ``max_attempts``, oldest first."""

    @abstractmethod
    def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        """Move a dead letter back into the schedule (due now, or at ``due``), attempts reset."""

    @abstractmethod
    def start(self) -> None:
        """Begin firing in the background (idempotent)."""

    @abstractmethod
    def close(self) -> None:
        """Stop firing and wait for handlers in flight (idempotent)."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
