"""Internal: due times of a flow's timers (action timeouts, retries, deadlines) from the config.

The :class:`~flowsched.flow.planner.Planner` decides *what happens* to an instance; the
:class:`DueTimes` works out *when*: an action's timeout (first invocation + duration), its
retries (previous attempt + backoff, never at or after the timeout), processing-time deadlines
(offset + duration), and the configuration key that decided each.
"""

from __future__ import annotations

import random
from datetime import datetime

from flowsched.backoff import RetryPolicy
from flowsched.config import Explanation, SchedulingConfig
from flowsched.flow.decision import Decision
from flowsched.flow.definition import FlowDefinition
from flowsched.flow.events import ActionRequest
from flowsched.flow.instance import ActionRun, PendingDeadline
from flowsched.flow.offsets import deadline_base
from flowsched.flow.timeline import Happened
from flowsched.flow.timers import ActionTimer, DeadlineTimer
from flowsched.records import ScheduleItem, ScheduleKind

__all__ = ["DueTimes", "processing_key"]

_TIMEOUT = ScheduleKind.ACTION_TIMEOUT
_RETRY = ScheduleKind.ACTION_RETRY
_EXPLAIN_CACHE = 10_000


class DueTimes:
    """Adds to a :class:`Decision` the timers and invocations the configuration calls for."""

    def __init__(
        self, config: SchedulingConfig, rng: random.Random, *, deadline_in_retries: bool = True
    ) -> None:
        """``deadline_in_retries``: put the action's deadline in each retry's payload (needed
        only when retries outlive their state; the planner reads it from the run otherwise)."""
        self.config = config
        self._rng = rng
        self._deadline_in_retries = deadline_in_retries
        self._explained: dict[tuple[str, str, str], Explanation] = {}

    def invoke_first(self, decision: Decision, action: str) -> None:
        """First invocation of ``action`` on entering the decision's state: its timeout, its
        first retry and the request to the adapter."""
        instance = decision.instance
        policy = self.config.action(instance.flow, instance.state, action)
        deadline = policy.deadline(decision.now)  # None: no timeout, or one past the year 9999
        decision.change(actions=(*instance.actions, ActionRun(action, 1, decision.now, deadline)))
        timer = ActionTimer(instance.flow, instance.state, action, instance.entry, 2, deadline)
        if deadline is not None:
            self._add(
                decision,
                # Without the deadline in its payload (it is the run's, read from the
                # instance when it fires): the timeouts of every instance entering this
                # state then carry equal payloads, which share one string.
                ActionTimer(instance.flow, instance.state, action, instance.entry, 1).item(
                    instance.flow_id, _TIMEOUT, deadline
                ),
                f"action timeout of {action}",
                self.key(instance.flow, instance.state, action, "timeout-duration"),
            )
        self.schedule_retry(decision, timer, policy.retry, previous=decision.now)
        self.request(decision, instance.state, action, 1)

    def schedule_retry(
        self, decision: Decision, timer: ActionTimer, retry: RetryPolicy, previous: datetime
    ) -> None:
        """Schedule the retry making invocation ``timer.attempt`` (retry number attempt-1)."""
        n = timer.attempt - 1
        if n > retry.max_retries:
            return
        key = self.key(decision.instance.flow, timer.state, timer.action, "max-retries")
        due = retry.next_due(n, previous, None, self._rng)  # None here: past the year 9999
        if due is None:
            decision.note(
                Happened.IGNORED,
                f"retry {n} of {timer.action} not scheduled: its due time is past the year 9999",
                key,
            )
            return
        if timer.deadline is not None and due >= timer.deadline:
            decision.note(
                Happened.IGNORED,
                f"retry {n} of {timer.action} not scheduled: due {due.isoformat()} is at or"
                f" after its timeout {timer.deadline.isoformat()}",
                key,
            )
            return
        if not self._deadline_in_retries and timer.deadline is not None:
            # Without it, the retries of every instance in this state carry equal payloads,
            # which share one string (see ScheduleItem).
            timer = ActionTimer(timer.flow, timer.state, timer.action, timer.entry, timer.attempt)
        item = timer.item(decision.instance.flow_id, _RETRY, due)
        self._add(decision, item, f"retry {n} of {timer.action} (attempt {timer.attempt})", key)

    def arm_deadlines(self, definition: FlowDefinition, decision: Decision) -> None:
        """Entering a processing-time source: one deadline per configured destination."""
        instance = decision.instance
        source = instance.state
        configured = self.config.processing_times_from(instance.flow, source)
        for destination, policy in configured.items():
            if destination == source or destination not in definition.states:
                continue  # reported by the build-time check; nothing could ever reach it
            key = processing_key(instance.flow, source, destination)
            base = deadline_base(instance.offsets, policy.offset_id, decision.now, where=key)
            try:
                due = policy.deadline(base)
            except OverflowError:
                decision.note(
                    Happened.IGNORED,
                    f"processing time {source}->{destination} not scheduled: its deadline is"
                    " past the year 9999",
                    key,
                )
                continue
            timer = DeadlineTimer(
                instance.flow, source, destination, instance.entry, policy.offset_id
            )
            item = timer.item(instance.flow_id, due)
            pending = PendingDeadline(item.id, source, destination, due, instance.entry)
            # Re-entering the source re-arms its deadline from the new entry (ids differ by
            # entry number, so the earlier entry's timer is cancelled, not replaced).
            earlier = [
                d
                for d in decision.instance.deadlines
                if (d.source, d.destination) == (source, destination)
            ]
            for old in earlier:
                decision.cancel(old.item_id)
            kept = tuple(d for d in decision.instance.deadlines if d not in earlier)
            decision.change(deadlines=(*kept, pending))
            offset = f"offset {policy.offset_id}" if policy.offset_id else f"entry of {source}"
            self._add(decision, item, f"processing time {source}->{destination} from {offset}", key)

    def _add(self, decision: Decision, item: ScheduleItem, what: str, key: str | None) -> None:
        decision.schedule(item)
        decision.note(Happened.SCHEDULED, what, key, item.due)

    def request(self, decision: Decision, state: str, action: str, attempt: int) -> None:
        """Queue invocation ``attempt`` of ``action`` for the adapter (after the decision)."""
        instance = decision.instance
        decision.invocations.append(
            ActionRequest(
                flow_id=instance.flow_id,
                flow=instance.flow,
                state=state,
                action=action,
                attempt=attempt,
                offsets=instance.offsets,
                data=instance.data,
            )
        )
        decision.note(Happened.INVOKED, f"{action} in {state}, attempt {attempt}")

    def key(self, flow: str, state: str, action: str, kind: str) -> str | None:
        """The configuration key that set ``kind`` for this action (``None``: the default)."""
        triple = (flow, state, action)
        explained = self._explained.get(triple)
        if explained is None:
            explained = self.config.explain(flow, state, action)
            if len(self._explained) < _EXPLAIN_CACHE:  # configurations are immutable
                self._explained[triple] = explained
        return explained[kind].key


def processing_key(flow: str, source: str, destination: str) -> str:
    """The full key of a processing-time limit (the form the configuration requires)."""
    return f"ipf.flow.{flow}.processing-time.{source}.{destination}.timeout-duration"
