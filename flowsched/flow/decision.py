"""Internal: a :class:`Decision` - everything one decision about one flow instance changes.

The planner fills a decision; the domain applies it in a fixed order: schedule the new timers
(idempotent: ids are deterministic), store the instance (fenced by its version), cancel the
obsolete timers, then invoke actions and tell the listeners. Scheduling before storing means
a crash between the two leaves at worst a stale timer, which is recognised and ignored when
it fires; cancelling after storing means a decision that loses a concurrent update never
cancels the winner's timers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flowsched.flow.events import ActionRequest
from flowsched.flow.instance import FlowInstance, change_in_place
from flowsched.flow.timeline import Happened, TimelineEntry
from flowsched.records import ScheduleItem

__all__ = ["Decision"]


@dataclass
class Decision:
    """The outcome of one decision at ``now`` about ``instance`` (the working copy)."""

    now: datetime
    instance: FlowInstance
    changed: bool = False
    schedules: list[ScheduleItem] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    cancel_flow: bool = False
    invocations: list[ActionRequest] = field(default_factory=list)
    # What happened, as (what, detail, config key, due): built into TimelineEntry objects
    # only when someone reads :attr:`timeline` (a listener, or debug logging).
    notes: list[tuple[Happened, str, str | None, datetime | None]] = field(default_factory=list)
    event: object | None = None
    # Whether ``instance`` is this decision's own copy (nobody else holds it yet).
    draft: bool = False

    def update(self, instance: FlowInstance) -> None:
        """Replace the working copy; the instance will be stored."""
        self.instance = instance
        self.changed = True
        self.draft = False

    def change(self, **fields: Any) -> None:
        """Change fields of the working copy; the instance will be stored. The first change
        of a decision copies the instance, later ones set fields of that private copy: one copy
        per decision, however many fields it changes."""
        if self.draft:
            change_in_place(self.instance, fields)
        else:
            self.instance = self.instance.evolve(**fields)
            self.draft = True
        self.changed = True

    def schedule(self, item: ScheduleItem) -> None:
        # A later schedule under the same id replaces an earlier one (as the port does).
        self.schedules = [s for s in self.schedules if s.id != item.id] + [item]

    def cancel(self, item_id: str) -> None:
        if item_id not in self.cancels:
            self.cancels.append(item_id)

    def cancellations(self) -> list[str]:
        """Ids to cancel: those not scheduled again in this same decision (re-entering a state
        reuses its ids; the new schedule already replaced the old one)."""
        scheduled = {s.id for s in self.schedules}
        return [c for c in self.cancels if c not in scheduled]

    def note(
        self,
        what: Happened,
        detail: str,
        config_key: str | None = None,
        due: datetime | None = None,
    ) -> None:
        self.notes.append((what, detail, config_key, due))

    @property
    def timeline(self) -> list[TimelineEntry]:
        """The notes as timeline entries, in order."""
        at, flow_id, flow = self.now, self.instance.flow_id, self.instance.flow
        return [TimelineEntry(at, flow_id, flow, *note) for note in self.notes]

    def ignore(self, detail: str) -> None:
        """Nothing to do: the decision changes nothing (and is a success)."""
        self.note(Happened.IGNORED, detail)
