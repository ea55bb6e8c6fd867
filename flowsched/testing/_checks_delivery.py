"""Checks of delivery: at least once, redelivery with backoff, fencing of replaced and
cancelled forms, failures of every kind, and dead letters."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from flowsched.delivery import RedeliveryPolicy
from flowsched.records import ScheduleItem
from flowsched.testing._trial import TIMER, Guarantee, Recorder, Trial

__all__ = ["DELIVERY_GUARANTEES"]

MS = timedelta(milliseconds=1)


def _walk_backoff(t: Trial, rec: Recorder, gaps: list[int]) -> None:
    """Advance to 1 ms before each expected redelivery (nothing), then onto it (one more)."""
    for attempt, gap in enumerate(gaps, start=1):
        t.clock.advance(timedelta(seconds=gap) - MS)
        assert len(rec.deliveries) == attempt, f"redelivery {attempt} came before {gap} s"
        t.clock.advance(MS)
        assert len(rec.deliveries) == attempt + 1, f"redelivery {attempt} missing after {gap} s"
        got = rec.deliveries[-1].attempt
        assert got == attempt, f"redelivery {attempt} was told attempt={got}"


def _default_backoff(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("t")
    t.timer("t", t.at(1))
    t.clock.advance(timedelta(seconds=1))
    assert [d.attempt for d in rec.deliveries] == [0], "the first delivery is not attempt 0"
    _walk_backoff(t, rec, [3, 6, 12, 24, 30, 30])
    assert s.exists("t"), "a failing item was dropped"
    keys = {d.item.key for d in rec.deliveries}
    assert len(keys) == 1, f"redeliveries of one schedule carry several keys: {sorted(keys)}"


def _due_moves_on_redelivery(t: Trial) -> None:
    s = t.scheduler
    s.subscribe(TIMER, t.recorder)
    t.recorder.fail("t")
    t.timer("t", t.at(0))
    t.clock.advance(timedelta(0))
    got = s.get("t")
    assert got is not None, "a failed item is gone"
    assert got.due == t.at(3), f"after a failure get().due is {got.due}, expected now + 3 s"


def _a_recovering_handler_completes(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("t", times=2)
    t.timer("t", t.at(0))
    t.clock.advance(timedelta(0))
    _walk_backoff(t, rec, [3, 6])
    assert not s.exists("t"), "an item whose handler returned is still scheduled"
    t.clock.advance(timedelta(minutes=5))
    attempts = [d.attempt for d in rec.deliveries]
    assert attempts == [0, 1, 2], f"attempts {attempts}: delivered again after success"


def _one_failure_holds_back_nothing(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("bad")
    t.timer("bad", t.at(1))
    t.timer("good", t.at(2))
    t.clock.advance(timedelta(seconds=2))
    assert rec.ids == ["bad", "good"], f"delivered {rec.ids}"
    assert s.exists("bad") and not s.exists("good"), "failed/succeeded items in the wrong place"


def _base_exceptions_are_failures(t: Trial) -> None:
    s = t.scheduler
    attempts: list[tuple[str, int]] = []
    errors = {"cancelled": asyncio.CancelledError, "exit": SystemExit}

    def handler(item: ScheduleItem, attempt: int) -> None:
        attempts.append((item.id, attempt))
        if attempt == 0:
            raise errors[item.id]()

    s.subscribe(TIMER, handler)
    for item_id in errors:
        t.timer(item_id, t.at(0))
    t.clock.advance(timedelta(0))
    assert s.exists("cancelled") and s.exists("exit"), "a BaseException completed the item"
    t.clock.advance(timedelta(seconds=3))
    got = sorted(attempts)
    expected = [("cancelled", 0), ("cancelled", 1), ("exit", 0), ("exit", 1)]
    assert got == expected, f"deliveries {got}: CancelledError/SystemExit not redelivered"


def _stale_completion_keeps_the_replacement(t: Trial) -> None:
    s = t.scheduler
    seen: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        seen.append(item.key)
        if len(seen) == 1:  # while the first form is being delivered, replace it
            t.timer("t", t.at(10))

    s.subscribe(TIMER, handler)
    first = t.timer("t", t.at(1))
    t.clock.advance(timedelta(seconds=1))
    assert seen == [first.key], f"delivered {seen}"
    assert s.exists("t"), "the completion of a replaced form removed its replacement"
    t.clock.advance(timedelta(seconds=10))
    assert len(seen) == 2 and seen[1] != first.key, f"the replacement was not delivered: {seen}"
    assert not s.exists("t"), "the replacement is still there after its delivery"


def _stale_failure_does_not_reschedule(t: Trial) -> None:
    s = t.scheduler
    seen: list[tuple[str, int]] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        seen.append((item.key, attempt))
        if len(seen) == 1:
            t.timer("t", t.at(10))
            raise RuntimeError("the old form fails after being replaced")

    s.subscribe(TIMER, handler)
    first = t.timer("t", t.at(1))
    t.clock.advance(timedelta(seconds=1))
    got = s.get("t")
    assert got is not None and got.due == t.at(10), "a stale failure moved the replacement"
    t.clock.advance(timedelta(seconds=3))  # when the old form would have been redelivered
    assert seen == [(first.key, 0)], f"the replaced form was redelivered: {seen}"
    t.clock.advance(timedelta(seconds=7))
    assert len(seen) == 2 and seen[1][1] == 0, f"the replacement was not delivered: {seen}"


def _cancelled_by_its_handler_then_failed(t: Trial) -> None:
    s = t.scheduler
    seen: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        seen.append(item.id)
        s.cancel(item.id)
        raise RuntimeError("failed after cancelling")

    s.subscribe(TIMER, handler)
    t.timer("t", t.at(1))
    t.clock.advance(timedelta(seconds=1))
    t.clock.advance(timedelta(minutes=5))
    assert seen == ["t"], f"an item its handler cancelled was redelivered: {seen}"
    assert not s.exists("t"), "an item its handler cancelled is still scheduled"


def _a_waiting_redelivery_is_replaced_cleanly(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("t", times=1)
    t.timer("t", t.at(1), payload={"v": 1})
    t.clock.advance(timedelta(seconds=1))  # fails; redelivery due in 3 s
    t.timer("t", t.at(5), payload={"v": 2})
    t.clock.advance(timedelta(seconds=3))
    assert len(rec.deliveries) == 1, "the replaced form was redelivered"
    t.clock.advance(timedelta(seconds=2))
    got = [(d.item.payload, d.attempt) for d in rec.deliveries]
    assert got == [({"v": 1}, 0), ({"v": 2}, 0)], f"deliveries {got}"


def _a_handler_cancels_a_sibling(t: Trial) -> None:
    s = t.scheduler
    delivered: list[str] = []
    cancelled: list[bool] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        delivered.append(item.id)
        if item.id == "a":
            cancelled.append(s.cancel("b"))

    s.subscribe(TIMER, handler)
    t.timer("a", t.at(0))
    t.timer("b", t.at(0) + MS)
    t.clock.advance(MS)
    assert cancelled == [True], "cancel() from a handler did not find the sibling"
    assert delivered == ["a"], f"a sibling cancelled by a handler was delivered: {delivered}"
    assert not s.exists("b"), "the cancelled sibling is still scheduled"


def _a_handler_replaces_a_sibling(t: Trial) -> None:
    s = t.scheduler
    delivered: list[tuple[str, object]] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        delivered.append((item.id, (item.payload or {}).get("v")))
        if item.id == "a":
            t.timer("b", t.at(hours=1), payload={"v": 2})

    s.subscribe(TIMER, handler)
    t.timer("a", t.at(0))
    t.timer("b", t.at(0) + MS, payload={"v": 1})
    t.clock.advance(MS)
    assert delivered == [("a", None)], f"the replaced sibling was delivered: {delivered}"
    t.clock.advance(timedelta(hours=1))
    assert delivered == [("a", None), ("b", 2)], f"deliveries {delivered}"


def _a_handler_cancels_its_flow(t: Trial) -> None:
    s = t.scheduler
    delivered: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        delivered.append(item.id)
        s.cancel_flow("f")

    s.subscribe(TIMER, handler)
    for n in range(3):
        t.timer(f"t{n}", t.at(0) + n * MS, flow_id="f")
    t.clock.advance(2 * MS)
    assert delivered == ["t0"], (
        f"items of a flow cancelled by a handler were delivered: {delivered}"
    )


def _settable_backoff(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("t")
    t.timer("t", t.at(0))
    t.clock.advance(timedelta(0))
    _walk_backoff(t, rec, [1, 2, 4, 4])


def _exhaust(t: Trial, attempts: int = 3) -> None:
    t.scheduler.subscribe(TIMER, t.recorder)
    t.recorder.fail("t", times=attempts)
    t.timer("t", t.at(0), payload={"order": "o-1"})
    t.clock.advance(timedelta(0))
    for _ in range(attempts - 1):
        t.clock.advance(timedelta(seconds=30))


def _dead_after_max_attempts(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    _exhaust(t)
    attempts = [d.attempt for d in rec.deliveries]
    assert attempts == [0, 1, 2], f"attempts {attempts} with max_attempts=3"
    assert not s.exists("t"), "a dead-lettered item is still scheduled"
    letters = s.dead_letters()
    assert len(letters) == 1, f"dead_letters() lists {len(letters)} items, expected 1"
    dead = letters[0]
    assert (dead.item.id, dead.attempts) == ("t", 3), f"dead letter {dead!r}"
    assert dead.item.payload == {"order": "o-1"}, "the dead letter lost the payload"
    assert "handler failed for t" in dead.error, f"the dead letter's error is {dead.error!r}"
    t.clock.advance(timedelta(hours=1))
    assert len(rec.deliveries) == 3, "a dead letter was delivered again"


def _requeue(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    _exhaust(t)
    assert s.requeue("nothing-here") is False, "requeue() of an unknown id is not False"
    assert s.requeue("t", due=t.at(minutes=1)) is True, "requeue() of a dead letter is not True"
    assert s.exists("t") and s.dead_letters() == [], "requeue() did not move the dead letter back"
    t.clock.advance(timedelta(seconds=59))
    assert len(rec.deliveries) == 3, "a requeued item fired before its due time"
    t.clock.advance(timedelta(seconds=1))
    assert rec.deliveries[-1].attempt == 0, "a requeued item does not start from attempt 0"
    assert len(rec.deliveries) == 4 and not s.exists("t"), "the requeued item was not delivered"


def _cancelled_while_dying(t: Trial) -> None:
    s = t.scheduler

    def handler(item: ScheduleItem, attempt: int) -> None:
        if item.id == "cancelled":
            assert s.cancel(item.id)
        raise RuntimeError("failed")

    s.subscribe(TIMER, handler)
    t.timer("cancelled", t.at(0))
    t.timer("died", t.at(0))
    t.clock.advance(timedelta(0))
    assert not s.exists("cancelled"), "an item cancelled by its failing handler is scheduled"
    ids = [d.item.id for d in s.dead_letters()]
    assert ids == ["died"], f"dead letters {ids}: a cancel must win over the failure after it"


def _requeue_after_reschedule(t: Trial) -> None:
    s = t.scheduler
    s.subscribe(TIMER, t.recorder)
    t.recorder.fail("t", times=1)
    t.timer("t", t.at(0), payload={"v": "old"})
    t.clock.advance(timedelta(0))
    assert [d.item.id for d in s.dead_letters()] == ["t"], "max_attempts=1 left no dead letter"
    newer = t.timer("t", t.at(hours=1), payload={"v": "new"})
    assert s.requeue("t") is False, "requeue() of a stale dead letter is not False"
    assert s.get("t") == newer, "requeue() overwrote an item scheduled after the death"
    assert s.dead_letters() == [], "the stale dead letter was not dropped"


ONE_TO_FOUR = RedeliveryPolicy(initial=timedelta(seconds=1), maximum=timedelta(seconds=4))
THREE_ATTEMPTS = RedeliveryPolicy(max_attempts=3)
ONE_ATTEMPT = RedeliveryPolicy(max_attempts=1)

DELIVERY_GUARANTEES = (
    Guarantee("a failing handler is redelivered after 3, 6, 12, 24, then 30 s", _default_backoff),
    Guarantee("a redelivered item's due time moves (get().due)", _due_moves_on_redelivery),
    Guarantee("a handler that returns completes the item", _a_recovering_handler_completes),
    Guarantee("one failing item does not hold back others", _one_failure_holds_back_nothing),
    Guarantee(
        "CancelledError and SystemExit from a handler are failed deliveries",
        _base_exceptions_are_failures,
    ),
    Guarantee(
        "a stale delivery's completion never removes the item that replaced it",
        _stale_completion_keeps_the_replacement,
    ),
    Guarantee(
        "a stale delivery's failure never reschedules the item that replaced it",
        _stale_failure_does_not_reschedule,
    ),
    Guarantee(
        "an item its own handler cancelled is not redelivered when the handler fails",
        _cancelled_by_its_handler_then_failed,
    ),
    Guarantee(
        "a redelivery waiting for its time is replaced cleanly",
        _a_waiting_redelivery_is_replaced_cleanly,
    ),
    Guarantee(
        "once cancel() has returned (even in a handler), the old form is never delivered",
        _a_handler_cancels_a_sibling,
    ),
    Guarantee(
        "once schedule() has returned (even in a handler), the replaced form is never delivered",
        _a_handler_replaces_a_sibling,
    ),
    Guarantee(
        "once cancel_flow() has returned (even in a handler), that flow's items are not delivered",
        _a_handler_cancels_its_flow,
    ),
    Guarantee("the redelivery backoff is settable", _settable_backoff, ONE_TO_FOUR),
    Guarantee(
        "an item that failed max_attempts times becomes a listed dead letter",
        _dead_after_max_attempts,
        THREE_ATTEMPTS,
    ),
    Guarantee("a dead letter can be requeued, from attempt 0", _requeue, THREE_ATTEMPTS),
    Guarantee(
        "an item cancelled while its last attempt fails is gone, not a dead letter",
        _cancelled_while_dying,
        ONE_ATTEMPT,
    ),
    Guarantee(
        "requeue() never overwrites an item scheduled after the death",
        _requeue_after_reschedule,
        ONE_ATTEMPT,
    ),
)
