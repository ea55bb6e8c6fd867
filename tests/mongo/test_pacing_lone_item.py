"""The sweeper's pacing (flowsched.mongo.pacing): after a claim that found nothing due, the
next claim is at the next item's time, not a batch gap later (issue #37's wake-up p99)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched.mongo.pacing import BATCH_GAP, WAKE_SLACK, wait_after_claim

POLL = 5.0
LOOK = timedelta(seconds=5)


def test_after_due_items_the_next_claim_keeps_the_batch_gap() -> None:
    assert wait_after_claim(0.002, LOOK, POLL) == BATCH_GAP
    assert wait_after_claim(0.002, LOOK, POLL, found_due=True) == BATCH_GAP
    assert wait_after_claim(0.2, LOOK, POLL) == 0.2


def test_after_a_claim_that_found_nothing_due_the_next_is_at_the_items_time() -> None:
    assert wait_after_claim(0.002, LOOK, POLL, found_due=False) == pytest.approx(0.002 + WAKE_SLACK)
    # An item already due by then (the claim ran past its time): at once, plus the slack.
    assert wait_after_claim(-0.01, LOOK, POLL, found_due=False) == WAKE_SLACK


def test_a_lone_item_wait_is_capped_by_the_poll_and_none_ahead_keeps_the_range() -> None:
    assert wait_after_claim(60.0, LOOK, POLL, found_due=False) == POLL
    assert wait_after_claim(None, timedelta(milliseconds=100), POLL, found_due=False) == 0.1
