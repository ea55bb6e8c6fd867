"""Internal: ``FlowDomain``, which runs flow instances and handles their time through the port.

Build one with :meth:`FlowDomain.builder`. The domain talks to the scheduler only through
:class:`~flowsched.SchedulerPort`: it registers one named handler per flow it runs,
``flow:<FlowName>`` (:func:`~flowsched.flow.timers.flow_handler`), addresses every timer it
schedules (``ACTION_TIMEOUT``, ``ACTION_RETRY``, ``PROCESSING_TIMEOUT``) to its flow's handler,
and tells the kinds apart when one fires. So several domains with different flows can share
one scheduler (or one MongoDB collection), and during a rolling deployment each node fires
only the timers of the flows it runs. Two domains running the same flow on one scheduler are
refused (``ValueError`` naming the flow); the kinds stay free for the application's own
``subscribe``.

Thread-safe: events and timers for one instance are decided one at a time (a per-instance
lock), different instances in parallel; the store's optimistic versioning keeps several
processes sharing one store from overwriting each other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flowsched.clock import Clock
from flowsched.errors import TimerAheadOfInstanceError, UnknownFlowError
from flowsched.flow.decision import Decision
from flowsched.flow.definition import FlowDefinition
from flowsched.flow.events import ActionRequest
from flowsched.flow.instance import FlowInstance
from flowsched.flow.locks import InstanceLocks
from flowsched.flow.planner import Planner
from flowsched.flow.store import ConcurrentUpdateError, FlowAlreadyExistsError, FlowStore
from flowsched.flow.timeline import Listener, TimelineEntry
from flowsched.flow.timers import ActionTimer, DeadlineTimer, action_timer_id, flow_handler
from flowsched.port import SchedulerPort
from flowsched.records import ScheduleItem, ScheduleKind

if TYPE_CHECKING:
    from flowsched.flow.builder import FlowDomainBuilder

__all__ = ["ActionAdapter", "FlowDomain", "TimerAheadOfInstanceError", "UnknownFlowError"]

log = logging.getLogger("flowsched.flow")

ActionAdapter = Callable[[ActionRequest], object]
"""Calls an external system for one invocation. It may return the response event at once
(a synchronous system) or ``None`` and deliver the response later with ``domain.handle``.
An adapter that raises is logged; the action's retries and timeout then apply."""

Decide = Callable[[FlowInstance | None, datetime], Decision | None]

EARLY_TIMER_REDELIVERIES = 3
"""How many times a timer that arrived before its instance was stored is handed back to the
scheduler for redelivery (its backoff: 3 s, 6 s, 12 s by default) before it is dropped."""


class FlowDomain:
    """Runs the registered flows; see the module docstring for the guarantees."""

    def __init__(
        self,
        *,
        flows: Mapping[str, FlowDefinition],
        scheduler: SchedulerPort,
        store: FlowStore,
        planner: Planner,
        clock: Clock,
        adapters: Mapping[tuple[str | None, str], ActionAdapter],
        listeners: Iterable[Listener] = (),
        conflict_retries: int = 5,
    ) -> None:
        """Use :meth:`builder`; this wires already-checked parts together."""
        self.flows = dict(flows)
        self.scheduler = scheduler
        self.store = store
        self.clock = clock
        self._planner = planner
        self._adapters = dict(adapters)
        self._listeners = list(listeners)
        self._conflict_retries = conflict_retries
        self._locks = InstanceLocks()
        self._start_checked = False  # see _check_started
        self._dispatch: dict[ScheduleKind, Callable[[ScheduleItem, int], None]] = {
            ScheduleKind.ACTION_TIMEOUT: self._on_action_timeout,
            ScheduleKind.ACTION_RETRY: self._on_retry,
            ScheduleKind.PROCESSING_TIMEOUT: self._on_deadline,
        }
        for name in self.flows:
            try:
                scheduler.register(flow_handler(name), self._on_timer)
            except ValueError:
                raise ValueError(
                    f"flow {name!r} already runs in another FlowDomain on this scheduler "
                    f"(handler {flow_handler(name)!r} is registered): one domain per flow "
                    "and scheduler"
                ) from None

    @staticmethod
    def builder() -> FlowDomainBuilder:
        """A :class:`~flowsched.flow.builder.FlowDomainBuilder`."""
        from flowsched.flow.builder import FlowDomainBuilder

        return FlowDomainBuilder()

    # -- what users call -----------------------------------------------------------------

    def start(
        self,
        flow: str,
        flow_id: str,
        *,
        offsets: Mapping[str, datetime] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> FlowInstance:
        """Start instance ``flow_id`` of ``flow`` in its initial state and return it.

        ``offsets`` are custom offsets (``{"accepted": accepted_at}``, or a parent's
        ``request.offsets``); ``data`` a small JSON object handed to every action.
        :class:`~flowsched.flow.store.FlowAlreadyExistsError` if the id is taken."""
        definition = self._definition(flow)

        def decide(instance: FlowInstance | None, now: datetime) -> Decision:
            if instance is not None:
                raise FlowAlreadyExistsError(f"flow instance {flow_id!r} already exists")
            return self._planner.start(definition, flow_id, now, offsets, data)

        return _decided(self._run(flow_id, decide))

    def handle(
        self, flow_id: str, event: object, offsets: Mapping[str, datetime] | None = None
    ) -> FlowInstance:
        """Deliver ``event`` (a response, or any event the flow declares transitions for)
        to instance ``flow_id`` and return the instance after it. An event the current
        state has no transition for changes nothing; so does any event once the flow has
        finished. :class:`UnknownFlowError` if there is no such instance.

        ``offsets``: custom offsets that came with this input (name → aware datetime), added
        to the instance's offsets before the event is applied (a name already there is
        replaced), so a processing-time deadline armed from then on can count from them."""

        def decide(instance: FlowInstance | None, now: datetime) -> Decision:
            if instance is None:
                raise UnknownFlowError(f"no flow instance {flow_id!r}")
            definition = self._definition(instance.flow)
            return self._planner.event(definition, instance, event, now, offsets)

        return _decided(self._run(flow_id, decide))

    def instance(self, flow_id: str) -> FlowInstance | None:
        """The stored instance, or ``None``."""
        return self.store.load(flow_id)

    def timers(self, flow_id: str) -> list[ScheduleItem]:
        """What the instance is waiting on, as the scheduler holds it now, earliest first:
        the timeouts and retries of its current state's actions and its processing-time
        deadlines (empty for a finished or unknown instance)."""
        instance = self.store.load(flow_id)
        if instance is None or instance.finished:
            return []
        ids = [
            action_timer_id(flow_id, instance.state, instance.entry, run.action, kind)
            for run in instance.actions
            if run.waiting
            for kind in (ScheduleKind.ACTION_TIMEOUT, ScheduleKind.ACTION_RETRY)
        ]
        ids += [d.item_id for d in instance.deadlines]
        items = [item for item in map(self.scheduler.get, ids) if item is not None]
        return sorted(items, key=lambda item: item.due)

    # -- timer handlers (called by the scheduler, possibly on its worker threads) ---------

    def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        """Every timer addressed to one of this domain's flows: dispatch on its kind."""
        handle = self._dispatch.get(item.kind)
        if handle is None:
            log.warning(
                "%s %s addressed to %s: not a flow timer kind; ignored",
                item.kind,
                item.id,
                item.handler,
            )
            return
        handle(item, attempt)

    def _on_action_timeout(self, item: ScheduleItem, attempt: int) -> None:
        timer = ActionTimer.from_payload(item.payload or {})
        self._timer(
            item,
            attempt,
            timer.flow,
            timer.entry,
            lambda d, inst, now: self._planner.action_timeout(d, inst, timer, now),
        )

    def _on_retry(self, item: ScheduleItem, attempt: int) -> None:
        timer = ActionTimer.from_payload(item.payload or {})
        self._timer(
            item,
            attempt,
            timer.flow,
            timer.entry,
            lambda d, inst, now: self._planner.retry(d, inst, timer, now, planned=item.due),
        )

    def _on_deadline(self, item: ScheduleItem, attempt: int) -> None:
        timer = DeadlineTimer.from_payload(item.payload or {})
        self._timer(
            item,
            attempt,
            timer.flow,
            timer.entry,
            lambda d, inst, now: self._planner.deadline(d, inst, timer, item.id, now),
        )

    def _timer(
        self,
        item: ScheduleItem,
        attempt: int,
        flow: str,
        entry: int,
        plan: Callable[[FlowDefinition, FlowInstance, datetime], Decision],
    ) -> None:
        """Apply a fired timer set on state entry ``entry``.

        "Nothing to do" (unknown flow or instance, a flow that moved on) returns normally:
        raising would have the scheduler redeliver it forever. A timer *ahead* of the stored
        instance (its entry is newer, or it belongs to a just-created instance not stored
        yet) was scheduled by a decision another node has not stored yet (timers are
        scheduled before the instance is stored): :class:`TimerAheadOfInstanceError` has it
        redelivered, up to :data:`EARLY_TIMER_REDELIVERIES` times, after which it is dropped
        (that decision never got stored: it lost a race or its node died)."""
        flow_id = item.flow_id
        definition = self.flows.get(flow)
        if flow_id is None or definition is None:
            log.warning("%s %s: flow %r is not registered here; ignored", item.kind, item.id, flow)
            return

        def decide(instance: FlowInstance | None, now: datetime) -> Decision | None:
            stored = 0 if instance is None else instance.entry
            if entry > stored and (instance is not None or entry == 1):
                if attempt < EARLY_TIMER_REDELIVERIES:
                    raise TimerAheadOfInstanceError(
                        f"{item.kind} {item.id}: set on entry {entry} of instance {flow_id!r},"
                        f" which is stored at entry {stored} (not stored yet?); try again later"
                    )
                log.warning(
                    "%s %s: instance %r still not stored at entry %d after %d deliveries; ignored",
                    item.kind,
                    item.id,
                    flow_id,
                    entry,
                    attempt + 1,
                )
                return None
            if instance is None:
                log.info("%s %s: no instance %r; ignored", item.kind, item.id, flow_id)
                return None
            return plan(definition, instance, now)

        self._run(flow_id, decide)

    # -- applying a decision -------------------------------------------------------------------

    def _run(self, flow_id: str, decide: Decide) -> FlowInstance | None:
        for _ in range(self._conflict_retries):
            with self._locks.hold(flow_id):
                decision = decide(self.store.load(flow_id), self.clock.now())
                if decision is None:
                    return None
                try:
                    saved = self._apply(decision)
                except ConcurrentUpdateError as exc:
                    log.info(
                        "flow instance %s changed concurrently (%s); deciding again", flow_id, exc
                    )
                    continue
            self._after(decision)
            return saved
        raise ConcurrentUpdateError(
            f"flow instance {flow_id!r}: still changing concurrently after "
            f"{self._conflict_retries} attempts"
        )

    def _apply(self, decision: Decision) -> FlowInstance:
        """Schedule, store, cancel — in that order (see :mod:`flowsched.flow.decision`)."""
        if not self._start_checked and decision.schedules:
            self._check_started(decision.schedules[0])
        for item in decision.schedules:
            self.scheduler.schedule(item)
        saved = decision.instance
        if decision.changed:
            if decision.instance.version == 0:
                saved = self.store.insert(decision.instance)
            else:
                saved = self.store.update(decision.instance)
        if decision.cancel_flow:
            # Every timer of the instance carries its flow id: one cancel_flow (one round
            # trip on MongoDB) removes the single cancels' items too.
            self.scheduler.cancel_flow(decision.instance.flow_id)
        else:
            for item_id in decision.cancellations():
                self.scheduler.cancel(item_id)
        return saved

    def _check_started(self, first: ScheduleItem) -> None:
        """Warn once, at the first timer, if the scheduler fires nothing until it is started
        (a real-clock scheduler built without ``with`` or ``start()``): the flow would wait
        in its state for ever, silently."""
        self._start_checked = True
        if getattr(self.scheduler, "needs_start", False):
            name = type(self.scheduler).__name__
            log.warning(
                "FlowDomain: its %s was never started, so the timers it schedules (the first: "
                "%s %s, due %s) will not fire: call scheduler.start() (or build the domain "
                "inside `with %s(...) as scheduler:`), unless another, started node delivers "
                "these flows' timers",
                name,
                first.kind.value,
                first.id,
                first.due.isoformat(),
                name,
            )

    def _after(self, decision: Decision) -> None:
        """Outside the lock: tell listeners, invoke actions, feed back their responses."""
        if self._listeners or log.isEnabledFor(logging.DEBUG):
            for entry in decision.timeline:
                self._tell(entry)
        for request in decision.invocations:
            response = self._invoke(request)
            if response is not None:
                self.handle(request.flow_id, response)

    def _invoke(self, request: ActionRequest) -> object:
        adapter = self._adapters.get((request.flow, request.action)) or self._adapters.get(
            (None, request.action)
        )
        if adapter is None:  # the builder checks every action has one; a guard, not a path
            log.error("no action adapter for %s.%s", request.flow, request.action)
            return None
        try:
            return adapter(request)
        except Exception:
            log.warning(
                "action %s of %s (attempt %d) raised; its retries and timeout apply",
                request.action,
                request.flow_id,
                request.attempt,
                exc_info=True,
            )
            return None

    def _tell(self, entry: TimelineEntry) -> None:
        log.debug("%s", entry)
        for listener in self._listeners:
            try:
                listener(entry)
            except Exception:
                log.exception("timeline listener %r raised; ignored", listener)

    def _definition(self, flow: str) -> FlowDefinition:
        try:
            return self.flows[flow]
        except KeyError:
            known = ", ".join(sorted(self.flows)) or "none"
            raise UnknownFlowError(f"no flow {flow!r} registered (flows: {known})") from None


def _decided(instance: FlowInstance | None) -> FlowInstance:
    # start/handle always decide a decision (or raise), so there is always an instance.
    assert instance is not None
    return instance
