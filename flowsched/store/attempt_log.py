"""Internal: the attempt history of :class:`~flowsched.store.MemoryTimerStore`.

Per item id its last ``limit`` attempts (a start recorded by ``confirm_start``, closed by
the claim's settle or by its lapse), kept after the item is gone for ``retention``, both
judged by the store's clock. Not thread-safe: the store calls it under its lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Container
from dataclasses import replace
from datetime import datetime, timedelta

from flowsched.history import failure_in
from flowsched.steering import Attempt, AttemptOutcome
from flowsched.store.records import Claim, Settlement

__all__ = ["AttemptBook", "ended_as"]


class AttemptBook:
    """The attempts of the ids in ``live`` (and of those gone, for ``retention``)."""

    def __init__(
        self, now: Callable[[], datetime], live: Container[str], limit: int, retention: timedelta
    ) -> None:
        if limit < 1:
            raise ValueError(f"history_limit must be at least 1, got {limit!r}")
        self.now = now
        self.live = live
        self.limit = limit
        self.retention = retention
        self._attempts: dict[str, deque[Attempt]] = {}

    def history(self, item_id: str) -> list[Attempt]:
        self.purge()
        return list(self._attempts.get(item_id, ())) if isinstance(item_id, str) else []

    def record(self, claim: Claim, now: datetime, live_count: int) -> None:
        """``claim``'s handler starts at ``now`` (``live_count``: items in the store)."""
        attempts = self._attempts.setdefault(claim.item.id, deque(maxlen=self.limit))
        attempts.append(
            Attempt(claim.owner, now, generation=claim.generation, attempt=claim.attempt)
        )
        if len(self._attempts) > 2 * live_count + 1024:
            self.purge()

    def close(
        self,
        claim: Claim,
        attempt: int,
        ended: datetime,
        outcome: AttemptOutcome,
        settlement: Settlement | None,
    ) -> bool:
        """Close the open attempt of the claim held as ``claim`` (its stored ``attempt``
        count) at ``ended`` with ``outcome`` (the settlement's error, if any); whether one
        was open (the claim had started)."""
        attempts = self._attempts.get(claim.item.id)
        if not attempts:
            return False
        last = attempts[-1]
        if (
            last.ended is not None
            or last.node != claim.owner
            or last.generation != claim.generation
            or last.attempt != attempt
        ):
            return False
        failure = failure_in(settlement.outcome) if settlement is not None else None
        error_type = error_message = traceback = None
        if failure is not None:
            error_type, error_message = failure.error_type, failure.error_message
            traceback = failure.traceback
        if settlement is not None and settlement.traceback is not None:
            traceback = settlement.traceback
        attempts[-1] = replace(
            last,
            ended=ended,
            outcome=outcome,
            error_type=error_type,
            error_message=error_message,
            traceback=traceback,
        )
        return True

    def purge(self) -> None:
        horizon = self.now() - self.retention
        for item_id in [
            item_id
            for item_id, attempts in self._attempts.items()
            if item_id not in self.live
            and attempts
            and (attempts[-1].ended or attempts[-1].started) < horizon
        ]:
            del self._attempts[item_id]


def ended_as(settlement: Settlement) -> AttemptOutcome:
    """How a settled attempt ended: timed out, failed, or succeeded."""
    failure = failure_in(settlement.outcome)
    if settlement.timed_out or (failure is not None and failure.outcome == "timed_out"):
        return "timed_out"
    return "failed" if failure is not None else "succeeded"
