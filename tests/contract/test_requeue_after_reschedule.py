"""A dead letter whose id has been scheduled again since it died is stale: ``requeue``
leaves the newer item as it is, returns ``False`` and drops the stale dead letter."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy

TIMER = ScheduleKind.TIMER


def test_requeue_does_not_overwrite_an_item_scheduled_since_it_died(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=1))
    s.subscribe(TIMER, recorder)
    recorder.fail("t", times=1)
    s.schedule(ScheduleItem("t", TIMER, clock.now(), payload={"v": "old"}))
    fire(s)
    assert [d.item.id for d in s.dead_letters()] == ["t"]

    newer = s.schedule(
        ScheduleItem("t", TIMER, clock.now() + timedelta(hours=1), payload={"v": "new"})
    )
    assert s.requeue("t") is False
    assert s.get("t") == newer
    assert s.dead_letters() == []
    assert s.requeue("t") is False
