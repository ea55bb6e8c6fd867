"""Retries re-invoke an action on the configured backoff, never at or after its timeout."""

from __future__ import annotations

import itertools
import random

from flowkit import FLOW, T0, HarnessFactory, M, S, SchemeRulesValidated

from flowsched.flow.timers import action_timer_id
from flowsched.port import ScheduleKind

VALIDATED = {"ValidateAgainstSchemeRules": SchemeRulesValidated()}

SEED_CHECK_FRAUD = """
Any.CheckingFraud.CheckFraud.max-retries = 4
Any.CheckingFraud.CheckFraud.backoff-type = "USER_DEFINED"
Any.CheckingFraud.CheckFraud.custom-backoffs = [10s,30m]
Any.CheckingFraud.CheckFraud.jitter-enabled = false
"""

SEED_LINEAR = """
Any.CheckingFraud.CheckFraud.initial-retry-interval = 1000
Any.CheckingFraud.CheckFraud.max-retries = 4
Any.CheckingFraud.CheckFraud.backoff-type = "LINEAR"
"""


def test_the_seed_check_fraud_example_makes_5_attempts_10s_then_every_30_minutes(
    harness: HarnessFactory,
) -> None:
    h = harness(SEED_CHECK_FRAUD, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")

    for offset in (10 * S, 30 * M + 10 * S, 60 * M + 10 * S, 90 * M + 10 * S, 600 * M):
        h.advance_to(offset)

    assert h.attempts("CheckFraud") == [
        0 * S,
        10 * S,
        30 * M + 10 * S,
        60 * M + 10 * S,
        90 * M + 10 * S,
    ]
    assert [c.request.attempt for c in h.calls if c.request.action == "CheckFraud"] == [
        1,
        2,
        3,
        4,
        5,
    ]
    assert h.state() == "CheckingFraud"  # no timeout configured: it waits for a response


def test_one_jump_past_every_retry_makes_all_5_attempts_at_their_planned_times(
    harness: HarnessFactory,
) -> None:
    """A retry counts from when the previous attempt was due, not from when it fired: one
    advance over the whole schedule (a scheduler catching up) still makes every attempt."""
    conf = SEED_CHECK_FRAUD + "Any.CheckingFraud.CheckFraud.timeout-duration = 2h"
    h = harness(conf, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")
    first_retry = next(t for t in h.domain.timers("tx-1") if t.kind is ScheduleKind.ACTION_RETRY)
    assert first_retry.due == T0 + 10 * S

    h.advance(2 * 60 * M)

    requests = [c.request for c in h.calls if c.request.action == "CheckFraud"]
    assert [r.attempt for r in requests] == [1, 2, 3, 4, 5]  # was [1, 2]: retries from 11:00
    assert h.state() == "FraudTimedOut"
    due = [e.due for e in h.timeline if e.what == "scheduled" and "retry" in e.detail]
    assert due == [T0 + 10 * S, T0 + 30 * M + 10 * S, T0 + 60 * M + 10 * S, T0 + 90 * M + 10 * S]


def test_linear_backoff_without_jitter_waits_1_2_3_4_seconds(harness: HarnessFactory) -> None:
    h = harness(
        SEED_LINEAR + "Any.CheckingFraud.CheckFraud.jitter-enabled = false", respond=VALIDATED
    )
    h.domain.start(FLOW, "tx-1")

    for _ in range(12):
        h.advance(1 * S)

    times = h.attempts("CheckFraud")
    assert [b - a for a, b in itertools.pairwise(times)] == [1 * S, 2 * S, 3 * S, 4 * S]


def test_linear_backoff_with_default_jitter_stays_within_20_percent(
    harness: HarnessFactory,
) -> None:
    h = harness(SEED_LINEAR, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")
    retry_id = action_timer_id("tx-1", "CheckingFraud", 2, "CheckFraud", ScheduleKind.ACTION_RETRY)

    while (item := h.scheduler.get(retry_id)) is not None:
        h.advance(item.due - h.clock.now())

    times = h.attempts("CheckFraud")
    waits = [b - a for a, b in itertools.pairwise(times)]
    assert len(waits) == 4
    for n, wait in enumerate(waits, start=1):
        assert n * S * 0.8 <= wait <= n * S * 1.2


def test_a_seeded_random_source_makes_jittered_retries_reproducible(
    harness: HarnessFactory,
) -> None:
    def due_of_first_retry(seed: int) -> object:
        h = harness(SEED_LINEAR, respond=VALIDATED, rng=random.Random(seed))
        h.domain.start(FLOW, f"tx-{seed}")
        item = h.scheduler.get(
            action_timer_id(
                f"tx-{seed}", "CheckingFraud", 2, "CheckFraud", ScheduleKind.ACTION_RETRY
            )
        )
        assert item is not None
        return item.due

    assert due_of_first_retry(7) == due_of_first_retry(7)


def test_retries_due_at_or_after_the_timeout_are_never_scheduled(harness: HarnessFactory) -> None:
    conf = (
        SEED_LINEAR
        + """
    Any.CheckingFraud.CheckFraud.jitter-enabled = false
    Any.CheckingFraud.CheckFraud.timeout-duration = 6s
    """
    )
    h = harness(conf, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")

    for _ in range(10):
        h.advance(1 * S)

    # 0, 1, 3 — the retry due at 6 s coincides with the timeout and is not scheduled.
    assert h.attempts("CheckFraud") == [0 * S, 1 * S, 3 * S]
    assert h.state() == "FraudTimedOut"
    assert (
        next(e.at for e in h.timeline if e.what == "entered" and "FraudTimedOut" in e.detail)
        == T0 + 6 * S
    )
