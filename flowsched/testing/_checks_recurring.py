"""Checks of recurring items (``every``, cron): slots counted from the schedule, only the
latest due slot after a gap, a failed tick counted unless ``retry_failed``, replace and cancel
by id, local times across daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from flowsched.delivery import RedeliveryPolicy
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence
from flowsched.testing._checks_recurring_ends import ENDS_GUARANTEES
from flowsched.testing._trial import CLOCK_START, TIMER, Guarantee, Recorder, Trial

__all__ = ["RECURRING_GUARANTEES"]

HOUR = timedelta(hours=1)
MS = timedelta(milliseconds=1)
EVERY_HOUR = Recurrence.every(HOUR)
LONDON = ZoneInfo("Europe/London")


def _slot(n: int) -> datetime:
    return CLOCK_START + n * HOUR


def _ticks(rec: Recorder) -> list[tuple[datetime, datetime | None]]:
    """(slot, previous) of every delivery so far."""
    return [(d.item.due, d.item.previous) for d in rec.deliveries]


def _every_hour(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    stored = s.schedule_recurring("sweep", EVERY_HOUR)
    assert stored.due == _slot(1), f"first slot {stored.due}, expected an hour after scheduling"
    assert stored.recurrence == EVERY_HOUR.anchored(CLOCK_START), "the recurrence is not anchored"
    t.clock.advance(HOUR - MS)
    assert rec.deliveries == [], "a tick came before its slot"
    t.clock.advance(MS + 4 * HOUR)
    expected = [(_slot(n), _slot(n - 1) if n > 1 else None) for n in range(1, 6)]
    assert _ticks(rec) == expected, f"(slot, previous) {_ticks(rec)}, expected {expected}"
    times = [d.at for d in rec.deliveries]
    assert times == [_slot(n) for n in range(1, 6)], f"ticks ran at {times}"
    got = s.get("sweep")
    assert got is not None and (got.due, got.previous) == (_slot(6), _slot(5)), (
        f"after five ticks the item reads {got!r}"
    )


def _after_a_gap_only_the_latest_slot(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    s.schedule_recurring("sweep", EVERY_HOUR)
    t.clock.advance(5 * HOUR)
    del rec.deliveries[:]
    t.clock.jump(3 * HOUR)  # a gap: the scheduler was down
    t.clock.advance(timedelta(0))
    t.clock.advance(timedelta(0))  # a second look at the same time finds nothing more
    assert _ticks(rec) == [(_slot(8), _slot(5))], f"after a 3 h gap: {_ticks(rec)}"
    got = s.get("sweep")
    assert got is not None and got.due == _slot(9), f"next slot {got and got.due}"


def _a_slot_never_runs_twice(t: Trial) -> None:
    t.scheduler.subscribe(TIMER, t.recorder)
    t.scheduler.schedule_recurring("sweep", EVERY_HOUR)
    t.clock.advance(HOUR + timedelta(minutes=30))
    for _ in range(3):
        t.clock.advance(timedelta(minutes=9))  # up to 01:57
    assert _ticks(t.recorder) == [(_slot(1), None)], f"ticks {_ticks(t.recorder)}"


def _a_failed_tick_counts(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("sweep", times=1)
    s.schedule_recurring("sweep", EVERY_HOUR)
    t.clock.advance(HOUR + timedelta(minutes=5))  # well past any redelivery backoff
    assert _ticks(rec) == [(_slot(1), None)], f"a failed tick was repeated: {_ticks(rec)}"
    assert s.exists("sweep"), "a failed tick removed the recurring item"
    t.clock.advance(_slot(2) - t.clock.now())
    assert _ticks(rec) == [(_slot(1), None), (_slot(2), _slot(1))], f"ticks {_ticks(rec)}"
    attempts = [d.attempt for d in rec.deliveries]
    assert attempts == [0, 0], f"attempts {attempts}: a new slot starts from 0"


def _retry_failed_redelivers(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("sweep", times=2)
    s.schedule_recurring("sweep", Recurrence.every(HOUR, retry_failed=True))
    t.clock.advance(HOUR + timedelta(seconds=3) - MS)
    assert len(rec.deliveries) == 1, "a failed tick was retried before the 3 s backoff"
    t.clock.advance(MS + timedelta(seconds=6))
    seen = [(d.item.due, d.item.previous, d.attempt, d.at - _slot(1)) for d in rec.deliveries]
    expected = [
        (_slot(1), None, 0, timedelta(0)),
        (_slot(1), None, 1, timedelta(seconds=3)),
        (_slot(1), None, 2, timedelta(seconds=9)),
    ]
    assert seen == expected, f"(slot, previous, attempt, time) {seen}, expected {expected}"
    t.clock.advance(_slot(2) - t.clock.now())
    last = rec.deliveries[-1]
    got = (last.item.due, last.item.previous, last.attempt)
    assert got == (_slot(2), _slot(1), 0), f"the next tick was {got}"


def _retry_failed_dead_letter(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("sweep")
    every = Recurrence.every(HOUR, retry_failed=True)
    s.schedule_recurring("sweep", every)
    t.clock.advance(HOUR + timedelta(seconds=3))
    assert not s.exists("sweep"), "a recurring item that exhausted max_attempts is scheduled"
    letters = s.dead_letters()
    got = [(d.item.id, d.attempts, d.item.due) for d in letters]
    assert got == [("sweep", 2, _slot(1))], f"dead letters {got}"
    assert letters[0].item.recurrence == every.anchored(CLOCK_START), "recurrence lost"
    rec.fail("sweep", times=0)
    assert s.requeue("sweep"), "requeue() of a dead recurring item is not True"
    t.clock.advance(HOUR)
    slots = [d.item.due for d in rec.deliveries[2:]]
    assert slots == [_slot(1), _slot(2)], f"after requeue the ticks ran for {slots}"
    assert s.exists("sweep"), "a requeued recurring item stopped recurring"


def _cancel_stops_the_ticks(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    s.schedule_recurring("sweep", EVERY_HOUR, flow_id="f-1")
    s.schedule_recurring("other", EVERY_HOUR, flow_id="f-2")
    t.clock.advance(HOUR)
    assert s.cancel("sweep") and not s.cancel("sweep"), "cancel() of a recurring item: True once"
    assert s.cancel_flow("f-2") == 1, "cancel_flow() did not remove the recurring item"
    t.clock.advance(5 * HOUR)
    assert sorted(rec.ids) == ["other", "sweep"], f"ticks after cancel: {rec.ids}"
    assert not s.exists("sweep") and not s.exists("other"), "a cancelled recurring item exists"


def _replacing_restarts_the_count(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    s.schedule_recurring("sweep", EVERY_HOUR)
    t.clock.advance(HOUR + timedelta(minutes=30))
    replaced = s.schedule_recurring("sweep", Recurrence.every(2 * HOUR))
    assert replaced.due == t.at(hours=2), f"the replacement is due {replaced.due}"
    t.clock.advance(HOUR)
    assert len(rec.deliveries) == 1, "the replaced hourly schedule ticked again"
    t.clock.advance(HOUR)
    expected = [(_slot(1), None), (t.clock.now(), None)]
    assert _ticks(rec) == expected, f"ticks {_ticks(rec)}, expected {expected}"
    assert rec.deliveries[1].item.generation == replaced.generation, "not the replacement"


def _a_one_shot_replacement_fires_once(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    s.schedule_recurring("sweep", EVERY_HOUR)
    t.timer("sweep", t.at(hours=1))
    t.clock.advance(3 * HOUR)
    assert _ticks(rec) == [(_slot(1), None)], f"deliveries {_ticks(rec)}"
    assert rec.deliveries[0].item.recurrence is None, "the one-shot replacement recurred"
    assert not s.exists("sweep"), "the one-shot replacement is still scheduled"


def _payload_and_flow_travel(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    kind = ScheduleKind.PROCESSING_TIMEOUT
    s.subscribe(kind, rec)
    s.schedule_recurring("sweep", EVERY_HOUR, kind, "f-1", {"batch": 50})
    t.clock.advance(2 * HOUR)
    got = [(d.item.kind, d.item.flow_id, d.item.payload) for d in rec.deliveries]
    assert got == [(kind, "f-1", {"batch": 50})] * 2, f"(kind, flow_id, payload) {got}"
    first, second = rec.deliveries
    assert first.item.slot_key != second.item.slot_key, "two ticks share a slot_key"
    assert first.item.key == second.item.key, "two ticks of one schedule have different keys"


def _a_tick_that_cancels_or_replaces_itself(t: Trial) -> None:
    s = t.scheduler
    seen: list[str] = []

    def tick(item: ScheduleItem, attempt: int) -> None:
        seen.append(item.id)
        if item.id == "stop-me":
            s.cancel(item.id)
        else:
            t.timer(item.id, t.at(hours=10))

    s.subscribe(TIMER, tick)
    s.schedule_recurring("stop-me", EVERY_HOUR)
    s.schedule_recurring("replace-me", EVERY_HOUR)
    t.clock.advance(3 * HOUR)
    assert sorted(seen) == ["replace-me", "stop-me"], f"ticks {seen}"
    assert not s.exists("stop-me"), "a tick's own cancel was undone"
    replaced = s.get("replace-me")
    assert replaced is not None and replaced.recurrence is None, "a tick's replacement undone"
    assert replaced.due == _slot(11), f"the replacement is due {replaced.due}"


def _london_ticks(t: Trial, begin: datetime, expression: str, days: int) -> list[datetime]:
    clock = t.new_clock(begin)
    s = t.build(clock)
    rec = Recorder(clock)
    s.subscribe(TIMER, rec)
    s.schedule_recurring("nightly", Recurrence.cron(expression, "Europe/London"))
    clock.advance(timedelta(days=days, hours=6))
    return [d.item.due for d in rec.deliveries]


def _cron_across_dst(t: Trial) -> None:
    # Clocks go forward at 01:00 GMT on 29 March 2026 and back at 02:00 BST on 25 October.
    cases = [
        (datetime(2026, 3, 26, 12, tzinfo=UTC), [2, 2, 1, 1, 1, 1]),
        (datetime(2026, 10, 22, 12, tzinfo=UTC), [1, 1, 2, 2, 2, 2]),
    ]
    for begin, utc_hours in cases:
        slots = _london_ticks(t, begin, "0 2 * * *", 6)
        local = [(s.astimezone(LONDON).hour, s.astimezone(LONDON).minute) for s in slots]
        assert local == [(2, 0)] * 6, f"from {begin:%d %B}: local ticks {local}"
        assert [s.hour for s in slots] == utc_hours, f"from {begin:%d %B}: UTC hours wrong"
    # 01:30 does not exist on 29 March (that day's tick runs at 02:30 BST) and happens twice
    # on 25 October (once only).
    for begin, times in [
        (datetime(2026, 3, 27, 12, tzinfo=UTC), ["01:30", "02:30", "01:30"]),
        (datetime(2026, 10, 23, 12, tzinfo=UTC), ["01:30", "01:30", "01:30"]),
    ]:
        slots = _london_ticks(t, begin, "30 1 * * *", 3)[:3]
        local_times = [s.astimezone(LONDON).strftime("%H:%M") for s in slots]
        assert local_times == times, f"from {begin:%d %B}: local ticks {local_times}"


RECURRING_GUARANTEES = (
    Guarantee(
        "a recurring item ticks once per slot, counted from when it was scheduled",
        _every_hour,
    ),
    Guarantee(
        "after a gap only the latest due slot of a recurring item runs, once",
        _after_a_gap_only_the_latest_slot,
    ),
    Guarantee("a slot at or before the applied one never runs again", _a_slot_never_runs_twice),
    Guarantee(
        "a failed tick counts (no retry_failed): the next tick is the next slot",
        _a_failed_tick_counts,
    ),
    Guarantee(
        "with retry_failed a failed tick is redelivered with backoff", _retry_failed_redelivers
    ),
    Guarantee(
        "with retry_failed and max_attempts a failing tick becomes a dead letter",
        _retry_failed_dead_letter,
        RedeliveryPolicy(max_attempts=2),
    ),
    Guarantee("cancel() and cancel_flow() stop a recurring item", _cancel_stops_the_ticks),
    Guarantee("replacing a recurring item restarts its slot count", _replacing_restarts_the_count),
    Guarantee(
        "a one-shot item replacing a recurring one fires once",
        _a_one_shot_replacement_fires_once,
    ),
    Guarantee(
        "payload, flow_id and kind travel with every tick; each tick has its slot_key",
        _payload_and_flow_travel,
    ),
    Guarantee(
        "a tick that cancels or replaces its own item is not undone",
        _a_tick_that_cancels_or_replaces_itself,
    ),
    Guarantee(
        "a cron schedule in a time zone ticks at local time across daylight-saving changes",
        _cron_across_dst,
    ),
    *ENDS_GUARANTEES,  # until, max_runs, calendars
)
