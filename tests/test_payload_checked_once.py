"""A payload's JSON text is checked once: a text that passed the storable checks is kept
(bounded) and met again without its scans; a refused one is refused every time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flowsched import InMemoryScheduler, ScheduleItem, ScheduleKind, limits
from flowsched.delivery import Observer
from flowsched.limits import payload_text

DUE = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "payload",
    [{"n": 2**64}, {"s": "a\x00b"}, {"k\x00": 1}, {"blob": "x" * 1024}],
    ids=["int-beyond-64-bits", "nul-in-string", "nul-in-key", "over-1024-bytes"],
)
def test_a_refused_payload_is_refused_every_time(payload: dict[str, object]) -> None:
    for _ in range(3):
        with pytest.raises(ValueError, match="payload"):
            ScheduleItem("t", ScheduleKind.TIMER, DUE, payload=payload)


def test_equal_payloads_share_one_interned_text_met_again() -> None:
    first = payload_text({"flow": "Bench", "attempt": 1})
    again = payload_text({"flow": "Bench", "attempt": 1})
    assert first == '{"flow":"Bench","attempt":1}'
    assert again is first
    assert limits._PASSED[first] is first


def test_the_kept_texts_are_bounded_in_number_and_length() -> None:
    for n in range(limits._PASSED_MAX + 10):
        payload_text({"distinct": n})
    assert 0 < len(limits._PASSED) <= limits._PASSED_MAX
    long = payload_text({"long": "y" * limits._PASSED_CHARS})
    assert long not in limits._PASSED


def test_a_nineteen_digit_string_passes_after_the_walk_and_is_then_kept() -> None:
    text = payload_text({"reference": "1234567890123456789012"})
    assert text in limits._PASSED
    with pytest.raises(ValueError, match="beyond signed 64 bits"):
        payload_text({"reference": 1234567890123456789012})


class CountingObserver(Observer):
    def __init__(self) -> None:
        self.cancelled_ids: list[str] = []

    def cancelled(self, item_id: str) -> None:
        self.cancelled_ids.append(item_id)


def test_in_memory_cancel_and_cancel_flow_tell_the_observer_each_id() -> None:
    observer = CountingObserver()
    scheduler = InMemoryScheduler(observer=observer)
    try:
        for item_id in ("a", "b"):
            scheduler.schedule(ScheduleItem(item_id, ScheduleKind.TIMER, DUE, flow_id="f"))
        scheduler.schedule(ScheduleItem("c", ScheduleKind.TIMER, DUE))
        assert scheduler.cancel("c") is True
        assert scheduler.cancel("c") is False
        assert scheduler.cancel_flow("f") == 2
        assert scheduler.cancel_flow("f") == 0
    finally:
        scheduler.close()
    assert observer.cancelled_ids == ["c", "a", "b"]
