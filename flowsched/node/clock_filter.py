"""Internal: a node's estimate of its store's clock, with its error bound — NTP's clock filter
(RFC 5905 section 10), no I/O.

A measurement sends one request at node time ``t0`` and gets the server's time ``server``
back at ``t1``. The server read its clock somewhere between the two, so the offset (server
minus node) lies in ``[server - t1, server - t0]``: its estimate is the middle of that range
and its **error is half the round trip**, never less. One slow round trip (a reply held by a
proxy for 3 s) gives a wide range, not a wrong answer.

The filter keeps the last :data:`KEEP` samples and trusts the one with the smallest round
trip (the tightest range; NTP's rule). Everything is measured on the node's monotonic clock,
so a step of its wall clock changes nothing until the next sample.

Decisions are taken on the safe side: :meth:`ClockFilter.earliest` (the server's time is at
least this) judges whether something is *due* — so nothing starts early — and
:meth:`ClockFilter.latest` (at most this) whether a lease has *ended* or a deadline passed.
A skew warning is given only when the offset is larger than ``max_skew`` beyond the error
(a host with no skew gets none, however slow its round trips).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["KEEP", "ClockFilter", "Sample"]

KEEP = 8
PRECISION = timedelta(milliseconds=1)  # the server's clock is read in milliseconds


@dataclass(frozen=True, slots=True)
class Sample:
    """One measurement: ``offset`` (server minus node, midpoint estimate), ``delay`` (the
    round trip), ``taken`` (node monotonic seconds at the reply)."""

    offset: timedelta
    delay: timedelta
    taken: float

    @property
    def error(self) -> timedelta:
        """How far the true offset may be from :attr:`offset`: half the round trip."""
        return self.delay / 2 + PRECISION


class ClockFilter:
    """The best recent offset sample and what follows from it (see the module docstring)."""

    def __init__(self, keep: int = KEEP, max_skew: timedelta = timedelta(seconds=1)) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep!r}")
        self.samples: deque[Sample] = deque(maxlen=keep)
        self.max_skew = max_skew

    def add(self, sent: float, received: float, node_at_sent: datetime, server: datetime) -> Sample:
        """Record a measurement: node monotonic ``sent`` and ``received`` seconds, the node's
        wall clock at ``sent`` and the server's time in its answer."""
        if received < sent:
            raise ValueError(f"received ({received}) before sent ({sent})")
        delay = timedelta(seconds=received - sent)
        sample = Sample(server - (node_at_sent + delay / 2), delay, received)
        self.samples.append(sample)
        return sample

    def best(self) -> Sample | None:
        """The sample with the smallest round trip among those kept (None: no sample)."""
        return min(self.samples, key=lambda s: s.delay, default=None)

    def offset(self) -> tuple[timedelta, timedelta]:
        """``(offset, error)`` of the best sample; ``(0, 0)`` before any (trust the node)."""
        best = self.best()
        return (best.offset, best.error) if best is not None else (timedelta(0), timedelta(0))

    def estimate(self, node_now: datetime) -> datetime:
        """The server's time, best guess, when the node's is ``node_now``."""
        return node_now + self.offset()[0]

    def earliest(self, node_now: datetime) -> datetime:
        """The server's time is at least this when the node's is ``node_now``: what *due*
        is judged by (never early)."""
        offset, error = self.offset()
        return node_now + offset - error

    def latest(self, node_now: datetime) -> datetime:
        """The server's time is at most this: what an *ended* lease or a passed deadline is
        judged by (never start a claim whose lease may have ended)."""
        offset, error = self.offset()
        return node_now + offset + error

    def skewed(self) -> timedelta | None:
        """The offset when it exceeds ``max_skew`` beyond its error (worth a warning), else
        None."""
        offset, error = self.offset()
        return offset if abs(offset) - error > self.max_skew else None
