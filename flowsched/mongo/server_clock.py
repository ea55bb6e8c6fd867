"""Internal: the database's clock - the one time every node of a collection judges by.

Due times, leases, renewals and settle fences are compared across nodes, so they must be
read on one clock. A node's own wall clock may be minutes off; the server's is shared by
every node of one collection. :class:`ServerClock` is that clock as seen from one node:
its own clock plus an **offset** it learns from the server.

The offset is measured with ``hello`` (a command every driver already sends; it answers
``localTime``, the server's wall clock). A reply is a **sample**: the server read its clock
somewhere between the send and the receipt, so a sample is worth at most half its round
trip (plus ``localTime``'s millisecond)::

    offset = localTime - (node time before + round trip / 2)     error = round trip / 2

The clock keeps the last :data:`SAMPLES` samples and judges by the one whose error is
smallest now (NTP's clock filter: the shortest round trip wins; a sample's error grows with
its age by :data:`DRIFT`), so one slow round trip (a ``hello`` held 3 s, the first one after
a server restart) never displaces a good measurement. The offset is measured again every
:data:`REFRESH` (one cheap command, on the sweeper's thread), every :data:`RETRY` while the
best error is above :data:`GOOD_ENOUGH`.

**Never early.** Due times and leases are judged on the safe side of the bound:
:meth:`ServerClock.earliest` (the estimate minus its error: the server's clock has certainly
reached it) says whether an item is due, so no delivery starts before its due time by the
server's clock; :meth:`ServerClock.latest` (plus the error) says whether a lease has ended,
so no node starts a claim whose lease has ended. :meth:`ServerClock.now` is the midpoint.
Between two measurements the server's time is carried forward on the node's *monotonic*
clock (the server's time at the measurement plus the monotonic time since), so a step of the
node's wall clock (NTP, a VM resumed, an operator) changes nothing until the next
measurement, which reports it as a new offset.

A server that does not answer ``localTime`` (mongomock) leaves the offset at 0, said once in
the log. A node whose offset exceeds ``max_skew`` *beyond the sample's error* logs it once, with the
figure (its clock is wrong: fix NTP; flowsched keeps working on the server's time
meanwhile): a slow round trip on a host with no skew is no skew.

Only a wall clock is corrected: a :class:`~flowsched.clock.ManualClock` (tests, virtual
time) is the truth by definition, so ``measure=False`` (the scheduler's ``server_time``
option, which defaults to ``False`` for a ManualClock and ``True`` otherwise) keeps the
offset at 0 and never asks the server.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowsched.clock import Clock, ManualClock, SystemClock
from flowsched.config.scheduler_settings import LONGEST_SETTING
from flowsched.mongo.documents import bson_utc

__all__ = [
    "ClockSample",
    "DEFAULT_MAX_SKEW",
    "DRIFT",
    "GOOD_ENOUGH",
    "REFRESH",
    "RETRY",
    "SAMPLES",
    "ServerClock",
    "due_now",
    "lease_now",
    "offset_from_hello",
    "server_clock",
]

log = logging.getLogger("flowsched.mongo")

REFRESH = 30.0
"""Seconds between two measurements of the offset."""
RETRY = 5.0
"""Seconds before a measurement that failed (the server unreachable), or one whose error is
above :data:`GOOD_ENOUGH`, is tried again."""
SAMPLES = 8
"""Samples kept (NTP's clock filter keeps eight)."""
DRIFT = 5e-5
"""How fast a sample's error grows with its age (seconds per second: 50 ppm, the node's
monotonic clock against the server's)."""
GOOD_ENOUGH = 0.05
"""A best error (seconds) above which the clock measures again after :data:`RETRY`."""
PRECISION = 0.001
"""``localTime`` is whole milliseconds."""


@dataclass(frozen=True, slots=True)
class ClockSample:
    """One ``hello``: the server's clock read ``server`` somewhere between the node's
    monotonic ``sent`` and ``received``; ``offset`` is its midpoint estimate of server time
    minus node time."""

    server: datetime
    sent: float
    received: float
    offset: timedelta

    def error(self, monotonic: float) -> float:
        """Seconds the estimate may be off at ``monotonic``: half the round trip, the
        millisecond of ``localTime``, and :data:`DRIFT` per second of age."""
        delay = self.received - self.sent
        return delay / 2 + PRECISION + max(monotonic - self.received, 0.0) * DRIFT

    def estimate(self, monotonic: float) -> datetime:
        """The server's time at ``monotonic``, read at the round trip's midpoint."""
        midpoint = (self.sent + self.received) / 2
        return self.server + timedelta(seconds=monotonic - midpoint)


def due_now(clock: Clock) -> datetime:
    """The time to judge due times by on ``clock``: never ahead of the database's (a
    :class:`ServerClock`'s :meth:`~ServerClock.earliest`; any other clock's ``now``)."""
    return clock.earliest() if isinstance(clock, ServerClock) else clock.now()


def lease_now(clock: Clock) -> datetime:
    """The time to judge leases by on ``clock``: never behind the database's (a
    :class:`ServerClock`'s :meth:`~ServerClock.latest`; any other clock's ``now``)."""
    return clock.latest() if isinstance(clock, ServerClock) else clock.now()


DEFAULT_MAX_SKEW = timedelta(seconds=1)
"""A node clock further than this from the server's is logged (once)."""


def offset_from_hello(
    reply: Mapping[str, Any], sent: datetime, round_trip: float
) -> timedelta | None:
    """The server's clock minus this node's, from a ``hello`` ``reply`` to a command sent at
    ``sent`` (node time) that took ``round_trip`` seconds; ``None`` without ``localTime``."""
    local_time = reply.get("localTime")
    if not isinstance(local_time, datetime):
        return None
    return bson_utc(local_time) - (sent + timedelta(seconds=round_trip / 2))


class ServerClock:
    """This node's view of the server's clock: ``node clock + offset`` (a :class:`Clock`).

    ``monotonic`` is the node's own (waits are local). ``command`` sends ``hello`` to the
    server (``database.command``); ``measure=False`` trusts the node clock as it is."""

    def __init__(
        self,
        clock: Clock,
        command: Callable[[str], Mapping[str, Any]] | None,
        *,
        measure: bool,
        max_skew: timedelta = DEFAULT_MAX_SKEW,
        owner: str = "",
    ) -> None:
        self.node = clock
        self._command = command
        # Without a command the owner measures through measure_async (the asyncio face).
        self.measures = measure
        self.max_skew = max_skew
        self._owner = owner
        self._offset = timedelta(0)
        self._measured = False
        # The last SAMPLES measurements: now() carries the best one forward on the monotonic
        # clock (immune to wall-clock steps).
        self._samples: deque[ClockSample] = deque(maxlen=SAMPLES)
        self._next = 0.0  # monotonic: when to measure again
        self._said_unsupported = False
        self._said_skew = False
        self._lock = threading.Lock()

    @property
    def offset(self) -> timedelta:
        """Server time minus node time, as last measured (0 until then, or not measuring)."""
        return self._offset

    @property
    def measured(self) -> bool:
        """Whether the offset comes from the server (``False``: 0 by default)."""
        return self._measured

    def best(self) -> ClockSample | None:
        """The sample with the smallest error now (``None``: none yet)."""
        with self._lock:
            samples = list(self._samples)
        if not samples:
            return None
        monotonic = self.node.monotonic()
        # The smallest error wins; the newest on a tie.
        return min(reversed(samples), key=lambda sample: sample.error(monotonic))

    @property
    def error(self) -> timedelta:
        """How far :meth:`now` may be from the server's clock (0 before any sample, or
        not measuring: the node's clock is then the truth)."""
        best = self.best()
        if best is None:
            return timedelta(0)
        return timedelta(seconds=best.error(self.node.monotonic()))

    def now(self) -> datetime:
        """The server's time now, as this node reckons it: the best sample carried
        forward on the monotonic clock (before any, the node's clock plus 0)."""
        best = self.best()
        if best is None:
            return self.node.now() + self._offset
        return best.estimate(self.node.monotonic())

    def earliest(self) -> datetime:
        """A time the server's clock has certainly reached: :meth:`now` minus its error.
        Due times are judged by it (never early)."""
        best = self.best()
        if best is None:
            return self.now()
        monotonic = self.node.monotonic()
        return best.estimate(monotonic) - timedelta(seconds=best.error(monotonic))

    def latest(self) -> datetime:
        """A time the server's clock has certainly not passed: :meth:`now` plus its error.
        Leases are judged by it (no claim starts after its lease ended)."""
        best = self.best()
        if best is None:
            return self.now()
        monotonic = self.node.monotonic()
        return best.estimate(monotonic) + timedelta(seconds=best.error(monotonic))

    def monotonic(self) -> float:
        return self.node.monotonic()

    def refresh_when_due(self) -> None:
        """:meth:`refresh` if :data:`REFRESH` seconds have passed since the last one (or
        none was made); driver errors propagate (the caller's turn retries)."""
        if self._command is None or not self.due():
            return
        self.refresh()

    def measured_now(self, op_timeout: timedelta) -> datetime:
        """:meth:`now`, measuring the offset first when a measurement is due (the first call,
        then every :data:`REFRESH` s): a node that only schedules - no handler, not started -
        writes due times by the database's clock too. One ``hello`` within ``op_timeout``;
        if it fails, the last offset stands and the next try is :data:`RETRY` s later."""
        if self._command is not None and self.due():
            import pymongo  # here: importing this module needs no driver

            try:
                with pymongo.timeout(op_timeout.total_seconds()):
                    self.refresh()
            except pymongo.errors.PyMongoError as exc:
                self._failed(exc)
        return self.now()

    async def measured_now_async(
        self, command: Callable[[str], Any], op_timeout: timedelta
    ) -> datetime:
        """:meth:`measured_now` with an awaitable ``command`` (the asyncio face)."""
        if self.due():
            import pymongo

            try:
                with pymongo.timeout(op_timeout.total_seconds()):
                    await self.refresh_async(command)
            except pymongo.errors.PyMongoError as exc:
                self._failed(exc)
        return self.now()

    def _failed(self, exc: Exception) -> None:
        self._next = self.node.monotonic() + RETRY
        log.warning(
            "node %s: could not read the database's clock (%s); judging time by the last "
            "offset measured (%+.3fs), trying again in %gs",
            self._owner,
            exc,
            self._offset.total_seconds(),
            RETRY,
        )

    def due(self) -> bool:
        """Whether a measurement is due (:data:`REFRESH` seconds since the last, or none;
        :data:`RETRY` while the best error is above :data:`GOOD_ENOUGH`). Always, while
        no sample was ever taken: a failed try (an outage) must not leave the node judging
        due times by its own clock once the database answers again."""
        if not self.measures:
            return False
        return not self._measured or self.node.monotonic() >= self._next

    async def refresh_async(self, command: Callable[[str], Any]) -> None:
        """:meth:`refresh` with an awaitable ``command`` (an ``AsyncDatabase.command``)."""
        if not self.measures:
            return
        started = self.node.monotonic()
        sent = self.node.now()
        try:
            answer = command("hello")
            reply = await answer if inspect.isawaitable(answer) else answer
        except NotImplementedError:  # mongomock, run inline
            reply = {}
        self._accept(reply, sent, started, self.node.monotonic() - started)

    def refresh(self) -> None:
        """Measure the offset now (one ``hello``)."""
        if not self.measures or self._command is None:
            return
        started = self.node.monotonic()
        sent = self.node.now()
        try:
            reply = self._command("hello")
        except NotImplementedError:  # mongomock
            reply = {}
        self._accept(reply, sent, started, self.node.monotonic() - started)

    def _accept(
        self, reply: Mapping[str, Any], sent: datetime, started: float, round_trip: float
    ) -> None:
        """Take a sample from a ``hello`` reply sent at ``sent`` (monotonic ``started``)."""
        self._next = self.node.monotonic() + REFRESH
        offset = offset_from_hello(reply, sent, round_trip)
        if offset is None:
            if not self._said_unsupported:
                self._said_unsupported = True
                log.info(
                    "node %s: the server does not report its time (hello without localTime): "
                    "judging time by this node's clock",
                    self._owner,
                )
            return
        server = bson_utc(reply["localTime"])
        sample = ClockSample(server, started, started + round_trip, offset)
        with self._lock:
            self._samples.append(sample)
            self._measured = True
        best = self.best()
        assert best is not None
        self._offset = best.offset
        error = best.error(self.node.monotonic())
        if error > GOOD_ENOUGH:
            self._next = min(self._next, self.node.monotonic() + RETRY)
        self._check_skew(best.offset, round_trip, error)

    def _check_skew(self, offset: timedelta, round_trip: float, error: float = 0.0) -> None:
        """Warn (once) when the offset exceeds ``max_skew`` beyond the sample's ``error``."""
        if abs(offset).total_seconds() - error <= self.max_skew.total_seconds():
            return
        if self._said_skew:
            return
        self._said_skew = True
        seconds = offset.total_seconds()
        log.warning(
            "node %s: its clock is %.3fs %s the database's (bound %gs, round trip %.3fs, "
            "error %.3fs); flowsched judges time by the database's clock, but fix this "
            "host's time (NTP)",
            self._owner,
            abs(seconds),
            "behind" if seconds > 0 else "ahead of",
            self.max_skew.total_seconds(),
            round_trip,
            error,
        )

    def __repr__(self) -> str:
        offset, error = self._offset.total_seconds(), self.error.total_seconds()
        return f"ServerClock({self.node!r}, offset={offset:+.3f}s ± {error:.3f}s)"


def server_clock(
    clock: Clock | None, collection: Any, server_time: bool | None, max_skew: timedelta, owner: str
) -> ServerClock:
    """The :class:`ServerClock` of scheduler ``owner`` on ``collection``: measured unless
    ``server_time`` is ``False`` (its default: ``False`` for a ManualClock, else ``True``),
    on ``clock`` (default: a :class:`~flowsched.clock.SystemClock`). A scheduler judges every
    time by it; its own clock only says whether a ManualClock drives it. ``ValueError`` if
    ``max_skew`` is not a positive timedelta (up to 365 days)."""
    from flowsched.mongo.arguments import check_positive  # bson: not for nodes' importers

    check_positive("max_clock_skew", max_skew, LONGEST_SETTING)
    clock = clock or SystemClock()
    measure = not isinstance(clock, ManualClock) if server_time is None else server_time
    database = getattr(collection, "database", None)
    command = getattr(database, "command", None)
    return ServerClock(clock, command, measure=measure, max_skew=max_skew, owner=owner)
