"""Internal: the flow domain's decision logic — what a start, an event or a fired timer changes.

Pure apart from the random source used for jitter: no I/O, no clock (``now`` is passed in),
no locking. Each method returns a :class:`~flowsched.flow.decision.Decision` the domain applies; the
:class:`~flowsched.flow.due_times.DueTimes` works out the timers' due times.

The rules, kept here and in the timekeeper:

* Invoking an action schedules its timeout (first invocation + ``timeout-duration``) and its
  first retry; each retry re-invokes the action and schedules the next, due at the previous
  attempt's *planned* time (its due, not when it fired) plus
  ``RetryPolicy.delay(n)``. A retry due at or after the timeout is never scheduled.
* A completing response cancels the action's timeout and retries.
* Leaving a state cancels its action timeouts and (unless ``cancel_retries_on_exit`` is off,
  IPF's behaviour) its retries. Entering a terminal state cancels every timer of the instance.
* Entering a processing-time source schedules a deadline per configured destination at offset
  + duration; reaching the destination cancels it.
* A timer that no longer concerns the instance as it is now changes nothing.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from flowsched.config import SchedulingConfig
from flowsched.flow.decision import Decision
from flowsched.flow.definition import FlowDefinition
from flowsched.flow.due_times import DueTimes, processing_key
from flowsched.flow.events import ActionTimeoutEvent, ProcessingTimeElapsedEvent
from flowsched.flow.instance import FlowInstance, Offsets, json_object
from flowsched.flow.offsets import custom_offsets
from flowsched.flow.timeline import Happened
from flowsched.flow.timers import ActionTimer, DeadlineTimer, action_timer_id
from flowsched.records import ScheduleKind

__all__ = ["Planner"]

_TIMEOUT = ScheduleKind.ACTION_TIMEOUT
_RETRY = ScheduleKind.ACTION_RETRY


class Planner:
    """Turns starts, events and fired timers into :class:`Decision` s, using ``config``."""

    def __init__(
        self,
        config: SchedulingConfig,
        rng: random.Random,
        *,
        cancel_retries_on_exit: bool = True,
    ) -> None:
        # A retry that outlives its state (retries not cancelled on exit) must carry its
        # action's deadline; otherwise it is read from the run when the retry fires.
        self._time = DueTimes(config, rng, deadline_in_retries=not cancel_retries_on_exit)
        self._cancel_retries_on_exit = cancel_retries_on_exit

    # -- entry points ------------------------------------------------------------------

    def start(
        self,
        definition: FlowDefinition,
        flow_id: str,
        now: datetime,
        offsets: Mapping[str, datetime] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> Decision:
        """A new instance entering the flow's initial state."""
        custom = custom_offsets(offsets)
        base = FlowInstance(
            flow_id=flow_id,
            flow=definition.name,
            state="",
            entry=0,
            entered_at=now,
            offsets=custom,
            data=json_object(data, f"data of flow instance {flow_id!r}"),
        )
        decision = Decision(now, base, changed=True, draft=True)  # base: built here, held by no one
        names = ", ".join(f"{k}={v.isoformat()}" for k, v in custom.items())
        decision.note(Happened.STARTED, f"offsets: {names}" if names else "no custom offsets")
        self._enter(definition, decision, definition.initial)
        return decision

    def event(
        self,
        definition: FlowDefinition,
        instance: FlowInstance,
        event: object,
        now: datetime,
        offsets: Mapping[str, datetime] | None = None,
    ) -> Decision:
        """``event`` received by ``instance`` at ``now``: custom ``offsets`` that came with
        it recorded first, then response bookkeeping and the transition."""
        custom = custom_offsets(offsets)
        decision = Decision(now, instance, event=event)
        if instance.finished:
            decision.ignore(f"{type(event).__name__}: flow already finished in {instance.state}")
            return decision
        if custom:
            decision.update(replace(instance, offsets={**instance.offsets, **custom}))
        self._respond(definition, decision, event)
        self._transition(definition, decision, event)
        return decision

    def action_timeout(
        self,
        definition: FlowDefinition,
        instance: FlowInstance,
        timer: ActionTimer,
        now: datetime,
    ) -> Decision:
        """The action timeout ``timer`` fired: the flow receives an ActionTimeoutEvent."""
        decision = Decision(now, instance)
        stale = self._stale(instance, timer)
        run = instance.run(timer.action)
        if stale or run is None:
            decision.ignore(f"action timeout of {timer.action} in {timer.state}: {stale}")
            return decision
        decision.change(actions=instance.runs_with(replace(run, timed_out=True)))
        decision.cancel(
            action_timer_id(instance.flow_id, timer.state, timer.entry, timer.action, _RETRY)
        )
        event = ActionTimeoutEvent(
            flow_id=instance.flow_id,
            flow=instance.flow,
            state=timer.state,
            action=timer.action,
            deadline=timer.deadline or run.deadline,
            fired_at=now,
            attempts=run.attempts,
            config_key=self._time.key(instance.flow, timer.state, timer.action, "timeout-duration"),
        )
        decision.event = event
        decision.note(
            Happened.FIRED,
            f"action timeout: {timer.action} in {timer.state} after {run.attempts} attempt(s)",
            event.config_key,
        )
        self._transition(definition, decision, event)
        return decision

    def retry(
        self,
        definition: FlowDefinition,
        instance: FlowInstance,
        timer: ActionTimer,
        now: datetime,
        planned: datetime,
    ) -> Decision:
        """The retry ``timer`` fired: invoke the action again and schedule the next retry.

        ``planned`` is when this attempt was due (the fired item's ``due``): the next retry
        counts from it, not from ``now``, so a late delivery (a clock advanced past several
        retries at once, a scheduler catching up) keeps the configured schedule
        (:meth:`RetryPolicy.due_times`)."""
        decision = Decision(now, instance)
        current = instance.state == timer.state and instance.entry == timer.entry
        run = instance.run(timer.action) if current else None
        if instance.finished:
            decision.ignore(f"retry of {timer.action}: flow already finished in {instance.state}")
            return decision
        if current and (run is None or not run.waiting):
            decision.ignore(f"retry of {timer.action}: already answered or timed out")
            return decision
        if run is not None and run.attempts >= timer.attempt:
            # Delivery is at least once: this retry was already made (a redelivery).
            decision.ignore(f"retry of {timer.action}: attempt {timer.attempt} already made")
            return decision
        if not current and self._cancel_retries_on_exit:
            decision.ignore(f"retry of {timer.action}: {self._stale(instance, timer)}")
            return decision
        if run is not None:
            decision.change(actions=instance.runs_with(replace(run, attempts=timer.attempt)))
        policy = self._time.config.action(instance.flow, timer.state, timer.action)
        decision.note(
            Happened.FIRED,
            f"retry: {timer.action} in {timer.state}, attempt {timer.attempt}",
            self._time.key(instance.flow, timer.state, timer.action, "max-retries"),
        )
        deadline = timer.deadline or (run.deadline if run is not None else None)
        following = ActionTimer(
            timer.flow, timer.state, timer.action, timer.entry, timer.attempt + 1, deadline
        )
        self._time.schedule_retry(decision, following, policy.retry, previous=planned)
        self._time.request(decision, timer.state, timer.action, timer.attempt)
        return decision

    def deadline(
        self,
        definition: FlowDefinition,
        instance: FlowInstance,
        timer: DeadlineTimer,
        item_id: str,
        now: datetime,
    ) -> Decision:
        """The processing-time deadline fired: the flow receives ProcessingTimeElapsedEvent."""
        decision = Decision(now, instance)
        pending = next(
            (d for d in instance.deadlines if d.item_id == item_id and d.entry == timer.entry),
            None,
        )
        if instance.finished or pending is None:
            why = "flow already finished" if instance.finished else "destination reached"
            decision.ignore(f"processing time {timer.source}->{timer.destination}: {why}")
            return decision
        rest = tuple(d for d in instance.deadlines if d is not pending)
        decision.change(deadlines=rest)
        event = ProcessingTimeElapsedEvent(
            flow_id=instance.flow_id,
            flow=instance.flow,
            source=timer.source,
            destination=timer.destination,
            deadline=pending.due,
            fired_at=now,
            offset_id=timer.offset_id,
            config_key=processing_key(instance.flow, timer.source, timer.destination),
        )
        decision.event = event
        decision.note(
            Happened.FIRED,
            f"processing time elapsed: {timer.source}->{timer.destination}"
            f" (deadline {pending.due.isoformat()})",
            event.config_key,
        )
        self._transition(definition, decision, event)
        return decision

    # -- state changes -------------------------------------------------------------------

    def _transition(self, definition: FlowDefinition, decision: Decision, event: object) -> None:
        state = decision.instance.state
        transition = definition.transition_for(state, event)
        if transition is None:
            decision.note(Happened.IGNORED, f"{type(event).__name__}: no transition in {state}")
            return
        self._enter(definition, decision, transition.target)

    def _enter(self, definition: FlowDefinition, decision: Decision, target: str) -> None:
        if decision.instance.state:
            self._leave(decision)
        now = decision.now
        before = decision.instance
        # The latest entry: re-entering a state moves its offset.
        offsets = _offsets(before.offsets).with_time(target, now)
        reached = [d for d in before.deadlines if d.destination == target]
        for pending in reached:
            decision.cancel(pending.item_id)
            decision.note(
                Happened.CANCELLED,
                f"processing-time deadline {pending.source}->{target}: destination reached",
            )
        spec = definition.state(target)
        came_from = f" from {before.state}" if before.state else ""
        # One change for the whole entry (a terminal state also finishes the instance); the
        # decision's working copy may be changed in place: read nothing of ``before`` after it.
        decision.change(
            state=target,
            entry=before.entry + 1,
            entered_at=now,
            offsets=offsets,
            actions=(),
            deadlines=()
            if spec.terminal or not before.deadlines
            else tuple(d for d in before.deadlines if d not in reached),
            finished=spec.terminal,
        )
        decision.note(Happened.ENTERED, f"{target}{came_from}")
        if spec.terminal:
            decision.cancel_flow = True
            decision.note(Happened.FINISHED, f"terminal state {target}: every timer cancelled")
            return
        self._time.arm_deadlines(definition, decision)
        for action in spec.actions:
            self._time.invoke_first(decision, action)

    def _leave(self, decision: Decision) -> None:
        instance = decision.instance
        for run in instance.actions:
            if not run.waiting:
                continue  # answered or timed out: its timers are already gone
            kinds = [_TIMEOUT] if run.deadline is not None else []
            retry = self._time.config.action(instance.flow, instance.state, run.action).retry
            if self._cancel_retries_on_exit and run.attempts <= retry.max_retries:
                kinds.append(_RETRY)
            for kind in kinds:
                decision.cancel(
                    action_timer_id(
                        instance.flow_id, instance.state, instance.entry, run.action, kind
                    )
                )
            if kinds:
                what = " and ".join("timeout" if k is _TIMEOUT else "retries" for k in kinds)
                decision.note(Happened.CANCELLED, f"{what} of {run.action}: left {instance.state}")

    def _respond(self, definition: FlowDefinition, decision: Decision, event: object) -> None:
        response = definition.response_for(event)
        instance = decision.instance
        run = instance.run(response.action) if response else None
        if response is None or run is None or not run.waiting:
            return
        name = type(event).__name__
        if not response.completing:
            decision.note(Happened.RESPONDED, f"{name} to {run.action} (not completing)")
            return
        decision.change(actions=instance.runs_with(replace(run, completed=True)))
        for kind in (_TIMEOUT, _RETRY):
            decision.cancel(
                action_timer_id(instance.flow_id, instance.state, instance.entry, run.action, kind)
            )
        decision.note(Happened.RESPONDED, f"{name} completes {run.action}: timeout and retries off")

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _stale(instance: FlowInstance, timer: ActionTimer) -> str | None:
        """Why ``timer`` no longer concerns ``instance`` (``None``: it does)."""
        if instance.finished:
            return f"flow already finished in {instance.state}"
        if instance.state != timer.state:
            return f"flow moved on to {instance.state}"
        if instance.entry != timer.entry:
            return f"{timer.state} was entered again since"
        run = instance.run(timer.action)
        if run is None or not run.waiting:
            return f"{timer.action} already answered or timed out"
        return None


def _offsets(offsets: Mapping[str, datetime]) -> Offsets:
    return offsets if isinstance(offsets, Offsets) else Offsets(offsets.items())
