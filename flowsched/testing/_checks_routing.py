"""Checks of named handlers and routing: ``register``, ``create_single_timer``, a second
``subscribe`` or ``register`` refused, items for a handler this scheduler lacks left waiting."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from flowsched.delivery import RedeliveryPolicy
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.testing._trial import CLOCK_START, TIMER, Guarantee, Recorder, Trial

__all__ = ["ROUTING_GUARANTEES"]

S = timedelta(seconds=1)


def _raises(error: type[Exception], call: Callable[[], object], what: str) -> None:
    try:
        call()
    except error:
        return
    raise AssertionError(f"{what} did not raise {error.__name__}")


def _routes_never_cross(t: Trial) -> None:
    s = t.scheduler
    by_kind, by_name = Recorder(t.clock), Recorder(t.clock)
    s.subscribe(TIMER, by_kind)
    s.register("alpha", by_name)
    t.timer("plain", t.at(1))
    s.schedule(ScheduleItem("named", TIMER, t.at(1), handler="alpha"))
    s.schedule(ScheduleItem("other", TIMER, t.at(1), handler="beta"))
    t.clock.advance(2 * S)
    assert by_name.ids == ["named"], f"the handler registered as 'alpha' received {by_name.ids}"
    assert by_kind.ids == ["plain"], f"the TIMER subscriber received {by_kind.ids}"
    assert s.exists("other"), "an item for a name nobody here serves was run or dropped"


def _a_second_handler_is_refused(t: Trial) -> None:
    s, first = t.scheduler, t.recorder
    s.subscribe(TIMER, first)
    s.register("send-reminder", first)

    def second(item: ScheduleItem, attempt: int) -> None:
        raise AssertionError("the second handler was called")

    _raises(ValueError, lambda: s.subscribe(TIMER, second), "a second subscribe() of TIMER")
    _raises(
        ValueError,
        lambda: s.register("send-reminder", second),
        "a second register() of 'send-reminder'",
    )
    t.timer("plain", t.at(1))
    s.schedule(ScheduleItem("named", TIMER, t.at(1), handler="send-reminder"))
    t.clock.advance(S)
    got = sorted(first.ids)
    assert got == ["named", "plain"], f"after a refused second handler, the first got {got}"


def _create_single_timer(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.register("expire-order", rec)
    stored = s.create_single_timer("expire-o-1", 5 * S, "expire-order", {"order": "o-1"})
    got = (stored.id, stored.kind, stored.handler, stored.due, stored.payload)
    expected = ("expire-o-1", TIMER, "expire-order", t.at(5), {"order": "o-1"})
    assert got == expected, f"stored (id, kind, handler, due, payload) {got}, expected {expected}"
    at = t.at(minutes=1)
    assert s.create_single_timer("nudge", at, "expire-order").due == at, "due at a datetime"
    s.create_single_timer("moved", at, "expire-order", {"v": 1})
    s.create_single_timer("moved", t.at(minutes=2), "expire-order", {"v": 2})  # replaces
    s.create_single_timer("gone", at, "expire-order")
    assert s.cancel("gone") is True, "cancel(timer_id) of a single timer did not return True"
    _raises(
        ValueError,
        lambda: s.create_single_timer("naive", datetime(2026, 1, 1), "expire-order"),
        "create_single_timer() at a naive datetime",
    )
    _raises(
        TypeError,
        lambda: s.create_single_timer("number", 30, "expire-order"),  # type: ignore[arg-type]
        "create_single_timer() with a number for delay",
    )
    _raises(
        ValueError,
        lambda: s.create_single_timer("big", S, "expire-order", {"blob": "x" * 2000}),
        "create_single_timer() with an arg over 1024 bytes",
    )
    assert not s.exists("big"), "a refused single timer was stored"
    t.clock.advance(timedelta(minutes=10))
    seen = [(d.id, d.item.payload, d.at - CLOCK_START) for d in rec.deliveries]
    expected_seen = [
        ("expire-o-1", {"order": "o-1"}, 5 * S),
        ("nudge", None, timedelta(minutes=1)),
        ("moved", {"v": 2}, timedelta(minutes=2)),
    ]
    assert seen == expected_seen, f"(id, payload, time) {seen}, expected {expected_seen}"


def _an_unserved_name_waits(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(ScheduleKind.ACTION_RETRY, Recorder(t.clock))
    s.create_single_timer("later", S, "gamma", {"n": 1})
    s.schedule(ScheduleItem("retry", ScheduleKind.ACTION_RETRY, t.at(1), handler="gamma"))
    t.clock.advance(timedelta(minutes=5))
    assert s.exists("later") and s.exists("retry"), "an item for a name nobody serves is gone"
    got = s.get("later")
    assert got is not None and got.payload == {"n": 1}, f"a waiting item reads as {got!r}"
    s.register("gamma", rec)
    t.clock.advance(timedelta(0))
    delivered = sorted((d.id, d.attempt) for d in rec.deliveries)
    expected = [("later", 0), ("retry", 0)]
    assert delivered == expected, f"once 'gamma' registered: {delivered}, expected {expected}"
    assert not s.exists("later") and not s.exists("retry"), "delivered items still scheduled"


def _on_failed_gets_the_dead_letter(t: Trial) -> None:
    s = t.scheduler
    letters: list[DeadLetter] = []

    def fails(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError("never works")

    s.register("flaky", fails, on_failed=letters.append)
    s.create_single_timer("t", S, "flaky", {"n": 1})
    t.clock.advance(10 * S)
    got = [(d.item.id, d.item.payload, d.attempts) for d in letters]
    assert got == [("t", {"n": 1}, 2)], f"on_failed received {got}, expected one dead letter"
    ids = [d.item.id for d in s.dead_letters()]
    assert ids == ["t"], f"dead_letters() lists {ids}"


ROUTING_GUARANTEES = (
    Guarantee(
        "an item addressed to a named handler reaches that handler, not the kind's",
        _routes_never_cross,
    ),
    Guarantee(
        "subscribe() of a kind, or register() of a name, that has a handler raises ValueError",
        _a_second_handler_is_refused,
    ),
    Guarantee(
        "create_single_timer() schedules a TIMER for a handler, by delay or datetime",
        _create_single_timer,
    ),
    Guarantee(
        "an item for a name this scheduler has not registered waits for it",
        _an_unserved_name_waits,
    ),
    Guarantee(
        "on_failed receives the dead letter of a named handler's item",
        _on_failed_gets_the_dead_letter,
        RedeliveryPolicy(max_attempts=2),
    ),
)
