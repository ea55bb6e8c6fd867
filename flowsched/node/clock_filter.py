"""Internal: a node's estimate of its store's clock, with its error bound — NTP's clock filter
(RFC 5905 section 10), no I/O.

A measurement sends one request at node monotonic time ``t0`` and gets the server's time
``server`` back at ``t1``. The server read its clock somewhere between the two, so at ``t1``
the server's time lies in ``[server, server + (t1 - t0)]``: its estimate is the middle of
that range and its **error is half the round trip**, never less. One slow round trip (a
reply held by a proxy for 3 s) gives a wide range, not a wrong answer.

**Carried on the monotonic clock.** A sample is anchored to the node's monotonic clock, not
its wall clock: the server's time at monotonic ``m`` is estimated as
``server_at_reply + (m - t1)``, its error the sample's plus :data:`DRIFT` times its age (the
node's oscillator may run that much fast or slow). A step of the node's wall clock (an NTP
correction, an operator's ``date``), between samples or while one is on its way, changes no
estimate and no judgement. The node's wall clock is used for two things only: the skew
warning (the offset between it and the server's, at sample time) and, before any sample,
as the estimate itself (nothing measured yet: the node is trusted).

The filter keeps the last :data:`KEEP` samples and trusts the one whose error is the
smallest *now* (the tightest round trip, its drift since counted: NTP's rule).

Decisions are taken on the safe side: :meth:`ClockFilter.earliest` (the server's time is at
least this) judges whether something is *due* — so nothing starts early — and
:meth:`ClockFilter.latest` (at most this) whether a lease has *ended* or a deadline passed.
A skew warning is given only when the offset is larger than ``max_skew`` beyond the error
(a host with no skew gets none, however slow its round trips).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["DRIFT", "KEEP", "PRECISION", "ClockFilter", "Sample"]

KEEP = 8
PRECISION = timedelta(milliseconds=1)  # the server's clock is read in milliseconds
DRIFT = 15e-6  # how fast or slow a node's monotonic clock may run (NTP's PHI: 15 ppm)


@dataclass(frozen=True, slots=True)
class Sample:
    """One measurement: ``offset`` (server minus the node's wall clock, midpoint estimate:
    for the skew warning), ``delay`` (the round trip), ``taken`` (node monotonic seconds at
    the reply) and ``server_at`` (the server's time at ``taken``, midpoint estimate)."""

    offset: timedelta
    delay: timedelta
    taken: float
    server_at: datetime
    precision: timedelta = PRECISION  # how finely the server reads its clock
    _spread: float = field(init=False, repr=False, compare=False)  # error, in seconds

    def __post_init__(self) -> None:
        object.__setattr__(self, "_spread", self.error.total_seconds())

    @property
    def error(self) -> timedelta:
        """How far the true time may be from the estimate at ``taken``: half the round trip
        (plus the server's reading precision)."""
        return self.delay / 2 + self.precision

    def error_seconds(self, monotonic: float) -> float:
        """:meth:`error_at` in seconds (what the best sample is chosen by)."""
        return self._spread + DRIFT * abs(monotonic - self.taken)

    def error_at(self, monotonic: float) -> timedelta:
        """:attr:`error` grown by :data:`DRIFT` over the sample's age at ``monotonic``."""
        return self.error + timedelta(seconds=DRIFT * abs(monotonic - self.taken))

    def estimate_at(self, monotonic: float) -> datetime:
        """The server's time at node monotonic ``monotonic``, carried from the sample."""
        return self.server_at + timedelta(seconds=monotonic - self.taken)


class ClockFilter:
    """The best recent sample and what follows from it (see the module docstring). Times to
    judge are given as the node's monotonic seconds (the clock the samples were taken on),
    with the node's wall clock ``node_now`` for before the first sample."""

    def __init__(
        self,
        keep: int = KEEP,
        max_skew: timedelta = timedelta(seconds=1),
        precision: timedelta = PRECISION,
    ) -> None:
        """``precision``: how finely the server reads its clock (MongoDB's ``localTime``:
        milliseconds; PostgreSQL's ``statement_timestamp()``: microseconds)."""
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep!r}")
        self.samples: deque[Sample] = deque(maxlen=keep)
        self.max_skew = max_skew
        self.precision = precision

    def add(self, sent: float, received: float, node_at_sent: datetime, server: datetime) -> Sample:
        """Record a measurement: node monotonic ``sent`` and ``received`` seconds, the node's
        wall clock at ``sent`` (for the skew warning only) and the server's time in its
        answer."""
        if received < sent:
            raise ValueError(f"received ({received}) before sent ({sent})")
        delay = timedelta(seconds=received - sent)
        offset = server - (node_at_sent + delay / 2)
        sample = Sample(offset, delay, received, server + delay / 2, self.precision)
        self.samples.append(sample)
        return sample

    def best(self, monotonic: float | None = None) -> Sample | None:
        """The kept sample with the smallest error at ``monotonic`` (its drift since
        counted); without ``monotonic``, the smallest round trip. None: no sample."""
        if monotonic is None:
            return min(self.samples, key=lambda s: s.delay, default=None)
        return min(self.samples, key=lambda s: s.error_seconds(monotonic), default=None)

    def bound(self, monotonic: float, node_now: datetime) -> tuple[datetime, timedelta]:
        """``(estimate, error)`` of the server's time at ``monotonic``; before any sample,
        ``(node_now, 0)`` (trust the node)."""
        best = self.best(monotonic)
        if best is None:
            return node_now, timedelta(0)
        return best.estimate_at(monotonic), best.error_at(monotonic)

    def offset(self) -> tuple[timedelta, timedelta]:
        """``(offset, error)`` of the sample with the smallest round trip, against the
        node's wall clock when it was taken; ``(0, 0)`` before any."""
        best = self.best()
        return (best.offset, best.error) if best is not None else (timedelta(0), timedelta(0))

    def estimate(self, monotonic: float, node_now: datetime) -> datetime:
        """The server's time, best guess, at node monotonic ``monotonic``."""
        return self.bound(monotonic, node_now)[0]

    def earliest(self, monotonic: float, node_now: datetime) -> datetime:
        """The server's time is at least this at ``monotonic``: what *due* is judged by
        (never early)."""
        estimate, error = self.bound(monotonic, node_now)
        return estimate - error

    def latest(self, monotonic: float, node_now: datetime) -> datetime:
        """The server's time is at most this at ``monotonic``: what an *ended* lease or a
        passed deadline is judged by (never start a claim whose lease may have ended)."""
        estimate, error = self.bound(monotonic, node_now)
        return estimate + error

    def skewed(self) -> timedelta | None:
        """The offset when it exceeds ``max_skew`` beyond its error (worth a warning), else
        None."""
        offset, error = self.offset()
        return offset if abs(offset) - error > self.max_skew else None
