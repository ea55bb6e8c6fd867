"""The start check's rule, without a database (:mod:`flowsched.mongo.start_check`): which
claims may start without a check, and which claims a check covers. A fake monotonic clock,
so no timing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flowsched.mongo.leases import HeldLeases
from flowsched.mongo.settlement import Claim
from flowsched.mongo.start_check import StartChecks
from flowsched.port import ScheduleItem, ScheduleKind

DUE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _claims(*ids: str) -> list[Claim]:
    return [Claim(ScheduleItem(i, ScheduleKind.TIMER, DUE), 0, "token") for i in ids]


def _checks(clock: Monotonic) -> StartChecks:
    no_store: Any = None  # check_steps is not called here
    return StartChecks(no_store, HeldLeases(timedelta(seconds=30)), monotonic=clock)


def test_a_claim_just_won_is_not_its_own_check() -> None:
    # Counting the claim's answer as the check (no find when the handler starts at once)
    # brought back the stale starts: see the start_check module's docstring.
    clock = Monotonic()
    checks = _checks(clock)
    [a] = _claims("a")
    checks.queued([a])
    checks.taken(a)
    assert checks.verdict(a) is None  # the worker checks it before the handler


def test_a_check_covers_the_claims_other_workers_took_but_have_not_asked_about() -> None:
    # Three idle workers take a claim each from the queue; the first to ask sends the check.
    # It covers the other two (they wait for its answer), so the wave costs one find, not
    # three in a row.
    clock = Monotonic()
    checks = _checks(clock)
    a, b, c, d = _claims("a", "b", "c", "d")
    checks.queued([a, b, c, d])
    for claim in (a, b, c):
        checks.taken(claim)
    assert {claim.item.id for claim in checks.batch(a)} == {"a", "b", "c", "d"}


def test_a_claim_forgotten_is_in_no_later_check() -> None:
    clock = Monotonic()
    checks = _checks(clock)
    a, b, c = _claims("a", "b", "c")
    checks.queued([a, b, c])
    checks.taken(b)
    checks.forget(b)  # started (or given back)
    checks.forget(c)  # given back from the queue (shutdown)
    assert [claim.item.id for claim in checks.batch(a)] == ["a"]
    assert checks.verdict(b) is None  # nothing remembered of it
