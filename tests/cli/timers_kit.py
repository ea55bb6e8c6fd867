"""Helpers for the ``flowsched timers`` tests: seeding a namespace, reading rich tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from typer.testing import CliRunner

from flowsched.mongo import MongoScheduler, MongoTimerStore
from flowsched.mongo.documents import dead_letter_document
from flowsched.mongo.store import TimerStore
from flowsched.port import DeadLetter, ScheduleItem, ScheduleKind, kind_route

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
Result = tuple[int, str, str]
runner = CliRunner(env={"FLOWSCHED_MONGO_URI": None, "FLOWSCHED_CONFIG": None})  # defaults


def run(app: Any, args: list[str]) -> Result:
    result = runner.invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def rows(table: str) -> list[list[str]]:
    """The cells of each row of a rich table (box-drawing borders removed)."""
    return [
        [cell.strip() for cell in line.strip()[1:-1].split("│")]
        for line in table.splitlines()
        if line.startswith("│")
    ]


def ids(table: str) -> list[str]:
    """The first column of each row that starts one (continuation lines have it empty)."""
    return [row[0] for row in rows(table) if row[0]]


class Namespace:
    """A scheduler namespace to seed: items via MongoScheduler, claims via the timer store a
    node's core claims through, dead letters via the document store (exactly the documents
    the scheduler itself writes)."""

    def __init__(self, collection: Any, clock: Any) -> None:
        self.collection = collection
        self.clock = clock
        self.scheduler = MongoScheduler(collection, node_id="seed", clock=clock)
        self.store = TimerStore(collection)
        self.timers = MongoTimerStore(collection, clock=clock, node="seed")

    def timer(
        self,
        item_id: str,
        due_in: timedelta,
        kind: ScheduleKind = ScheduleKind.TIMER,
        flow_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> ScheduleItem:
        due = self.clock.now() + due_in
        return self.scheduler.schedule(ScheduleItem(item_id, kind, due, flow_id, payload))

    def claim(self, kind: ScheduleKind, owner: str, lease: timedelta) -> list[str]:
        """Claim every due item of ``kind`` as node ``owner`` does (a MongoDB node starts its
        claims as it claims them); the ids claimed."""
        claims = self.timers.claim_started([kind_route(kind)], owner, lease, 100)
        return [claim.item.id for claim in claims]

    def dead_letter(self, item_id: str, error: str, died_ago: timedelta, **item: Any) -> None:
        now = self.clock.now()
        kind = item.pop("kind", ScheduleKind.ACTION_RETRY)
        dead_item = ScheduleItem(item_id, kind, now - died_ago, **item).with_generation(7)
        dead = DeadLetter(dead_item, 5, error, now - died_ago)
        self.store.run(self.store.put_dead_letters_steps([dead_letter_document(dead)]))
