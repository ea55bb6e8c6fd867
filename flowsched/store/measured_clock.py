"""Internal: a store's clock when the database has one and the store cannot compare in it:
the database's time as a :class:`~flowsched.node.clock_filter.ClockFilter` carries it on the
node's monotonic clock (a step of the node's wall clock changes nothing).

``measure()`` asks the database for its time (one cheap command; ``None`` when it cannot
say, as mongomock): it is called when the last sample is older than :data:`REFRESH`
seconds, or fewer than :data:`WARM` samples are kept. With an injected clock (tests, a
:class:`~flowsched.ManualClock`) that clock is the truth and nothing is measured.

A store whose I/O is not a plain call (a sans-I/O procedure, run by a sync or an asyncio
driver) passes ``measure=None`` and feeds the samples itself: it asks
:meth:`MeasuredClock.wants_sample` and, if so, times one command and gives the result to
:meth:`MeasuredClock.sample`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from flowsched.clock import Clock, SystemClock
from flowsched.node.clock_filter import PRECISION, ClockFilter

__all__ = ["MeasuredClock"]

log = logging.getLogger("flowsched.store")

REFRESH = 30.0
WARM = 3


class MeasuredClock:
    """``now()``, ``earliest()`` and ``latest()`` of a database's time (see the module)."""

    def __init__(
        self,
        clock: Clock | None,
        measure: Callable[[], datetime | None] | None,
        *,
        max_skew: timedelta = timedelta(seconds=1),
        what: str = "the database",
        node: Clock | None = None,
        precision: timedelta = PRECISION,
    ) -> None:
        """``node``: this host's clock when ``clock`` is None (default the system's).
        ``measure``: asks the database for its time (``None``: the caller feeds
        :meth:`sample`). ``precision``: how finely the database reads its clock."""
        self.node: Clock = clock or node or SystemClock()
        self._measure = measure if clock is None else None
        self._sampling = clock is None
        self.filter = ClockFilter(max_skew=max_skew, precision=precision)
        self._what = what
        self._next = 0.0
        self._said = False
        self._lock = threading.Lock()

    def wants_sample(self) -> bool:
        """Whether a measurement is due (the last is older than :data:`REFRESH` seconds, or
        fewer than :data:`WARM` are kept); never with an injected clock, nor once the
        database said it cannot tell its time."""
        if not self._sampling:
            return False
        return self.node.monotonic() >= self._next or len(self.filter.samples) < WARM

    def stale(self) -> bool:
        """Whether a caller that feeds :meth:`sample` itself should measure now: no sample
        yet, or the last is older than :data:`REFRESH` seconds (and no attempt was
        :meth:`postponed` since)."""
        return self._sampling and self.node.monotonic() >= self._next

    def postpone(self) -> None:
        """A measurement failed (the database unreachable): the next one in
        :data:`REFRESH` seconds, not at every call meanwhile."""
        self._next = self.node.monotonic() + REFRESH

    def _refresh(self) -> None:
        if self._measure is None or not self.wants_sample():
            return
        node = self.node
        started = node.monotonic()
        at = node.now()
        server = self._measure()
        self.sample(started, node.monotonic(), at, server)

    def sample(
        self, started: float, received: float, at: datetime, server: datetime | None
    ) -> None:
        """One measurement: the request left at ``started`` (this host's monotonic clock,
        ``at`` by its wall clock), the reply came back at ``received`` and said the database's
        time was ``server`` (``None``: it cannot tell; its time is judged by this node's
        from now on)."""
        with self._lock:
            if server is None:
                self._sampling = False  # the database cannot tell its time: trust the node's
                log.info("%s does not report its time: judging time by this node's", self._what)
                return
            self.filter.add(started, received, at, server)
            self._next = received + REFRESH
            skew = self.filter.skewed()
        if skew is not None and not self._said:
            self._said = True
            log.warning(
                "this host's clock is %.3fs off %s's (beyond the measurement's error): time "
                "is judged by %s's, but fix this host's time (NTP)",
                abs(skew.total_seconds()),
                self._what,
                self._what,
            )

    def _bound(self) -> tuple[datetime, timedelta]:
        node = self.node
        with self._lock:
            return self.filter.bound(node.monotonic(), node.now())

    def estimate(self) -> datetime:
        """The database's time, best estimate, from the samples taken so far (no I/O: what
        a node core is given as its "now", :mod:`flowsched.node.store_time`)."""
        return self._bound()[0]

    def now(self) -> datetime:
        """The database's time, best estimate (measured first if the samples are old)."""
        self._refresh()
        return self._bound()[0]

    def earliest(self) -> datetime:
        """The database's time is at least this: what *due* is judged by."""
        self._refresh()
        estimate, error = self._bound()
        return estimate - error

    def latest(self) -> datetime:
        """The database's time is at most this: what an ended lease or deadline is judged by."""
        self._refresh()
        estimate, error = self._bound()
        return estimate + error
