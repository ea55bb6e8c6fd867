"""Checks of the port's bookkeeping: schedule, replace, cancel, ``cancel_flow``, ``exists``,
``get``, payloads, and items of a kind nobody handles."""

from __future__ import annotations

from datetime import timedelta, timezone

from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.testing._trial import TIMER, Guarantee, Trial

__all__ = ["ITEM_GUARANTEES"]

MS = timedelta(milliseconds=1)


def _exists_until_fired(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    assert not s.exists("t"), "exists() is true before anything was scheduled"
    t.timer("t", t.at(5))
    assert s.exists("t"), "exists() is false right after schedule()"
    t.clock.advance(timedelta(seconds=5) - MS)
    assert rec.ids == [], "an item was delivered 1 ms before its due time"
    assert s.exists("t"), "exists() is false before the item's due time"
    t.clock.advance(MS)
    assert rec.ids == ["t"], f"an item due now was not delivered exactly once: {rec.ids}"
    assert not s.exists("t"), "exists() is still true after a successful delivery"
    assert s.get("t") is None, "get() still returns an item delivered successfully"


def _get_returns_the_item(t: Trial) -> None:
    due = t.at(5)
    t.timer("t", due, flow_id="f", payload={"order": "o-1"})
    got = t.scheduler.get("t")
    expected = ScheduleItem("t", TIMER, due, flow_id="f", payload={"order": "o-1"})
    assert got == expected, f"get() returned {got!r}, expected {expected!r}"
    assert t.scheduler.get("missing") is None, "get() of an unknown id is not None"


def _nothing_before_the_clock_moves(t: Trial) -> None:
    t.scheduler.subscribe(TIMER, t.recorder)
    t.timer("late", t.at(-1))
    assert t.recorder.ids == [], "an item was delivered before the clock was advanced"
    t.clock.advance(timedelta(0))
    assert t.recorder.ids == ["late"], "an overdue item was not delivered by advance(0)"


def _due_order(t: Trial) -> None:
    t.scheduler.subscribe(TIMER, t.recorder)
    for item_id, seconds in (("c", 3), ("a", 1), ("d", 4), ("b", 2)):
        t.timer(item_id, t.at(seconds))
    t.clock.advance(timedelta(seconds=10))
    assert t.recorder.ids == ["a", "b", "c", "d"], f"delivered in order {t.recorder.ids}"


def _later_replacement(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    t.timer("t", t.at(10), payload={"v": 1})
    t.timer("t", t.at(20), payload={"v": 2})
    t.clock.advance(timedelta(seconds=10))
    assert rec.ids == [], "the replaced form fired at its old due time"
    assert s.exists("t"), "the replacement is gone after the old due time passed"
    t.clock.advance(timedelta(seconds=10))
    payloads = [d.item.payload for d in rec.deliveries]
    assert payloads == [{"v": 2}], f"expected only the replacement delivered, got {payloads}"


def _earlier_replacement(t: Trial) -> None:
    t.scheduler.subscribe(TIMER, t.recorder)
    t.timer("t", t.at(20))
    t.timer("t", t.at(5))
    t.clock.advance(timedelta(seconds=5))
    assert t.recorder.ids == ["t"], "the earlier replacement did not fire at its time"
    t.clock.advance(timedelta(seconds=60))
    assert t.recorder.ids == ["t"], "the replaced form fired at its old due time too"


def _each_schedule_has_its_key(t: Trial) -> None:
    s = t.scheduler
    s.subscribe(TIMER, t.recorder)
    first = t.timer("t", t.at(5))
    second = t.timer("t", t.at(5))
    assert first.key != second.key, "two schedules under one id got the same key"
    got = s.get("t")
    assert got is not None and got.key == second.key, "get() does not carry the latest key"
    t.clock.advance(timedelta(seconds=5))
    keys = [d.item.key for d in t.recorder.deliveries]
    assert keys == [second.key], f"delivered keys {keys}, schedule() returned {second.key}"


def _cancelled_never_fires(t: Trial) -> None:
    s = t.scheduler
    s.subscribe(TIMER, t.recorder)
    t.timer("t", t.at(5))
    assert s.cancel("t") is True, "cancel() of a scheduled item did not return True"
    assert not s.exists("t"), "exists() is true after cancel()"
    t.clock.advance(timedelta(seconds=10))
    assert t.recorder.ids == [], "a cancelled item was delivered"


def _cancel_is_idempotent(t: Trial) -> None:
    s = t.scheduler
    s.subscribe(TIMER, t.recorder)
    assert s.cancel("never-scheduled") is False, "cancel() of an unknown id is not False"
    t.timer("t", t.at(5))
    assert s.cancel("t") is True, "first cancel() did not return True"
    assert s.cancel("t") is False, "second cancel() did not return False"
    t.timer("u", t.at(1))
    t.clock.advance(timedelta(seconds=1))
    assert s.cancel("u") is False, "cancel() after a successful delivery did not return False"


def _cancel_flow(t: Trial) -> None:
    s = t.scheduler
    s.subscribe(TIMER, t.recorder)
    due = t.at(5)
    for item_id in ("f1-a", "f1-b", "f1-c"):
        t.timer(item_id, due, flow_id="flow-1")
    t.timer("f2-a", due, flow_id="flow-2")
    t.timer("loose", due)
    assert s.cancel_flow("flow-9") == 0, "cancel_flow() of an unknown flow is not 0"
    assert s.cancel_flow("flow-1") == 3, "cancel_flow() did not count the 3 items it removed"
    left = [i for i in ("f1-a", "f1-b", "f1-c") if s.exists(i)]
    assert left == [], f"cancel_flow() left {left}"
    t.clock.advance(timedelta(seconds=5))
    delivered = sorted(t.recorder.ids)
    assert delivered == ["f2-a", "loose"], f"after cancel_flow() delivered {delivered}"


def _cancel_flow_follows_a_replacement(t: Trial) -> None:
    s = t.scheduler
    t.timer("t", t.at(5), flow_id="flow-1")
    t.timer("t", t.at(5), flow_id="flow-2")
    assert s.cancel_flow("flow-1") == 0, "cancel_flow() removed an item moved to another flow"
    assert s.cancel_flow("flow-2") == 1, "cancel_flow() missed an item replaced into its flow"
    assert not s.exists("t"), "the item is still there after cancel_flow()"


def _payload_reaches_the_handler(t: Trial) -> None:
    t.scheduler.subscribe(TIMER, t.recorder)
    payload = {"order": "o-1", "amount": 12.5, "tags": ["a", "é"], "nested": {"n": None}}
    t.timer("t", t.at(0), flow_id="flow-1", payload=payload)
    big = {"blob": "x" * 1013}  # exactly 1024 bytes of JSON
    stored = t.timer("big", t.at(0), payload=big)
    assert stored.payload == big, "a payload of exactly 1024 bytes was not stored as given"
    t.clock.advance(timedelta(0))
    got = {d.id: d.item for d in t.recorder.deliveries}
    assert set(got) == {"t", "big"}, f"delivered {sorted(got)}"
    item = got["t"]
    assert item.payload == payload, f"payload arrived as {item.payload!r}"
    assert item.flow_id == "flow-1", f"flow_id arrived as {item.flow_id!r}"
    assert item.kind is TIMER, f"kind arrived as {item.kind!r}"


def _an_aware_due_in_another_zone(t: Trial) -> None:
    t.scheduler.subscribe(TIMER, t.recorder)
    plus_two = timezone(timedelta(hours=2))
    t.timer("t", t.at(5).astimezone(plus_two))
    t.clock.advance(timedelta(seconds=5) - MS)
    assert t.recorder.ids == [], "a due time in UTC+2 fired early"
    t.clock.advance(MS)
    assert t.recorder.ids == ["t"], "a due time in UTC+2 did not fire at that instant"


def _an_unhandled_kind_waits(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    s.schedule(ScheduleItem("retry", ScheduleKind.ACTION_RETRY, t.at(1)))
    t.timer("timer", t.at(1))
    t.clock.advance(timedelta(seconds=5))
    assert rec.ids == ["timer"], f"delivered {rec.ids} with only TIMER subscribed"
    assert s.exists("retry"), "an item of a kind nobody handles was dropped"
    s.subscribe(ScheduleKind.ACTION_RETRY, rec)
    t.clock.advance(timedelta(0))
    assert rec.ids == ["timer", "retry"], "a waiting item was not delivered once subscribed"
    assert not s.exists("retry"), "a waiting item is still there after its delivery"


def _a_waiting_item_can_be_cancelled_or_replaced(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    kind = ScheduleKind.PROCESSING_TIMEOUT
    s.schedule(ScheduleItem("gone", kind, t.at(1)))
    s.schedule(ScheduleItem("moved", kind, t.at(1), payload={"v": 1}))
    t.clock.advance(timedelta(seconds=2))
    assert s.cancel("gone") is True, "cancel() of a waiting item did not return True"
    s.schedule(ScheduleItem("moved", kind, t.at(10), payload={"v": 2}))
    s.subscribe(kind, rec)
    t.clock.advance(timedelta(0))
    assert rec.ids == [], f"delivered {rec.ids}: a cancelled or replaced waiting form"
    t.clock.advance(timedelta(seconds=10))
    payloads = [d.item.payload for d in rec.deliveries]
    assert payloads == [{"v": 2}], f"delivered payloads {payloads}"


ITEM_GUARANTEES = (
    Guarantee("exists() is true from schedule() until a successful delivery", _exists_until_fired),
    Guarantee("get() returns the item as scheduled, None for an unknown id", _get_returns_the_item),
    Guarantee(
        "nothing fires until the clock is advanced; an overdue item fires on advance(0)",
        _nothing_before_the_clock_moves,
    ),
    Guarantee("due items are delivered in due order", _due_order),
    Guarantee(
        "a later replacement moves the deadline (schedule replaces by id)", _later_replacement
    ),
    Guarantee(
        "an earlier replacement fires once; the old due time brings nothing", _earlier_replacement
    ),
    Guarantee(
        "each schedule() gets its own key, and the delivered item carries it",
        _each_schedule_has_its_key,
    ),
    Guarantee("a cancelled item is never delivered", _cancelled_never_fires),
    Guarantee(
        "cancel() returns True once, then False; unknown ids are not an error",
        _cancel_is_idempotent,
    ),
    Guarantee("cancel_flow() removes exactly that flow's items and counts them", _cancel_flow),
    Guarantee(
        "cancel_flow() follows an item replaced into another flow",
        _cancel_flow_follows_a_replacement,
    ),
    Guarantee(
        "payload, flow_id and kind reach the handler as scheduled", _payload_reaches_the_handler
    ),
    Guarantee(
        "an aware due time in another zone means the same instant", _an_aware_due_in_another_zone
    ),
    Guarantee("an item of a kind nobody handles waits for a handler", _an_unhandled_kind_waits),
    Guarantee(
        "an item waiting for a handler can still be cancelled or replaced",
        _a_waiting_item_can_be_cancelled_or_replaced,
    ),
)
