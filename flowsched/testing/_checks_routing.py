"""Checks of named handlers and routing: ``register``, ``create_single_timer``, a second
``subscribe`` refused, items for a handler this scheduler lacks left waiting."""

from __future__ import annotations

from datetime import timedelta

from flowsched.delivery import RedeliveryPolicy
from flowsched.port import DeadLetter, ScheduleItem
from flowsched.testing._trial import CLOCK_START, TIMER, Guarantee, Recorder, Trial

__all__ = ["ROUTING_GUARANTEES"]

S = timedelta(seconds=1)


def _raises_value_error(call: object, what: str) -> None:
    assert callable(call)
    try:
        call()
    except ValueError:
        return
    raise AssertionError(f"{what} did not raise ValueError")


def _named_items_reach_their_handler(t: Trial) -> None:
    s = t.scheduler
    by_kind, by_name = Recorder(t.clock), Recorder(t.clock)
    s.subscribe(TIMER, by_kind)
    s.register("send-reminder", by_name)
    s.schedule(ScheduleItem("named", TIMER, t.at(1), handler="send-reminder"))
    t.timer("plain", t.at(1))
    t.clock.advance(2 * S)
    assert by_name.ids == ["named"], f"the named handler received {by_name.ids}"
    assert by_kind.ids == ["plain"], f"the TIMER subscriber received {by_kind.ids}"


def _a_second_handler_is_refused(t: Trial) -> None:
    s = t.scheduler
    s.subscribe(TIMER, t.recorder)
    s.register("send-reminder", t.recorder)
    _raises_value_error(
        lambda: s.subscribe(TIMER, t.recorder), "subscribe() of a kind that has a handler"
    )
    _raises_value_error(
        lambda: s.register("send-reminder", t.recorder), "register() of a name registered twice"
    )


def _create_single_timer(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.register("expire-order", rec)
    stored = s.create_single_timer("expire-o-1", timedelta(minutes=5), "expire-order", {"o": 1})
    assert stored.due == t.at(minutes=5), f"due {stored.due}, expected now + 5 min"
    assert stored.kind is TIMER, f"kind {stored.kind!r}, expected TIMER"
    at = t.at(minutes=1)
    s.create_single_timer("expire-o-2", at, "expire-order", {"o": 2})
    s.create_single_timer("expire-o-3", at, "expire-order")
    s.create_single_timer("expire-o-3", t.at(minutes=2), "expire-order", {"o": 3})  # replaces
    s.create_single_timer("gone", at, "expire-order")
    assert s.cancel("gone") is True, "cancel(timer_id) of a single timer did not return True"
    t.clock.advance(timedelta(minutes=10))
    seen = [(d.id, d.item.payload, d.at - CLOCK_START) for d in rec.deliveries]
    expected = [
        ("expire-o-2", {"o": 2}, timedelta(minutes=1)),
        ("expire-o-3", {"o": 3}, timedelta(minutes=2)),
        ("expire-o-1", {"o": 1}, timedelta(minutes=5)),
    ]
    assert seen == expected, f"(id, payload, time) {seen}, expected {expected}"


def _an_unserved_name_waits(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    s.schedule(ScheduleItem("for-later", TIMER, t.at(1), handler="not-here-yet"))
    t.clock.advance(5 * S)
    assert rec.ids == [], f"an item for an unregistered name went to {rec.ids}"
    assert s.exists("for-later"), "an item for a name nobody registered was dropped"
    s.register("not-here-yet", rec)
    t.clock.advance(timedelta(0))
    assert rec.ids == ["for-later"], "a waiting item was not delivered once its name registered"


def _on_failed_gets_the_dead_letter(t: Trial) -> None:
    s = t.scheduler
    letters: list[DeadLetter] = []

    def fails(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError("never works")

    s.register("flaky", fails, on_failed=letters.append)
    s.create_single_timer("t", timedelta(0), "flaky")
    t.clock.advance(timedelta(0))
    got = [(d.item.id, d.attempts) for d in letters]
    assert got == [("t", 1)], f"on_failed received {got}, expected [('t', 1)]"


ROUTING_GUARANTEES = (
    Guarantee(
        "an item addressed to a named handler reaches that handler, not the kind's",
        _named_items_reach_their_handler,
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
        RedeliveryPolicy(max_attempts=1),
    ),
)
