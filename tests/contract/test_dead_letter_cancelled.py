"""An item cancelled while its last allowed attempt runs is gone, not a dead letter: the
cancel wins over the failure that followed it."""

from __future__ import annotations

from flowsched import ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy

TIMER = ScheduleKind.TIMER


def test_a_handler_that_cancels_its_own_item_then_fails_leaves_no_dead_letter(
    make_scheduler, clock, fire
):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=1))

    def handler(item: ScheduleItem, attempt: int) -> None:
        assert s.cancel(item.id)
        raise RuntimeError("failed after cancelling itself")

    s.subscribe(TIMER, handler)
    s.schedule(ScheduleItem("t", TIMER, clock.now()))
    fire(s)
    assert not s.exists("t")
    assert s.dead_letters() == []


def test_an_item_that_died_is_still_a_dead_letter(make_scheduler, clock, fire):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=1))

    def handler(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError("boom")

    s.subscribe(TIMER, handler)
    s.schedule(ScheduleItem("t", TIMER, clock.now()))
    fire(s)
    assert [d.item.id for d in s.dead_letters()] == ["t"]
