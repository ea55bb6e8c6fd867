"""Internal: ``FlowDomain``, which runs flow instances and handles their time through the port.

Build one with :meth:`FlowDomain.builder`. The domain talks to the scheduler only through
:class:`~flowsched.port.SchedulerPort`: it registers one named handler per flow it runs,
``flow:<FlowName>`` (:func:`~flowsched.flow.timers.flow_handler`), addresses every timer it
schedules (``ACTION_TIMEOUT``, ``ACTION_RETRY``, ``PROCESSING_TIMEOUT``) to its flow's handler,
and tells the kinds apart when one fires. So several domains with different flows can share
one scheduler (or one MongoDB collection), and during a rolling deployment each node fires
only the timers of the flows it runs. Two domains running the same flow on one scheduler are
refused (``ValueError`` naming the flow); the kinds stay free for the application's own
``subscribe``.

The decisions are :class:`~flowsched.flow.domain_base.DomainBase`'s (shared with the asyncio
face, :class:`~flowsched.flow.async_domain.AsyncFlowDomain`); this class applies them with
blocking calls.

Thread-safe: events and timers for one instance are decided one at a time (a per-instance
lock), different instances in parallel; the store's optimistic versioning keeps several
processes sharing one store from overwriting each other.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flowsched.errors import ConcurrentUpdateError
from flowsched.flow.decision import Decision
from flowsched.flow.domain_base import (
    EARLY_TIMER_REDELIVERIES,
    ActionAdapter,
    Decide,
    DomainBase,
    TimerAheadOfInstanceError,
    UnknownFlowError,
    decided,
)
from flowsched.flow.events import ActionRequest
from flowsched.flow.instance import FlowInstance
from flowsched.flow.locks import InstanceLocks
from flowsched.flow.store import FlowStore
from flowsched.port import SchedulerPort
from flowsched.records import ScheduleItem

if TYPE_CHECKING:
    from flowsched.flow.builder import FlowDomainBuilder

__all__ = [
    "EARLY_TIMER_REDELIVERIES",
    "ActionAdapter",
    "FlowDomain",
    "TimerAheadOfInstanceError",
    "UnknownFlowError",
]

log = logging.getLogger("flowsched.flow")


class FlowDomain(DomainBase):
    """Runs the registered flows; see the module docstring for the guarantees."""

    scheduler: SchedulerPort
    store: FlowStore

    def __init__(self, **parts: Any) -> None:
        """Use :meth:`builder`; this wires already-checked parts together (the keywords
        of :class:`~flowsched.flow.domain_base.DomainBase`)."""
        super().__init__(**parts)
        self._locks = InstanceLocks()
        self._register_on(self.scheduler, self._on_timer)

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
        return decided(self._run(flow_id, self._starting(flow, flow_id, offsets, data)))

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
        return decided(self._run(flow_id, self._handling(flow_id, event, offsets)))

    def instance(self, flow_id: str) -> FlowInstance | None:
        """The stored instance, or ``None``."""
        return self.store.load(flow_id)

    def timers(self, flow_id: str) -> list[ScheduleItem]:
        """What the instance is waiting on, as the scheduler holds it now, earliest first:
        the timeouts and retries of its current state's actions and its processing-time
        deadlines (empty for a finished or unknown instance)."""
        ids = self._timer_ids(self.store.load(flow_id))
        items = [item for item in map(self.scheduler.get, ids) if item is not None]
        return sorted(items, key=lambda item: item.due)

    # -- timer handler (called by the scheduler, possibly on its worker threads) ----------

    def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        """Every timer addressed to one of this domain's flows (see ``_timer_decision``).

        "Nothing to do" (unknown flow or instance, a flow that moved on) returns normally:
        raising would have the scheduler redeliver it forever."""
        decide = self._timer_decision(item, attempt)
        if decide is not None and item.flow_id is not None:
            self._run(item.flow_id, decide)

    # -- applying a step -------------------------------------------------------------------

    def _run(self, flow_id: str, decide: Decide) -> FlowInstance | None:
        for _ in range(self._conflict_retries):
            with self._locks.hold(flow_id):
                step = decide(self.store.load(flow_id), self.scheduler.now())
                if step is None:
                    return None
                try:
                    saved = self._apply(step)
                except ConcurrentUpdateError as exc:
                    self._conflict(flow_id, exc)
                    continue
            self._after(step)
            return saved
        raise self._gave_up(flow_id)

    def _apply(self, step: Decision) -> FlowInstance:
        """Schedule, store, cancel — in that order (see :mod:`flowsched.flow.decision`)."""
        self._check_started(self.scheduler, step)
        for item in step.schedules:
            self.scheduler.schedule(item)
        saved = step.instance
        if step.changed:
            if step.instance.version == 0:
                saved = self.store.insert(step.instance)
            else:
                saved = self.store.update(step.instance)
        if step.cancel_flow:
            # Every timer of the instance carries its flow id: one cancel_flow (one round
            # trip on MongoDB) removes the single cancels' items too.
            self.scheduler.cancel_flow(step.instance.flow_id)
        else:
            for item_id in step.cancellations():
                self.scheduler.cancel(item_id)
        return saved

    def _after(self, step: Decision) -> None:
        """Outside the lock: tell listeners, invoke actions, feed back their responses."""
        self._tell_all(step)
        for request in step.invocations:
            response = self._invoke(request)
            if response is not None:
                self.handle(request.flow_id, response)

    def _invoke(self, request: ActionRequest) -> object:
        adapter = self._adapter(request)
        if adapter is None:
            return None
        try:
            response = adapter(request)
            if response is not None and inspect.isawaitable(response):
                _unawaited(response, request)
            return response
        except Exception:
            self._adapter_failed(request)
            return None


def _unawaited(response: object, request: ActionRequest) -> None:
    """A synchronous domain's adapter returned an awaitable: close it (it never ran) and
    fail the invocation (its retries and timeout apply)."""
    if inspect.iscoroutine(response):
        response.close()
    raise TypeError(
        f"action adapter for {request.action} returned {type(response).__name__} (an "
        "awaitable) to a FlowDomain, which cannot await it: build the domain with "
        "build_async() (an AsyncFlowDomain)"
    )
