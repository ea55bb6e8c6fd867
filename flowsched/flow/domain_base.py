"""Internal: the half of a flow domain that does no I/O, shared by both faces.

:class:`DomainBase` holds the registered flows, the planner, the store and the adapters, and
turns each input - a start, an event, a fired timer - into a *decision*: a function from the
stored instance (or ``None``) and ``now`` to the
:class:`~flowsched.flow.decision.Decision` to apply.
:class:`~flowsched.flow.domain.FlowDomain` applies steps with blocking calls,
:class:`~flowsched.flow.async_domain.AsyncFlowDomain` with awaited ones; both apply them in
the same order (:mod:`flowsched.flow.decision`) and never decide anything themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from flowsched.clock import Clock
from flowsched.errors import FlowAlreadyExistsError, TimerAheadOfInstanceError, UnknownFlowError
from flowsched.flow.decision import Decision
from flowsched.flow.definition import FlowDefinition
from flowsched.flow.events import ActionRequest
from flowsched.flow.instance import FlowInstance
from flowsched.flow.planner import Planner
from flowsched.flow.timeline import Listener, TimelineEntry
from flowsched.flow.timers import ActionTimer, DeadlineTimer, action_timer_id, flow_handler
from flowsched.records import ScheduleItem, ScheduleKind

__all__ = [
    "EARLY_TIMER_REDELIVERIES",
    "ActionAdapter",
    "Decide",
    "DomainBase",
    "Plan",
    "TimerAheadOfInstanceError",
    "UnknownFlowError",
    "decided",
]

log = logging.getLogger("flowsched.flow")

ActionAdapter = Callable[[ActionRequest], object]
"""Calls an external system for one invocation. It may return the response event at once
(a synchronous system) or ``None`` and deliver the response later with ``domain.handle``.
An adapter that raises is logged; the action's retries and timeout then apply. On an
:class:`~flowsched.AsyncFlowDomain` it may be ``async def``."""

Decide = Callable[[FlowInstance | None, datetime], Decision | None]
"""A decision: the stored instance (or ``None``) and now -> the step to apply (``None``:
nothing to do)."""

Plan = Callable[[FlowDefinition, FlowInstance, datetime], Decision]
"""How a fired timer changes an instance still concerned by it."""

EARLY_TIMER_REDELIVERIES = 3
"""How many times a timer that arrived before its instance was stored is handed back to the
scheduler for redelivery (its backoff: 3 s, 6 s, 12 s by default) before it is dropped."""


class DomainBase:
    """The registered flows and the decisions about them (see the module docstring)."""

    def __init__(
        self,
        *,
        flows: Mapping[str, FlowDefinition],
        scheduler: Any,
        store: Any,
        planner: Planner,
        clock: Clock,
        adapters: Mapping[tuple[str | None, str], ActionAdapter],
        listeners: Iterable[Listener] = (),
        conflict_retries: int = 5,
    ) -> None:
        self.flows = dict(flows)
        self.clock = clock
        self.scheduler = scheduler
        self.store = store
        self._planner = planner
        self._adapters = dict(adapters)
        self._listeners = list(listeners)
        self._conflict_retries = conflict_retries
        self._plans: dict[ScheduleKind, Callable[[ScheduleItem], tuple[str, int, Plan]]] = {
            ScheduleKind.ACTION_TIMEOUT: self._action_timeout,
            ScheduleKind.ACTION_RETRY: self._retry,
            ScheduleKind.PROCESSING_TIMEOUT: self._deadline,
        }
        self._start_checked = False  # see _check_started

    def _register_on(self, scheduler: Any, on_timer: Callable[..., object]) -> None:
        """Register ``on_timer`` for every flow's handler name on ``scheduler``."""
        for name in self.flows:
            try:
                scheduler.register(flow_handler(name), on_timer)
            except ValueError:
                raise ValueError(
                    f"flow {name!r} already runs in another FlowDomain on this scheduler "
                    f"(handler {flow_handler(name)!r} is registered): one domain per flow "
                    "and scheduler"
                ) from None

    def _check_started(self, scheduler: object, decision: Decision) -> None:
        """Warn once, at the first timer, if the scheduler fires nothing until it is started
        (a real-clock scheduler built without ``with`` or ``start()``): the flow would wait
        in its state for ever, silently."""
        if self._start_checked or not decision.schedules:
            return
        self._start_checked = True
        if getattr(scheduler, "needs_start", False):
            first = decision.schedules[0]
            name = type(scheduler).__name__
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

    # -- decisions -----------------------------------------------------------------------

    def _starting(
        self,
        flow: str,
        flow_id: str,
        offsets: Mapping[str, datetime] | None,
        data: Mapping[str, Any] | None,
    ) -> Decide:
        """The decision of ``start(flow, flow_id, ...)``."""
        definition = self._definition(flow)

        def decide(instance: FlowInstance | None, now: datetime) -> Decision:
            if instance is not None:
                raise FlowAlreadyExistsError(f"flow instance {flow_id!r} already exists")
            return self._planner.start(definition, flow_id, now, offsets, data)

        return decide

    def _handling(
        self, flow_id: str, event: object, offsets: Mapping[str, datetime] | None
    ) -> Decide:
        """The decision of ``handle(flow_id, event, offsets)``."""

        def decide(instance: FlowInstance | None, now: datetime) -> Decision:
            if instance is None:
                raise UnknownFlowError(f"no flow instance {flow_id!r}")
            definition = self._definition(instance.flow)
            return self._planner.event(definition, instance, event, now, offsets)

        return decide

    def _timer_decision(self, item: ScheduleItem, attempt: int) -> Decide | None:
        """The decision of a fired timer addressed to one of this domain's flows (``None``:
        nothing to do, such as a kind that is no flow timer, or a flow not registered here).

        A timer *ahead* of the stored instance (its entry is newer, or it belongs to a
        just-created instance not stored yet) was scheduled by a decision another node has
        not stored yet (timers are scheduled before the instance is stored):
        :class:`TimerAheadOfInstanceError` has it redelivered, up to
        :data:`EARLY_TIMER_REDELIVERIES` times, after which it is dropped."""
        plan_of = self._plans.get(item.kind)
        if plan_of is None:
            log.warning(
                "%s %s addressed to %s: not a flow timer kind; ignored",
                item.kind,
                item.id,
                item.handler,
            )
            return None
        flow, entry, plan = plan_of(item)
        flow_id = item.flow_id
        definition = self.flows.get(flow)
        if flow_id is None or definition is None:
            log.warning("%s %s: flow %r is not registered here; ignored", item.kind, item.id, flow)
            return None

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

        return decide

    def _action_timeout(self, item: ScheduleItem) -> tuple[str, int, Plan]:
        timer = ActionTimer.from_payload(item.payload or {})
        return (
            timer.flow,
            timer.entry,
            lambda d, inst, now: self._planner.action_timeout(d, inst, timer, now),
        )

    def _retry(self, item: ScheduleItem) -> tuple[str, int, Plan]:
        timer = ActionTimer.from_payload(item.payload or {})
        return (
            timer.flow,
            timer.entry,
            lambda d, inst, now: self._planner.retry(d, inst, timer, now, planned=item.due),
        )

    def _deadline(self, item: ScheduleItem) -> tuple[str, int, Plan]:
        timer = DeadlineTimer.from_payload(item.payload or {})
        return (
            timer.flow,
            timer.entry,
            lambda d, inst, now: self._planner.deadline(d, inst, timer, item.id, now),
        )

    # -- helpers for the drivers -----------------------------------------------------------

    @staticmethod
    def _timer_ids(instance: FlowInstance | None) -> list[str]:
        """Ids of what ``instance`` waits on: its current actions' timeouts and retries and
        its processing-time deadlines (none for a finished or unknown instance)."""
        if instance is None or instance.finished:
            return []
        ids = [
            action_timer_id(instance.flow_id, instance.state, instance.entry, run.action, kind)
            for run in instance.actions
            if run.waiting
            for kind in (ScheduleKind.ACTION_TIMEOUT, ScheduleKind.ACTION_RETRY)
        ]
        return ids + [d.item_id for d in instance.deadlines]

    def _adapter(self, request: ActionRequest) -> ActionAdapter | None:
        adapter = self._adapters.get((request.flow, request.action)) or self._adapters.get(
            (None, request.action)
        )
        if adapter is None:  # the builder checks every action has one; a guard, not a path
            log.error("no action adapter for %s.%s", request.flow, request.action)
        return adapter

    @staticmethod
    def _adapter_failed(request: ActionRequest) -> None:
        log.warning(
            "action %s of %s (attempt %d) raised; its retries and timeout apply",
            request.action,
            request.flow_id,
            request.attempt,
            exc_info=True,
        )

    @staticmethod
    def _conflict(flow_id: str, exc: Exception) -> None:
        log.info("flow instance %s changed concurrently (%s); deciding again", flow_id, exc)

    def _gave_up(self, flow_id: str) -> Exception:
        from flowsched.flow.store import ConcurrentUpdateError

        return ConcurrentUpdateError(
            f"flow instance {flow_id!r}: still changing concurrently after "
            f"{self._conflict_retries} attempts"
        )

    def _tell_all(self, step: Decision) -> None:
        """Tell the listeners (and the debug log) what ``step`` did."""
        if self._listeners or log.isEnabledFor(logging.DEBUG):
            for entry in step.timeline:
                self._tell(entry)

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


def decided(instance: FlowInstance | None) -> FlowInstance:
    """The instance of a start or an event (they always decide a step, or raise)."""
    assert instance is not None
    return instance
