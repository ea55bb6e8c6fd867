"""Internal: the simulation's clients — ``schedule`` and ``cancel`` calls on a node, by
the plan or from inside a handler, retried in virtual time when the database fails them."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import TYPE_CHECKING

from pymongo.errors import PyMongoError

from flowsched.errors import SchedulerUnavailable
from flowsched.records import ScheduleItem
from flowsched.recurrence import Recurrence
from flowsched.testing.simulation._node import KIND, SimNode
from flowsched.testing.simulation._plan import Cancel, Schedule
from flowsched.testing.simulation._world import EPOCH

if TYPE_CHECKING:
    from flowsched.testing.simulation._driver import Simulation

__all__ = ["Clients"]


class Clients:
    """The calls users make on the nodes; a failed one is retried a second later, unless a
    later call on the same item has been made meanwhile."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self._intent: dict[str, int] = {}

    def call(self, event: Schedule | Cancel) -> None:
        live = [n for n in self.sim.nodes if n.available(self.sim.now)]
        if not live:
            self.sim.at(self.sim.now + 1, lambda: self.call(event))
            return
        via = next((n for n in live if n.index >= event.via), live[0])
        self.operate(via, event, origin="client")

    def operate(self, node: SimNode, event: Schedule | Cancel, origin: str) -> None:
        """Call ``schedule``/``cancel`` on ``node``; on failure, retry in a second (unless
        a later call on the same item has been made meanwhile)."""
        item = event.item
        intent = self._intent[item] = self._intent.get(item, 0) + 1
        begun = self.sim.history.next_seq()
        try:
            if isinstance(event, Cancel):
                removed = node.scheduler.cancel(item)
                self.sim.history.op(self.sim.now, node.name, "cancel", item, None, begun)
                self.sim.log(
                    node.name, f"{origin} cancel {item}: {'removed' if removed else 'none'}"
                )
                return
            due = node.clock.now() + timedelta(seconds=event.due_in)
            recurrence = None
            if event.every is not None:
                every = timedelta(seconds=event.every)
                recurrence = Recurrence.every(every, start=due - every)
            stored = node.scheduler.schedule(ScheduleItem(item, KIND, due, recurrence=recurrence))
        except (SchedulerUnavailable, PyMongoError) as exc:
            self.sim.log(node.name, f"{origin} {event.describe()} failed: {type(exc).__name__}")
            found = self.sim.raw.find_one({"_id": item}, {"generation": 1})
            if found is not None:
                self.sim.generation(item, found["generation"])
            self.sim.at(self.sim.now + 1, lambda: self._retry(item, intent, event))
            return
        generation = self.sim.generation(item, stored.generation)
        kind = "schedule-recurring" if event.every is not None else "schedule"
        self.sim.history.op(self.sim.now, node.name, kind, item, generation, begun)
        when = (stored.due - EPOCH).total_seconds()
        self.sim.log(node.name, f"{origin} schedule {item}#{generation} due {when:.3f}s")

    def _retry(self, item: str, intent: int, event: Schedule | Cancel) -> None:
        if self._intent.get(item) == intent:
            self.call(event)

    def race(self, node: SimNode, rng: random.Random, race: str) -> None:
        """From inside a handler: cancel or replace an item, via this node or another."""
        running = self._running(node)
        if race == "replace-own" and running:
            target = running
        elif node.held and rng.random() < 0.6:
            target = str(rng.choice(node.held).item.id)  # one of this node's batch
        else:
            target = f"t{rng.randrange(self.sim.settings.timers)}"
        live = [n for n in self.sim.nodes if n.available(self.sim.now)]
        via = node if rng.random() < 0.6 or not live else rng.choice(live)
        if race == "cancel":
            self.operate(via, Cancel(self.sim.now, via.index, target), origin="handler")
        else:
            event = Schedule(self.sim.now, via.index, target, round(rng.uniform(0, 4), 3))
            self.operate(via, event, origin="handler")

    def _running(self, node: SimNode) -> str | None:
        for run in reversed(self.sim.history.runs):
            if run.node == node.name and run.end is None:
                return run.item
        return None
