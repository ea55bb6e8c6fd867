"""Section 7 of the contract beyond ``check_scheduler_port`` (which holds register,
create_single_timer, a second handler refused, routes never crossing, unserved names waiting
and on_failed): handler names validated, on_failed beside an observer, recurring items for a
named handler, and MongoDB never claiming an unserved route (run on every adapter)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from flowsched import Recurrence, ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy
from flowsched.port import DeadLetter

S = timedelta(seconds=1)


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


def test_on_failed_gets_the_dead_letter_beside_the_observer(make_scheduler, clock, recorder):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=2))
    failed: list[DeadLetter] = []
    s.register("charge", recorder, on_failed=failed.append)
    s.register("other", recorder)
    recorder.fail("c-1")
    recorder.fail("o-1")
    s.create_single_timer("c-1", S, "charge", {"card": "x"})
    s.create_single_timer("o-1", S, "other")

    clock.advance(S)
    clock.advance(timedelta(seconds=3))

    [dead] = failed
    assert (dead.item.id, dead.item.handler, dead.item.payload) == ("c-1", "charge", {"card": "x"})
    assert dead.attempts == 2 and "handler failed for c-1" in dead.error
    assert sorted(d.item.id for d in s.dead_letters()) == ["c-1", "o-1"]  # o-1: no hook


def test_a_raising_on_failed_is_logged_and_changes_nothing(make_scheduler, clock, recorder, caplog):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=1))

    def broken(dead: DeadLetter) -> None:
        raise RuntimeError("hook is down")

    s.register("charge", recorder, on_failed=broken)
    recorder.fail("c-1")
    s.create_single_timer("c-1", S, "charge")
    s.create_single_timer("c-2", S, "charge")

    with caplog.at_level(logging.ERROR):
        clock.advance(S)

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
    [info] = here.timers(id_prefix="for-gamma").items  # not claimed, not started
    assert (info.state, info.node, info.attempts, info.handler) == ("scheduled", None, 0, "gamma")
    assert here.history("for-gamma") == []

    # A node that serves it gets it at once (a claim would have held it for a whole lease).
    there = make_scheduler(clock)
    there.register("gamma", recorder)
    assert there.run_due() == 1
    assert [(d.id, d.attempt) for d in recorder.deliveries] == [("for-gamma", 0)]


def test_a_recurring_schedule_can_be_addressed_to_a_named_handler(make_scheduler, clock, recorder):
    s = make_scheduler(clock)
    s.register("sweep", recorder)
    stored = s.schedule_recurring("sweep-no-shows", Recurrence.every(S * 60), handler="sweep")
    assert stored.handler == "sweep"

    for _ in range(2):
        clock.advance(S * 60)
    assert [(d.id, d.item.handler) for d in recorder.deliveries] == [
        ("sweep-no-shows", "sweep"),
        ("sweep-no-shows", "sweep"),
    ]
    assert s.exists("sweep-no-shows")
