"""Cancel removes a timer; cancelling what does not exist is not an error; cancel_flow
removes every timer of one flow instance and nothing else."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_a_cancelled_item_never_fires(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=5)))

    assert s.cancel("t") is True
    assert not s.exists("t")
    clock.advance(timedelta(seconds=10))
    fire(s)
    assert recorder.ids == []


def test_cancelling_a_missing_id_returns_false(make_scheduler, clock):
    s = make_scheduler(clock)
    assert s.cancel("never-scheduled") is False


def test_cancelling_twice_is_true_then_false(make_scheduler, clock):
    s = make_scheduler(clock)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=5)))
    assert s.cancel("t") is True
    assert s.cancel("t") is False


def test_cancelling_after_the_timer_fired_returns_false(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=1)))
    clock.advance(timedelta(seconds=1))
    fire(s)

    assert recorder.ids == ["t"]
    assert s.cancel("t") is False


def test_cancel_flow_removes_exactly_that_flows_items(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    due = clock.now() + timedelta(seconds=5)
    for item_id in ("f1-a", "f1-b", "f1-c"):
        s.schedule(ScheduleItem(item_id, TIMER, due, flow_id="flow-1"))
    s.schedule(ScheduleItem("f2-a", TIMER, due, flow_id="flow-2"))
    s.schedule(ScheduleItem("loose", TIMER, due))

    assert s.cancel_flow("flow-1") == 3
    assert [s.exists(i) for i in ("f1-a", "f1-b", "f1-c")] == [False, False, False]
    clock.advance(timedelta(seconds=5))
    fire(s)
    assert sorted(recorder.ids) == ["f2-a", "loose"]


def test_cancel_flow_of_an_unknown_flow_is_zero(make_scheduler, clock):
    s = make_scheduler(clock)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=5), flow_id="flow-1"))
    assert s.cancel_flow("flow-9") == 0
    assert s.exists("t")


def test_cancel_flow_follows_a_replacement_into_another_flow(make_scheduler, clock):
    s = make_scheduler(clock)
    due = clock.now() + timedelta(seconds=5)
    s.schedule(ScheduleItem("t", TIMER, due, flow_id="flow-1"))
    s.schedule(ScheduleItem("t", TIMER, due, flow_id="flow-2"))

    assert s.cancel_flow("flow-1") == 0
    assert s.cancel_flow("flow-2") == 1
    assert not s.exists("t")
