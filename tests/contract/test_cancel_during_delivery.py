"""Once ``cancel`` or ``schedule`` has returned, the old form of an item is never delivered
again - even when it was already taken for delivery in the same sweep as the handler that
cancelled or replaced it."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_a_handler_cancelling_a_sibling_due_at_the_same_time(make_scheduler, clock, fire):
    s = make_scheduler(clock)
    delivered: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        delivered.append(item.id)
        if item.id == "a":
            assert s.cancel("b")

    s.subscribe(TIMER, handler)
    s.schedule(ScheduleItem("a", TIMER, clock.now()))
    s.schedule(ScheduleItem("b", TIMER, clock.now() + timedelta(milliseconds=1)))
    clock.advance(timedelta(milliseconds=1))
    fire(s)
    assert delivered == ["a"]
    assert not s.exists("b")


def test_a_handler_replacing_a_sibling_due_at_the_same_time(make_scheduler, clock, fire):
    s = make_scheduler(clock)
    delivered: list[tuple[str, object]] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        delivered.append((item.id, (item.payload or {}).get("v")))
        if item.id == "a":
            s.schedule(ScheduleItem("b", TIMER, clock.now() + timedelta(hours=1), payload={"v": 2}))

    s.subscribe(TIMER, handler)
    s.schedule(ScheduleItem("a", TIMER, clock.now()))
    s.schedule(ScheduleItem("b", TIMER, clock.now() + timedelta(milliseconds=1), payload={"v": 1}))
    clock.advance(timedelta(milliseconds=1))
    fire(s)
    assert delivered == [("a", None)]
    assert s.get("b").payload == {"v": 2}  # type: ignore[union-attr]

    clock.advance(timedelta(hours=1))
    fire(s)
    assert delivered == [("a", None), ("b", 2)]


def test_a_handler_cancelling_its_flow(make_scheduler, clock, fire):
    s = make_scheduler(clock)
    delivered: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        delivered.append(item.id)
        s.cancel_flow("f")

    s.subscribe(TIMER, handler)
    for n in range(3):
        s.schedule(ScheduleItem(f"t{n}", TIMER, clock.now() + timedelta(milliseconds=n), "f"))
    clock.advance(timedelta(milliseconds=2))
    fire(s)
    assert delivered == ["t0"]
