"""Internal: the redelivery policy - how long a failed delivery waits before it is tried again.

3 s doubling to 30 s by default, for as long as it fails (both settable); shared by every
adapter through :class:`~flowsched.delivery.DeliveryCore`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from flowsched.config.scheduler_settings import LONGEST_SETTING, SchedulerSettings

__all__ = ["RedeliveryPolicy", "redelivery_policy"]


@dataclass(frozen=True, slots=True)
class RedeliveryPolicy:
    """Backoff for failed deliveries: ``initial``, times ``factor`` per failure, capped.

    ``max_attempts`` (``None``: retry for as long as it fails) is the number of failed
    deliveries after which the item goes to the dead letters. ``maximum`` is at most 365 days.

    >>> [RedeliveryPolicy().delay(n).seconds for n in range(1, 7)]
    [3, 6, 12, 24, 30, 30]
    """

    initial: timedelta = timedelta(seconds=3)
    maximum: timedelta = timedelta(seconds=30)
    factor: float = 2.0
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        if self.initial <= timedelta(0):
            raise ValueError(f"redelivery initial must be positive (got {self.initial})")
        if self.maximum > LONGEST_SETTING:
            raise ValueError(
                f"redelivery maximum must be at most {LONGEST_SETTING.days} days "
                f"(got {self.maximum})"
            )
        if self.maximum < self.initial:
            raise ValueError(
                f"redelivery maximum ({self.maximum}) must be at least initial ({self.initial})"
            )
        if not self.factor >= 1:  # NaN too
            raise ValueError(f"redelivery factor must be a number >= 1 (got {self.factor})")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 or None (got {self.max_attempts})")

    def delay(self, failures: int) -> timedelta:
        """The wait after the ``failures``-th consecutive failure (1-based)."""
        if failures < 1:
            raise ValueError(f"failures is 1-based (got {failures})")
        # In closed form, compared in logarithms before multiplying: a huge failure count (a
        # counter read from a document) neither overflows nor loops a billion times.
        seconds = self.initial.total_seconds()
        cap = self.maximum.total_seconds()
        steps = failures - 1
        if steps == 0 or self.factor == 1 or seconds >= cap:
            return min(self.initial, self.maximum)
        if steps >= math.log(cap / seconds) / math.log(self.factor):
            return self.maximum
        return min(timedelta(seconds=seconds * self.factor**steps), self.maximum)


def redelivery_policy(settings: SchedulerSettings) -> RedeliveryPolicy:
    """The policy ``ipf-scheduler.flowsched.redelivery`` and ``max-attempts`` set."""
    return RedeliveryPolicy(
        initial=settings.redelivery_initial,
        maximum=settings.redelivery_maximum,
        factor=settings.redelivery_factor,
        max_attempts=settings.max_attempts,
    )
