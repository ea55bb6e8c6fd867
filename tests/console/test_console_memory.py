"""The console over a running scheduler's own calls: InMemoryScheduler, and (duck-typed) an
asyncio scheduler whose ``get``, ``dead_letters``, ``requeue`` and ``cancel`` are coroutines."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from console_kit import START, TOKEN, csrf_of, sign_in
from starlette.testclient import TestClient

from flowsched.clock import ManualClock
from flowsched.console import app
from flowsched.memory import InMemoryScheduler
from flowsched.port import DeadLetter, ScheduleItem, ScheduleKind


class AsyncScheduler:
    """The read and act calls of an asyncio scheduler, as coroutines (a stand-in)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.items: dict[str, ScheduleItem] = {}
        self.dead: dict[str, DeadLetter] = {}

    async def get(self, item_id: str) -> ScheduleItem | None:
        return self.items.get(item_id)

    async def dead_letters(self) -> list[DeadLetter]:
        return list(self.dead.values())

    async def cancel(self, item_id: str) -> bool:
        return self.items.pop(item_id, None) is not None

    async def requeue(self, item_id: str) -> bool:
        dead = self.dead.pop(item_id, None)
        if dead is None:
            return False
        self.items[item_id] = dead.item.moved(self.clock.now())
        return True


def test_cancel_over_an_in_memory_scheduler_is_audited(clock: ManualClock) -> None:
    scheduler = InMemoryScheduler(clock=clock)
    stored = scheduler.schedule(ScheduleItem("m-1", ScheduleKind.TIMER, START + timedelta(hours=1)))
    with TestClient(app(scheduler, token=TOKEN, clock=clock)) as console:
        sign_in(console, "dana")
        page = console.get("/timer?id=m-1").text
        assert 'id="run-now"' not in page  # the port has no such call
        data = {"csrf": csrf_of(page), "id": "m-1", "generation": str(stored.generation)}
        assert console.post("/timer/cancel", data=data).status_code == 200
        assert not scheduler.exists("m-1")
        audit = console.get("/timer?id=m-1").text
        assert "dana" in audit and "cancelled m-1" in audit


def test_requeue_over_an_async_scheduler(clock: ManualClock) -> None:
    scheduler = AsyncScheduler(clock)
    item = ScheduleItem("a-1", ScheduleKind.TIMER, START, handler="billing").with_generation(9)
    scheduler.dead["a-1"] = DeadLetter(item, 5, "RuntimeError: <b>down</b>", START)
    with TestClient(app(scheduler, token=TOKEN, clock=clock)) as console:
        page = console.get("/dead").text
        assert "RuntimeError: &lt;b&gt;down&lt;/b&gt;" in page
        data = {"csrf": csrf_of(page), "id": "a-1", "generation": "9", "token": TOKEN}
        console.post("/dead/requeue", data=data)
        assert "a-1" in scheduler.items and not scheduler.dead
        assert "requeued a-1" in console.get("/timer?id=a-1").text
        assert "needs MongoDB" in console.get("/").text


def test_a_refused_action_over_memory_changes_nothing(clock: ManualClock) -> None:
    scheduler = InMemoryScheduler(clock=clock)
    stored = scheduler.schedule(ScheduleItem("m-2", ScheduleKind.TIMER, START + timedelta(hours=1)))
    with TestClient(app(scheduler, token=TOKEN, clock=clock)) as console:
        page = console.get("/timer?id=m-2").text
        data = {"csrf": csrf_of(page), "id": "m-2", "generation": str(stored.generation)}
        assert console.post("/timer/cancel", data={**data, "token": "nope-nope"}).status_code == 403
        assert scheduler.exists("m-2")
        assert "None recorded" in console.get("/timer?id=m-2").text


def test_live_fragment_is_a_fragment(client: Any) -> None:
    fragment = client().get("/overview/live?per=minute").text
    assert "<html" not in fragment and "due in the next 24 h" in fragment


def test_keyword_forms_of_app(clock: ManualClock, seeded: Any) -> None:
    scheduler = InMemoryScheduler(clock=clock)
    with TestClient(app(scheduler=scheduler)) as console:
        assert "needs MongoDB" in console.get("/timers").text
    with TestClient(app(database=seeded, collection="timers", clock=clock)) as console:
        assert console.get("/timers").text.count("timer-link") == 50
