"""The reference store passes the store conformance suite, on both faces; the suite fails
stores that break a guarantee."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pytest

from flowsched import ManualClock
from flowsched.store import (
    AsyncTimerStore,
    Claim,
    MemoryTimerStore,
    TimerStore,
    as_async,
)
from flowsched.testing import check_timer_store, store_guarantees


def test_reference_store_passes_with_a_clock() -> None:
    check_timer_store(lambda clock: MemoryTimerStore(clock))


def test_reference_store_passes_on_its_own_clock() -> None:
    check_timer_store(MemoryTimerStore)


def test_async_face_passes() -> None:
    assert isinstance(as_async(MemoryTimerStore()), AsyncTimerStore)

    async def build(clock: ManualClock) -> AsyncTimerStore:
        return as_async(MemoryTimerStore(clock))

    check_timer_store(build)


def test_store_is_a_timer_store() -> None:
    assert isinstance(MemoryTimerStore(), TimerStore)


def test_guarantees_are_listed() -> None:
    names = store_guarantees()
    assert len(names) == len(set(names)) >= 15
    assert any("exclusive" in name for name in names)


class _NoConfirmCheck(MemoryTimerStore):
    def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        super().confirm_start(claims)
        return list(claims)  # planted: every claim "still holds"


class _LateRemove(MemoryTimerStore):
    def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        return super().remove(item_id, generation=generation)  # planted: deadline ignored


class _SharedClaims(MemoryTimerStore):
    def claim_due(self, routes, owner, lease, limit):  # type: ignore[no-untyped-def]
        claims = super().claim_due(routes, owner, lease, limit)
        for claim in claims:  # planted: the lease is forgotten, so others claim it too
            self.release([claim])
        return claims


@pytest.mark.parametrize(
    ("store", "guarantee"),
    [
        (_NoConfirmCheck, "a replacement fences out claims of the old form"),
        (_LateRemove, "a write past its deadline applies nothing"),
        (_SharedClaims, "claim_due takes due, unpaused"),
    ],
)
def test_suite_names_the_broken_guarantee(store: type[MemoryTimerStore], guarantee: str) -> None:
    with pytest.raises(AssertionError, match="store guarantee not held: " + guarantee):
        check_timer_store(lambda clock: store(clock))
