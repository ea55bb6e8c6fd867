"""``run_due`` interrupted by a handler (``KeyboardInterrupt``) loses nothing: outcomes that
finished are written, the interrupted and unstarted claims are given back (not counted as
failed deliveries), and the interrupt goes on to the caller."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched.delivery import RedeliveryPolicy
from flowsched.port import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_an_interrupted_batch_writes_what_finished_and_gives_back_the_rest(make, clock):
    scheduler = make(redelivery=RedeliveryPolicy(max_attempts=1))
    seen: list[str] = []
    interrupt = {"b"}

    def handler(item: ScheduleItem, attempt: int) -> None:
        seen.append(item.id)
        if item.id in interrupt:
            interrupt.discard(item.id)
            raise KeyboardInterrupt

    scheduler.subscribe(TIMER, handler)
    for n, name in enumerate("abc"):
        scheduler.schedule(ScheduleItem(name, TIMER, clock.now() + timedelta(milliseconds=n)))
    clock.advance(timedelta(seconds=1))
    with pytest.raises(KeyboardInterrupt):
        scheduler.run_due()
    assert seen == ["a", "b"]
    assert not scheduler.exists("a")  # its outcome was written

    # At once, not after a lease: b and c were given back, and with max_attempts=1 they are
    # delivered, not dead-lettered as lost deliveries.
    assert scheduler.run_due() == 2
    assert seen == ["a", "b", "b", "c"]
    assert scheduler.dead_letters() == []
    assert not scheduler.exists("b") and not scheduler.exists("c")
