"""Checks of virtual time: under a ManualClock one big ``advance`` is the same as many small
ones - due order, each handler at its item's due time, follow-ups inside the window."""

from __future__ import annotations

from datetime import datetime, timedelta

from flowsched.records import ScheduleItem
from flowsched.testing._trial import CLOCK_START, TIMER, Guarantee, Trial

__all__ = ["TIME_GUARANTEES"]

S = timedelta(seconds=1)


def _handlers_see_their_due_time(t: Trial) -> None:
    t.scheduler.subscribe(TIMER, t.recorder)
    for item_id, seconds in (("c", 9), ("a", 1), ("b", 4)):
        t.timer(item_id, t.at(seconds))
    t.clock.advance(20 * S)
    seen = [(d.id, d.at - CLOCK_START) for d in t.recorder.deliveries]
    expected = [("a", S), ("b", 4 * S), ("c", 9 * S)]
    assert seen == expected, (
        f"(id, clock.now() - start) seen by handlers {seen}, expected {expected}: inside "
        "advance() each handler must see its item's due time"
    )
    assert t.clock.now() == CLOCK_START + 20 * S, "the clock does not rest at the advance's target"


def _follow_ups_inside_the_window(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder

    def handler(item: ScheduleItem, attempt: int) -> None:
        rec(item, attempt)  # records, and fails "retried" once
        if item.id == "first":
            t.timer("follow-up", t.at(2))

    s.subscribe(TIMER, handler)
    rec.fail("retried", times=1)
    t.timer("first", t.at(1))
    t.timer("retried", t.at(2))
    t.clock.advance(10 * S)
    seen = [(d.id, d.attempt, d.at - CLOCK_START) for d in rec.deliveries]
    expected = [
        ("first", 0, S),
        ("retried", 0, 2 * S),
        ("follow-up", 0, 3 * S),
        ("retried", 1, 5 * S),
    ]
    assert seen == expected, (
        f"(id, attempt, time) {seen}, expected {expected}: a follow-up timer and a "
        "redelivery falling inside the window must be delivered in the same advance, in order"
    )


def _history(t: Trial, steps: list[timedelta]) -> list[str]:
    clock = t.new_clock(CLOCK_START)
    s = t.build(clock)
    history: list[str] = []
    failures = {"flaky": 2}

    def handler(item: ScheduleItem, attempt: int) -> None:
        history.append(f"{clock.now() - CLOCK_START} {item.id} attempt {attempt}")
        if item.id == "chain" and attempt == 0:
            s.schedule(ScheduleItem("chain-2", TIMER, clock.now() + 3 * S))
        if item.id == "canceller":
            s.cancel("cancelled")
        if failures.get(item.id, 0) > attempt:
            raise RuntimeError(f"{item.id} fails")

    s.subscribe(TIMER, handler)
    for item_id, seconds in (("flaky", 1), ("chain", 2), ("canceller", 6), ("cancelled", 7)):
        s.schedule(ScheduleItem(item_id, TIMER, CLOCK_START + seconds * S))
    for step in steps:
        clock.advance(step)
    history.append(f"rests at {clock.now() - CLOCK_START}")
    return history


def _one_big_advance_equals_small_ones(t: Trial) -> None:
    big = _history(t, [30 * S])
    small = _history(t, [S] * 30)
    assert big == small, (
        f"one 30 s advance gave {big}, thirty 1 s advances gave {small}: they must be the same"
    )


def _run_due_delivers_what_is_due_now(t: Trial) -> None:
    run_due = getattr(t.scheduler, "run_due", None)
    assert callable(run_due), "the scheduler has no run_due() (see ClockDriven)"
    t.scheduler.subscribe(TIMER, t.recorder)
    t.timer("a", t.at(1))
    t.timer("b", t.at(2))
    t.timer("later", t.at(60))
    t.clock.jump(5 * S)  # time moves, nothing is delivered on the way
    assert t.recorder.ids == [], "ManualClock.jump() delivered something"
    ran = run_due()
    assert (ran, t.recorder.ids) == (2, ["a", "b"]), (
        f"run_due() returned {ran} and delivered {t.recorder.ids}, expected 2 and ['a', 'b']"
    )


def _nothing_after_close(t: Trial) -> None:
    s = t.scheduler
    s.subscribe(TIMER, t.recorder)
    t.timer("t", t.at(1))
    s.close()
    s.close()  # idempotent
    t.clock.advance(5 * S)
    assert t.recorder.ids == [], "a closed scheduler delivered on advance()"


def _a_handler_may_advance_the_clock(t: Trial) -> None:
    seen: list[tuple[str, datetime]] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        seen.append((item.id, t.clock.now()))
        if item.id == "a":
            t.clock.advance(10 * S)

    t.scheduler.subscribe(TIMER, handler)
    t.timer("a", t.at(1))
    t.timer("b", t.at(8))
    t.clock.advance(S)
    ids = [item_id for item_id, _ in seen]
    assert ids == ["a", "b"], (
        f"delivered {ids}: an item falling due in the time a handler advanced over must be "
        "delivered (once) before the outer advance returns"
    )


TIME_GUARANTEES = (
    Guarantee(
        "inside advance(), each handler sees clock.now() equal to its item's due time",
        _handlers_see_their_due_time,
    ),
    Guarantee(
        "follow-ups and redeliveries due inside an advance's window are delivered in it",
        _follow_ups_inside_the_window,
    ),
    Guarantee(
        "one big advance() is the same as many small ones", _one_big_advance_equals_small_ones
    ),
    Guarantee(
        "run_due() delivers what is due at the clock's now", _run_due_delivers_what_is_due_now
    ),
    Guarantee("after close(), nothing is delivered (close() is idempotent)", _nothing_after_close),
    Guarantee("a handler may advance the clock itself", _a_handler_may_advance_the_clock),
)
