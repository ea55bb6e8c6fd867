"""Internal: outage backoff and its log — one warning when the store first fails, one line
when it answers again, nothing in between.

Backoff: 0.1 s, doubling, at most 5 s, with no jitter (the core is deterministic; nodes
spread anyway, since their outages start at different times). Any store call that fails
counts; the first that succeeds ends the outage.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

__all__ = ["StoreOutage"]

log = logging.getLogger("flowsched.node")

FIRST = timedelta(milliseconds=100)
LONGEST = timedelta(seconds=5)


class StoreOutage:
    """The state of the store as a node sees it: answering, or failing since when."""

    def __init__(self, owner: str, first: timedelta = FIRST, longest: timedelta = LONGEST) -> None:
        self.owner = owner
        self.first = first
        self.longest = longest
        self.since: datetime | None = None
        self.failures = 0
        self.retry_at: datetime | None = None
        self._delay = first

    @property
    def ongoing(self) -> bool:
        return self.since is not None

    def failed(self, what: str, error: BaseException, now: datetime) -> None:
        """A store call failed at ``now``: back off (the first failure of an outage logs)."""
        if self.since is None:
            self.since = now
            self._delay = self.first
            log.warning(
                "node %s: the store is unavailable (%s failed: %s: %s); retrying with "
                "backoff up to %ss, outcomes kept",
                self.owner,
                what,
                type(error).__name__,
                error,
                self.longest.total_seconds(),
            )
        else:
            self._delay = min(self._delay * 2, self.longest)
        self.failures += 1
        self.retry_at = now + self._delay

    def succeeded(self, now: datetime) -> None:
        """A store call succeeded: the outage (if any) is over, said once."""
        if self.since is None:
            return
        log.warning(
            "node %s: the store answers again after %.1fs (%d failed calls)",
            self.owner,
            (now - self.since).total_seconds(),
            self.failures,
        )
        self.since = self.retry_at = None
        self.failures = 0
        self._delay = self.first

    def waiting(self, now: datetime) -> bool:
        """Whether store calls must wait (backing off) at ``now``."""
        return self.retry_at is not None and now < self.retry_at
