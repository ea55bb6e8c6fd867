"""A handler raising ``Undeliverable`` dead-letters its timer at once, on both adapters:
with its reason, ``on_failed`` told, no redelivery, whatever ``max_attempts`` is."""

from __future__ import annotations

from datetime import timedelta

from flowsched import DeadLetter, ManualClock, SchedulerPort, Undeliverable


def test_undeliverable_is_a_dead_letter_now(
    scheduler: SchedulerPort, manual_clock: ManualClock
) -> None:
    calls: list[int] = []
    told: list[DeadLetter] = []

    def handler(item: object, attempt: int) -> None:
        calls.append(attempt)
        raise Undeliverable("model 'm-1' not found")

    scheduler.register("gone", handler, on_failed=told.append)
    scheduler.create_single_timer("t-1", timedelta(seconds=1), "gone", {"model": "m-1"})
    manual_clock.advance(timedelta(seconds=1))
    manual_clock.advance(timedelta(minutes=10))  # nothing is redelivered

    assert calls == [0]
    [dead] = scheduler.dead_letters()
    assert (dead.item.id, dead.attempts) == ("t-1", 1)
    assert dead.error == "Undeliverable: model 'm-1' not found"
    assert [d.item.id for d in told] == ["t-1"]
    assert not scheduler.exists("t-1")
    assert scheduler.requeue("t-1")
