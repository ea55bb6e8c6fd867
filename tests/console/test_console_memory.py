"""The console over a running scheduler's own calls: the in-memory schedulers (the list, its
filters and pages, the charts, the actions), and (duck-typed) an asyncio scheduler whose
``get``, ``dead_letters``, ``requeue`` and ``cancel`` are coroutines (no ``scheduled()``: no
list, no overview)."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

from console_kit import START, TOKEN, USERS, csrf_of, sign_in
from starlette.testclient import TestClient

from flowsched.clock import ManualClock
from flowsched.console import app
from flowsched.memory import AsyncInMemoryScheduler, InMemoryScheduler
from flowsched.port import DeadLetter, Recurrence, ScheduleItem, ScheduleKind

TIMER, RETRY = ScheduleKind.TIMER, ScheduleKind.ACTION_RETRY


def listed(console: TestClient, url: str) -> list[str]:
    """The ids a timers page lists, following its "next" links to the end."""
    seen: list[str] = []
    next_url: str | None = url
    while next_url:
        html = console.get(next_url).text
        seen += re.findall(r'class="timer-link" href="/timer\?id=([^"]+)"', html)
        following = re.search(r'href="(/timers\?[^"]*after=[^"]+)"', html)
        next_url = following.group(1).replace("&amp;", "&") if following else None
    return seen


def stocked(clock: ManualClock) -> InMemoryScheduler:
    """Twelve items: a-00..a-09 (flows f-0/f-1, due 1..10 min ahead), b-1 (a retry of handler
    billing, overdue) and b-2 (due in 3 h)."""
    scheduler = InMemoryScheduler(clock=clock)
    for n in range(10):
        due = START + timedelta(minutes=n + 1)
        scheduler.schedule(ScheduleItem(f"a-{n:02}", TIMER, due, f"f-{n % 2}"))
    scheduler.schedule(ScheduleItem("b-1", RETRY, START - timedelta(minutes=5), handler="billing"))
    scheduler.schedule(ScheduleItem("b-2", TIMER, START + timedelta(hours=3)))
    return scheduler


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
    with TestClient(app(scheduler, users=USERS, clock=clock)) as console:
        sign_in(console, "alice")
        page = console.get("/timer?id=m-1").text
        assert 'id="run-now"' in page
        data = {"csrf": csrf_of(page), "id": "m-1", "generation": str(stored.generation)}
        assert console.post("/timer/cancel", data=data).status_code == 200
        assert not scheduler.exists("m-1")
        audit = console.get("/timer?id=m-1").text
        assert "alice" in audit and "cancelled m-1" in audit


def test_requeue_over_an_async_scheduler(clock: ManualClock) -> None:
    scheduler = AsyncScheduler(clock)
    item = ScheduleItem("a-1", ScheduleKind.TIMER, START, handler="billing").with_generation(9)
    scheduler.dead["a-1"] = DeadLetter(item, 5, "RuntimeError: <b>down</b>", START)
    with TestClient(app(scheduler, token=TOKEN, clock=clock)) as console:
        sign_in(console)
        page = console.get("/dead").text
        assert "RuntimeError: &lt;b&gt;down&lt;/b&gt;" in page
        data = {"csrf": csrf_of(page), "id": "a-1", "generation": "9"}
        console.post("/dead/requeue", data=data)
        assert "a-1" in scheduler.items and not scheduler.dead
        assert "requeued a-1" in console.get("/timer?id=a-1").text
        assert "needs MongoDB" in console.get("/").text


def test_a_refused_action_over_memory_changes_nothing(clock: ManualClock) -> None:
    scheduler = InMemoryScheduler(clock=clock)
    stored = scheduler.schedule(ScheduleItem("m-2", ScheduleKind.TIMER, START + timedelta(hours=1)))
    with TestClient(app(scheduler, users=USERS, clock=clock)) as console:
        sign_in(console, "vera")  # a viewer
        page = console.get("/timer?id=m-2").text
        assert 'id="cancel"' not in page
        data = {"csrf": csrf_of(page), "id": "m-2", "generation": str(stored.generation)}
        assert console.post("/timer/cancel", data=data).status_code == 403
        assert scheduler.exists("m-2")
        audit = console.get("/audit?action=cancel").text
        assert "vera" in audit and "refused (role)" in audit


def test_live_fragment_is_a_fragment(client: Any) -> None:
    fragment = client().get("/overview/live?per=minute").text
    assert "<html" not in fragment and "due in the next 24 h" in fragment


def test_keyword_forms_of_app(clock: ManualClock, seeded: Any) -> None:
    scheduler = InMemoryScheduler(clock=clock)
    with TestClient(app(scheduler=scheduler)) as console:
        assert "needs MongoDB" not in console.get("/timers").text
    with TestClient(app(database=seeded, collection="timers", clock=clock)) as console:
        assert console.get("/timers").text.count("timer-link") == 50


def test_the_timers_list_over_memory_filters_and_pages(clock: ManualClock) -> None:
    with TestClient(app(stocked(clock), clock=clock)) as console:
        every = ["b-1"] + [f"a-{n:02}" for n in range(10)] + ["b-2"]
        assert listed(console, "/timers?limit=5") == every  # in due order, no gap, no repeat
        assert listed(console, "/timers?id=b-") == ["b-1", "b-2"]
        assert listed(console, "/timers?kind=action_retry") == ["b-1"]
        assert listed(console, "/timers?handler=billing") == ["b-1"]
        assert listed(console, "/timers?state=overdue") == ["b-1"]
        assert listed(console, "/timers?state=running") == []  # no claims in memory
        assert len(listed(console, "/timers?state=waiting")) == 11
        window = "due_from=2026-03-01T12:02:00%2B00:00&due_to=2026-03-01T12:05:00%2B00:00"
        assert listed(console, f"/timers?{window}") == ["a-01", "a-02", "a-03"]
        f1 = [f"a-{n:02}" for n in range(1, 10, 2)]
        assert listed(console, "/timers?flow=f-&limit=3") == every[1:11]  # due order
        assert listed(console, "/timers?flow=f-1&limit=2") == f1
        assert console.get("/timers?state=nope").status_code == 400


def test_the_overview_over_memory_charts_the_due_load(clock: ManualClock) -> None:
    with TestClient(app(stocked(clock), clock=clock)) as console:
        page = console.get("/").text
        assert "needs MongoDB" not in page
        assert "11 due in the next 24 h" in page  # b-1 is overdue: not ahead
        assert "11 due in the next 24 h" in console.get("/overview/live?per=minute").text


def test_run_now_over_memory_moves_the_timer_seen_and_is_audited(clock: ManualClock) -> None:
    scheduler = stocked(clock)
    fired: list[str] = []
    scheduler.subscribe(TIMER, lambda item, attempt: fired.append(item.id))
    stale = scheduler.get("a-05")
    assert stale is not None
    with TestClient(app(scheduler, token=TOKEN, clock=clock)) as console:
        sign_in(console)
        page = console.get("/timer?id=a-05").text
        data = {"csrf": csrf_of(page), "id": "a-05", "generation": str(stale.generation)}
        assert console.post("/timer/run-now", data=data).status_code == 200
        moved = scheduler.get("a-05")
        assert moved is not None and moved.due == clock.now()
        assert moved.generation != stale.generation
        clock.advance(timedelta(0))
        assert fired == ["a-05"]  # due now: delivered at once, the others still waiting
        assert "token" in console.get("/timer?id=a-05").text
        # A page shown before a change: the generation it carries is no longer the timer's.
        page = console.get("/timer?id=a-06").text
        data = {"csrf": csrf_of(page), "id": "a-06", "generation": "12345"}
        console.post("/timer/run-now", data=data)
        assert scheduler.get("a-06").due == START + timedelta(minutes=7)  # type: ignore[union-attr]
        assert "changed since the page was shown" in console.get("/timer?id=a-06").text


def test_run_now_refuses_a_recurring_timer(clock: ManualClock) -> None:
    scheduler = InMemoryScheduler(clock=clock)
    stored = scheduler.schedule_recurring("tick", Recurrence.every(timedelta(minutes=5)))
    due = stored.due
    with TestClient(app(scheduler, token=TOKEN, clock=clock)) as console:
        sign_in(console)
        page = console.get("/timer?id=tick").text
        assert 'id="run-now"' not in page
        data = {"csrf": csrf_of(page), "id": "tick", "generation": str(stored.generation)}
        console.post("/timer/run-now", data=data)
        assert scheduler.get("tick").due == due  # type: ignore[union-attr]
        assert "is recurring" in console.get("/timer?id=tick").text


def test_the_list_over_an_async_in_memory_scheduler(clock: ManualClock) -> None:
    async def stock() -> AsyncInMemoryScheduler:
        scheduler = AsyncInMemoryScheduler(clock=clock)
        for n in range(3):
            await scheduler.schedule(ScheduleItem(f"x-{n}", TIMER, START + timedelta(hours=n)))
        return scheduler

    scheduler = asyncio.run(stock())
    with TestClient(app(scheduler, clock=clock)) as console:
        assert listed(console, "/timers") == ["x-0", "x-1", "x-2"]
        assert "3 due in the next 24 h" in console.get("/").text
