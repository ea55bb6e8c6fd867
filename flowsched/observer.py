"""Internal: the :class:`Observer` hook every scheduler calls as it schedules, fires,
settles and dead-letters items (its methods do nothing until overridden;
:mod:`flowsched.observe` builds metrics on it). The delivery core makes the calls; users
import it as ``flowsched.Observer``.
"""

from __future__ import annotations

from datetime import timedelta

from flowsched.records import DeadLetter, ScheduleItem

__all__ = ["Observer"]


class Observer:
    """Hook for metrics: override what you need; every method is called synchronously.

    Calls come from scheduler threads; keep them cheap and thread-safe."""

    def scheduled(self, item: ScheduleItem) -> None:
        """An item was scheduled (or replaced)."""

    def cancelled(self, item_id: str) -> None:
        """An item was cancelled."""

    def fired(self, item: ScheduleItem, attempt: int, lateness: timedelta) -> None:
        """A delivery is starting; ``lateness`` is fire time minus due time."""

    def completed(self, item: ScheduleItem, attempt: int) -> None:
        """A handler returned: the item is done."""

    def failed(self, item: ScheduleItem, attempt: int, error: str) -> None:
        """A handler raised; the item will be redelivered or dead-lettered."""

    def dead_lettered(self, dead: DeadLetter) -> None:
        """An item exhausted ``max_attempts``."""

    def late_completion(self, item: ScheduleItem, attempt: int, late: timedelta) -> None:
        """A handler returned ``late`` after its claim's lease ended (MongoDB): no failure,
        the item is done, but another node may have run it too."""

    def timed_out(self, item: ScheduleItem, attempt: int, elapsed: timedelta) -> None:
        """A handler ran past its time limit (``register(..., timeout=)``) after ``elapsed``:
        cancelled or abandoned; :meth:`failed` follows (redelivered or dead-lettered)."""
