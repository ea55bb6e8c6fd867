"""Section 7 of the contract: named handlers, create_single_timer, on_failed, and routing that
never loses a timer (run on every adapter)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest

from flowsched import Recurrence, ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy
from flowsched.port import DeadLetter

S = timedelta(seconds=1)


def test_registering_a_name_twice_raises_and_keeps_the_first_handler(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.register("send-reminder", recorder)
    with pytest.raises(ValueError, match="'send-reminder' is already registered"):
        s.register("send-reminder", lambda item, attempt: None)
    s.create_single_timer("r-1", S, "send-reminder")
    clock.advance(S)
    fire(s)
    assert recorder.ids == ["r-1"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "non-empty string"),
        (None, "non-empty string"),
        ("bad\nname", "control character"),
        ("x" * 201, "201 characters; the limit is 200"),
    ],
)
def test_a_bad_handler_name_is_refused_naming_it(make_scheduler, clock, name, message):
    s = make_scheduler(clock)
    with pytest.raises(ValueError, match=message):
        s.register(name, lambda item, attempt: None)
    with pytest.raises(ValueError, match=message):
        ScheduleItem("t", ScheduleKind.TIMER, clock.now(), handler=name or "")  # type: ignore[arg-type]


def test_subscribing_a_kind_twice_raises_and_keeps_the_first_handler(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(ScheduleKind.TIMER, recorder)
    with pytest.raises(ValueError, match="TIMER already has a handler"):
        s.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    s.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, clock.now() + S))
    clock.advance(S)
    fire(s)
    assert recorder.ids == ["t-1"]


def test_create_single_timer_with_a_delay_fires_once_with_its_arg_as_payload(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.register("expire-order", recorder)

    stored = s.create_single_timer("expire-o-1", 5 * S, "expire-order", {"order": "o-1"})

    assert (stored.id, stored.kind, stored.handler) == (
        "expire-o-1",
        ScheduleKind.TIMER,
        "expire-order",
    )
    assert stored.due == clock.now() + 5 * S and stored.payload == {"order": "o-1"}
    assert s.exists("expire-o-1")
    clock.advance(4 * S)
    fire(s)
    assert recorder.ids == []
    clock.advance(S)
    fire(s)
    [delivery] = recorder.deliveries
    assert (delivery.item.payload, delivery.item.handler, delivery.attempt) == (
        {"order": "o-1"},
        "expire-order",
        0,
    )
    assert delivery.at == stored.due
    assert not s.exists("expire-o-1")


def test_create_single_timer_at_an_aware_datetime(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.register("nudge", recorder)
    at = clock.now() + timedelta(minutes=3)

    assert s.create_single_timer("nudge-c1", at, "nudge").due == at
    with pytest.raises(ValueError, match="timezone-aware"):
        s.create_single_timer("naive", datetime(2026, 1, 1), "nudge")
    with pytest.raises(TypeError, match="timedelta or an aware datetime"):
        s.create_single_timer("number", 30, "nudge")  # type: ignore[arg-type]

    clock.advance(timedelta(minutes=3))
    fire(s)
    assert [(d.id, d.item.payload, d.at) for d in recorder.deliveries] == [("nudge-c1", None, at)]


def test_create_single_timer_replaces_and_cancels_by_timer_id(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.register("expire-order", recorder)
    s.create_single_timer("expire-o-1", 5 * S, "expire-order", {"v": 1})
    s.create_single_timer("expire-o-1", 10 * S, "expire-order", {"v": 2})  # extend the deadline
    s.create_single_timer("expire-o-2", 5 * S, "expire-order")
    assert s.cancel("expire-o-2") is True
    assert not s.exists("expire-o-2")
    assert s.cancel("expire-o-2") is False  # idempotent

    clock.advance(10 * S)
    fire(s)
    assert [(d.id, d.item.payload) for d in recorder.deliveries] == [("expire-o-1", {"v": 2})]


def test_an_arg_over_the_payload_limit_is_refused(make_scheduler, clock):
    s = make_scheduler(clock)
    with pytest.raises(ValueError, match=r"payload is .* bytes"):
        s.create_single_timer("big", S, "h", {"blob": "x" * 2000})
    assert not s.exists("big")


def test_named_and_kind_routes_never_cross(make_scheduler, clock, fire):
    s = make_scheduler(clock)
    by_kind: list[str] = []
    by_name: list[str] = []
    s.subscribe(ScheduleKind.TIMER, lambda item, attempt: by_kind.append(item.id))
    s.register("alpha", lambda item, attempt: by_name.append(item.id))
    s.schedule(ScheduleItem("plain", ScheduleKind.TIMER, clock.now() + S))
    s.create_single_timer("named", S, "alpha")
    s.create_single_timer("other", S, "beta")

    clock.advance(S)
    fire(s)
    assert (by_kind, by_name) == (["plain"], ["named"])
    assert s.exists("other")  # nobody here serves "beta": it is neither run nor completed


def test_an_unregistered_route_stays_scheduled_and_fires_once_registered(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.create_single_timer("later", S, "gamma", {"n": 1})
    s.schedule(ScheduleItem("retry", ScheduleKind.ACTION_RETRY, clock.now() + S, handler="gamma"))

    clock.advance(timedelta(minutes=5))
    fire(s)
    fire(s)
    assert s.exists("later") and s.exists("retry")
    assert s.get("later").payload == {"n": 1}  # type: ignore[union-attr]

    s.register("gamma", recorder)
    clock.advance(timedelta(0))
    fire(s)
    assert sorted(recorder.ids) == ["later", "retry"]
    assert [d.attempt for d in recorder.deliveries] == [0, 0]  # never counted as failures
    assert not s.exists("later") and not s.exists("retry")


def test_on_failed_gets_the_dead_letter_beside_the_observer(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=2))
    failed: list[DeadLetter] = []
    s.register("charge", recorder, on_failed=failed.append)
    s.register("other", recorder)
    recorder.fail("c-1")
    recorder.fail("o-1")
    s.create_single_timer("c-1", S, "charge", {"card": "x"})
    s.create_single_timer("o-1", S, "other")

    clock.advance(S)
    fire(s)
    clock.advance(timedelta(seconds=3))
    fire(s)

    [dead] = failed
    assert (dead.item.id, dead.item.handler, dead.item.payload) == ("c-1", "charge", {"card": "x"})
    assert dead.attempts == 2 and "handler failed for c-1" in dead.error
    assert sorted(d.item.id for d in s.dead_letters()) == ["c-1", "o-1"]  # o-1: no hook


def test_a_raising_on_failed_is_logged_and_changes_nothing(
    make_scheduler, clock, recorder, fire, caplog
):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=1))

    def broken(dead: DeadLetter) -> None:
        raise RuntimeError("hook is down")

    s.register("charge", recorder, on_failed=broken)
    recorder.fail("c-1")
    s.create_single_timer("c-1", S, "charge")
    s.create_single_timer("c-2", S, "charge")

    with caplog.at_level(logging.ERROR):
        clock.advance(S)
        fire(s)

    assert [d.item.id for d in s.dead_letters()] == ["c-1"]
    assert not s.exists("c-1") and not s.exists("c-2")
    assert sorted(recorder.ids) == ["c-1", "c-2"]
    assert "hook is down" in caplog.text
    assert s.requeue("c-1") is True  # the dead letter keeps its handler
    assert s.get("c-1").handler == "charge"  # type: ignore[union-attr]


def test_mongo_never_claims_an_unserved_route(make_scheduler, adapter_name, clock, recorder):
    if adapter_name == "memory":
        pytest.skip("claims are MongoDB's: the in-memory adapter is covered above")
    here = make_scheduler(clock)
    here.register("alpha", lambda item, attempt: None)
    here.create_single_timer("for-gamma", S, "gamma")
    clock.advance(S)

    assert here.run_due() == 0
    document = here._store.find("for-gamma")
    assert (document["claim"], document["deliveries"], document["route"]) == (None, 0, "h:gamma")

    # A node that serves it gets it at once (a claim would have held it for a whole lease).
    there = make_scheduler(clock)
    there.register("gamma", recorder)
    assert there.run_due() == 1
    assert [(d.id, d.attempt) for d in recorder.deliveries] == [("for-gamma", 0)]


def test_a_recurring_schedule_can_be_addressed_to_a_named_handler(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.register("sweep", recorder)
    stored = s.schedule_recurring("sweep-no-shows", Recurrence.every(S * 60), handler="sweep")
    assert stored.handler == "sweep"

    for _ in range(2):
        clock.advance(S * 60)
        fire(s)
    assert [(d.id, d.item.handler) for d in recorder.deliveries] == [
        ("sweep-no-shows", "sweep"),
        ("sweep-no-shows", "sweep"),
    ]
    assert s.exists("sweep-no-shows")
