"""The local fence's bookkeeping: what makes a claim stale, and that it stays bounded."""

from __future__ import annotations

from datetime import UTC, datetime

from flowsched.mongo.local_writes import LocalWrites
from flowsched.port import ScheduleItem, ScheduleKind

DUE = datetime(2026, 3, 1, tzinfo=UTC)


def item(item_id: str, flow_id: str | None = None) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, DUE, flow_id)


def test_a_claim_is_stale_only_for_ids_and_flows_touched_after_its_stamp():
    fence = LocalWrites()
    fence.open()  # an older claim is held, so touches are recorded
    fence.touch("before")
    stamp = fence.open()
    fence.touch("x")
    fence.touch_flow("f")
    assert fence.stale(stamp, item("x"))
    assert fence.stale(stamp, item("y", "f"))
    assert not fence.stale(stamp, item("y", "g"))
    assert not fence.stale(stamp, item("before"))


def test_touches_are_forgotten_once_no_claim_is_held():
    fence = LocalWrites()
    stamp = fence.open()
    fence.touch("x")
    fence.close(stamp)
    later = fence.open()
    assert not fence.stale(later, item("x"))
    assert fence._ids == {}  # nothing kept for a claim that no longer exists


def test_touches_no_held_claim_can_see_are_pruned_while_claims_are_held():
    fence = LocalWrites()
    held = fence.open()  # some claim is always held: the sweeper of a busy node
    for n in range(5000):
        fence.touch(f"id-{n}")
        newer = fence.open()
        fence.close(held)
        held = newer
    assert fence._stamps  # never went idle
    assert len(fence._ids) <= 2048
