"""Recurring items (``every``, cron) on every adapter, driven by a ManualClock.

Slots are counted from when the schedule was made; after a gap only the latest due slot runs,
once, told the previous applied slot; a failed tick still counts unless ``retry_failed``; a
ticked item moves on to its next slot and stays scheduled; replace and cancel work by id.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from flowsched import Recurrence, ScheduleItem, ScheduleKind
from flowsched.clock import ManualClock
from flowsched.delivery import RedeliveryPolicy

TIMER = ScheduleKind.TIMER
HOUR = timedelta(hours=1)
EVERY_HOUR = Recurrence.every(HOUR)
START = datetime(2026, 1, 1, tzinfo=UTC)  # the contract clock's start (see conftest.py)


def slot(n: int) -> datetime:
    return START + n * HOUR


def ticks(recorder) -> list[tuple[datetime, datetime | None]]:
    """(slot, previous) of every delivery so far."""
    return [(d.item.due, d.item.previous) for d in recorder.deliveries]


def step(s, clock, fire, delta: timedelta) -> None:
    clock.advance(delta)
    fire(s)


def test_every_hour_ticks_once_an_hour_from_when_it_was_scheduled(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    stored = s.schedule_recurring("sweep", EVERY_HOUR)
    assert stored.due == slot(1)
    assert stored.recurrence == EVERY_HOUR.anchored(START)

    step(s, clock, fire, HOUR - timedelta(milliseconds=1))
    assert recorder.deliveries == []
    step(s, clock, fire, timedelta(milliseconds=1))
    for _ in range(4):
        step(s, clock, fire, HOUR)

    assert ticks(recorder) == [(slot(n), slot(n - 1) if n > 1 else None) for n in range(1, 6)]
    assert [d.at for d in recorder.deliveries] == [slot(n) for n in range(1, 6)]
    assert s.exists("sweep")
    assert s.get("sweep").due == slot(6)  # type: ignore[union-attr]
    assert s.get("sweep").previous == slot(5)  # type: ignore[union-attr]


def test_after_a_gap_only_the_latest_slot_runs_once(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule_recurring("sweep", EVERY_HOUR)
    for _ in range(5):
        step(s, clock, fire, HOUR)
    del recorder.deliveries[:]

    clock.jump(3 * HOUR)  # a gap (the scheduler was down): nothing delivered on the way
    step(s, clock, fire, timedelta(0))
    fire(s)  # a second sweep at the same time finds nothing more to do

    assert ticks(recorder) == [(slot(8), slot(5))]
    assert s.get("sweep").due == slot(9)  # type: ignore[union-attr]


def test_a_slot_at_or_before_the_applied_one_never_runs_again(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule_recurring("sweep", EVERY_HOUR)
    step(s, clock, fire, HOUR + timedelta(minutes=30))
    for _ in range(3):
        step(s, clock, fire, timedelta(minutes=9))  # up to 01:57

    assert ticks(recorder) == [(slot(1), None)]


def test_a_failed_tick_counts_and_the_next_tick_is_the_next_slot(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    recorder.fail("sweep", times=1)
    s.schedule_recurring("sweep", EVERY_HOUR)

    step(s, clock, fire, HOUR)
    for _ in range(10):  # well past any redelivery backoff: the failed slot is not repeated
        step(s, clock, fire, timedelta(seconds=30))
    assert ticks(recorder) == [(slot(1), None)]
    assert s.exists("sweep")

    step(s, clock, fire, slot(2) - clock.now())
    assert ticks(recorder) == [(slot(1), None), (slot(2), slot(1))]
    assert [d.attempt for d in recorder.deliveries] == [0, 0]


def test_with_retry_failed_a_failed_tick_is_redelivered_with_backoff(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    recorder.fail("sweep", times=2)
    s.schedule_recurring("sweep", Recurrence.every(HOUR, retry_failed=True))

    step(s, clock, fire, HOUR)
    step(s, clock, fire, timedelta(seconds=3) - timedelta(milliseconds=1))
    assert len(recorder.deliveries) == 1  # not before the 3 s backoff
    step(s, clock, fire, timedelta(milliseconds=1))
    step(s, clock, fire, timedelta(seconds=6))
    assert [(d.item.due, d.item.previous, d.attempt) for d in recorder.deliveries] == [
        (slot(1), None, 0),
        (slot(1), None, 1),
        (slot(1), None, 2),
    ]
    assert [d.at - slot(1) for d in recorder.deliveries] == [
        timedelta(0),
        timedelta(seconds=3),
        timedelta(seconds=9),
    ]

    step(s, clock, fire, slot(2) - clock.now())
    assert (recorder.deliveries[-1].item.due, recorder.deliveries[-1].item.previous) == (
        slot(2),
        slot(1),
    )
    assert recorder.deliveries[-1].attempt == 0


def test_with_retry_failed_and_max_attempts_a_failing_tick_is_dead_lettered(
    make_scheduler, clock, recorder, fire
):
    policy = RedeliveryPolicy(max_attempts=2)
    s = make_scheduler(clock, redelivery=policy)
    s.subscribe(TIMER, recorder)
    recorder.fail("sweep")
    s.schedule_recurring("sweep", Recurrence.every(HOUR, retry_failed=True))

    step(s, clock, fire, HOUR)
    step(s, clock, fire, timedelta(seconds=3))

    assert not s.exists("sweep")
    [dead] = s.dead_letters()
    assert (dead.item.id, dead.attempts, dead.item.due) == ("sweep", 2, slot(1))
    assert dead.item.recurrence == Recurrence.every(HOUR, start=START, retry_failed=True)

    recorder.fail("sweep", times=0)
    assert s.requeue("sweep")
    step(s, clock, fire, timedelta(0))
    step(s, clock, fire, HOUR)
    assert [d.item.due for d in recorder.deliveries[2:]] == [slot(1), slot(2)]
    assert s.exists("sweep")


def test_cancel_stops_the_ticks(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule_recurring("sweep", EVERY_HOUR, flow_id="f-1")
    s.schedule_recurring("other", EVERY_HOUR, flow_id="f-2")
    step(s, clock, fire, HOUR)

    assert s.cancel("sweep")
    assert not s.cancel("sweep")
    assert s.cancel_flow("f-2") == 1
    step(s, clock, fire, 5 * HOUR)

    assert sorted(recorder.ids) == ["other", "sweep"]
    assert not s.exists("sweep")
    assert not s.exists("other")


def test_replacing_restarts_the_slot_count(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule_recurring("sweep", EVERY_HOUR)
    step(s, clock, fire, HOUR + timedelta(minutes=30))

    replaced = s.schedule_recurring("sweep", Recurrence.every(2 * HOUR))
    assert replaced.due == clock.now() + 2 * HOUR
    step(s, clock, fire, HOUR)
    assert len(recorder.deliveries) == 1  # the old hourly slot 2 is gone
    step(s, clock, fire, HOUR)

    assert ticks(recorder) == [(slot(1), None), (clock.now(), None)]
    assert recorder.deliveries[1].item.generation == replaced.generation


def test_a_one_shot_item_replacing_a_recurring_one_fires_once(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule_recurring("sweep", EVERY_HOUR)
    s.schedule(ScheduleItem("sweep", TIMER, clock.now() + HOUR))
    for _ in range(3):
        step(s, clock, fire, HOUR)

    assert ticks(recorder) == [(slot(1), None)]
    assert recorder.deliveries[0].item.recurrence is None
    assert not s.exists("sweep")


def test_the_payload_and_flow_travel_with_every_tick(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(ScheduleKind.PROCESSING_TIMEOUT, recorder)
    s.schedule_recurring("sweep", EVERY_HOUR, ScheduleKind.PROCESSING_TIMEOUT, "f-1", {"batch": 50})
    step(s, clock, fire, HOUR)
    step(s, clock, fire, HOUR)

    assert [(d.item.kind, d.item.flow_id, d.item.payload) for d in recorder.deliveries] == [
        (ScheduleKind.PROCESSING_TIMEOUT, "f-1", {"batch": 50})
    ] * 2
    first, second = recorder.deliveries
    assert first.item.slot_key != second.item.slot_key
    assert first.item.key == second.item.key


LONDON = ZoneInfo("Europe/London")


@pytest.mark.parametrize(
    ("begin", "utc_hours"),
    [
        # Clocks go forward at 01:00 GMT on Sunday 29 March 2026: from that day 02:00 local
        # is 02:00 BST = 01:00 UTC.
        (datetime(2026, 3, 26, 12, tzinfo=UTC), [2, 2, 1, 1, 1, 1]),
        # Clocks go back at 02:00 BST on Sunday 25 October 2026 (to 01:00 GMT): from that
        # day 02:00 local is 02:00 GMT = 02:00 UTC.
        (datetime(2026, 10, 22, 12, tzinfo=UTC), [1, 1, 2, 2, 2, 2]),
    ],
    ids=["march", "october"],
)
def test_cron_at_two_in_london_ticks_once_a_day_at_local_two_across_dst(
    make_scheduler, recorder, fire, begin, utc_hours
):
    clock = ManualClock(begin)
    recorder.clock = clock
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule_recurring("nightly", Recurrence.cron("0 2 * * *", "Europe/London"))

    for _ in range(6 * 4):  # six days in six-hour steps
        step(s, clock, fire, timedelta(hours=6))

    slots = [d.item.due for d in recorder.deliveries]
    assert [(t.astimezone(LONDON).hour, t.astimezone(LONDON).minute) for t in slots] == [(2, 0)] * 6
    local_days = [t.astimezone(LONDON).date() for t in slots]
    assert local_days == [begin.date() + timedelta(days=n) for n in range(1, 7)]
    assert [t.hour for t in slots] == utc_hours
    assert [d.item.previous for d in recorder.deliveries] == [None, *slots[:-1]]


@pytest.mark.parametrize(
    ("begin", "local_times"),
    [
        # 01:30 does not exist on 29 March 2026 (01:00 GMT jumps to 02:00 BST): that day's
        # tick runs at APScheduler's shifted time, 02:30 BST.
        (datetime(2026, 3, 27, 12, tzinfo=UTC), ["01:30", "02:30", "01:30"]),
        # 01:30 happens twice on 25 October 2026 (02:00 BST goes back to 01:00 GMT): once only.
        (datetime(2026, 10, 23, 12, tzinfo=UTC), ["01:30", "01:30", "01:30"]),
    ],
    ids=["missing-hour", "repeated-hour"],
)
def test_a_local_time_that_is_missing_or_repeated_ticks_once_that_day(
    make_scheduler, recorder, fire, begin, local_times
):
    clock = ManualClock(begin)
    recorder.clock = clock
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule_recurring("nightly", Recurrence.cron("30 1 * * *", "Europe/London"))

    for _ in range(3 * 24 * 4):  # three days in quarter hours: both 01:30s of 25 October
        step(s, clock, fire, timedelta(minutes=15))

    slots = [d.item.due.astimezone(LONDON) for d in recorder.deliveries]
    assert [t.strftime("%H:%M") for t in slots] == local_times
    assert [t.date() for t in slots] == [begin.date() + timedelta(days=n) for n in (1, 2, 3)]


def test_a_tick_that_cancels_or_replaces_its_own_item_is_not_undone(make_scheduler, clock, fire):
    s = make_scheduler(clock)
    seen: list[str] = []

    def tick(item: ScheduleItem, attempt: int) -> None:
        seen.append(item.id)
        if item.id == "stop-me":
            s.cancel(item.id)
        else:
            s.schedule(ScheduleItem(item.id, TIMER, clock.now() + 10 * HOUR))

    s.subscribe(TIMER, tick)
    s.schedule_recurring("stop-me", EVERY_HOUR)
    s.schedule_recurring("replace-me", EVERY_HOUR)
    for _ in range(3):
        step(s, clock, fire, HOUR)

    assert sorted(seen) == ["replace-me", "stop-me"]
    assert not s.exists("stop-me")
    replaced = s.get("replace-me")
    assert replaced is not None and replaced.recurrence is None
    assert replaced.due == slot(11)
