"""Internal: outage backoff and its log — one warning when the store first fails, one line
when it answers again, nothing in between.

A :class:`~flowsched.ConfigError` (a store that refuses this node's settings, as a MongoDB
collection whose bucket count differs) is logged once as an error: the node claims nothing
until it is given other settings (it keeps trying, with the backoff, in case the store's
record changes).

Backoff: 0.1 s, doubling, at most 5 s, with no jitter (the core is deterministic; nodes
spread anyway, since their outages start at different times). Any store call that fails
counts; the first that succeeds ends the outage.

The length said at recovery runs from when the first failing call was *sent* (its driver
tells :meth:`StoreOutage.sent`), not from when it failed: a call blocks up to the store's
``op_timeout`` before its error arrives, and the last call that succeeded ended at most a
poll interval before it was sent - so the figure is the outage's real length to within one
poll interval.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from flowsched.errors import ConfigError

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
        self._sent: datetime | None = None

    def sent(self, at: datetime) -> None:
        """The failing call about to be reported (:meth:`failed`) was sent at ``at``."""
        self._sent = at

    @property
    def ongoing(self) -> bool:
        return self.since is not None

    def failed(self, what: str, error: BaseException, now: datetime) -> None:
        """A store call failed at ``now``: back off (the first failure of an outage logs)."""
        sent, self._sent = self._sent, None
        if self.since is None:
            self.since = min(sent, now) if sent is not None else now
            self._delay = self.first
            if isinstance(error, ConfigError):  # this node's settings: no retry mends them
                log.error("node %s claims nothing: %s", self.owner, error)
            else:
                self._unavailable(what, error)
        else:
            self._delay = min(self._delay * 2, self.longest)
        self.failures += 1
        self.retry_at = now + self._delay

    def _unavailable(self, what: str, error: BaseException) -> None:
        log.warning(
            "node %s: the store is unavailable (%s failed: %s: %s); retrying with "
            "backoff up to %ss, outcomes kept",
            self.owner,
            what,
            type(error).__name__,
            error,
            self.longest.total_seconds(),
        )

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
