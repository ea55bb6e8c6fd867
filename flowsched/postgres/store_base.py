"""Internal: what :class:`~flowsched.postgres.PostgresTimerStore` and its asyncio twin
share: the constructor's arguments and checks, and the answers that need no connection.

Each store attaches its own kind of pool (:meth:`StoreBase._attach`) and runs the plans
(:mod:`flowsched.postgres.operations`) its own way.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Generic, TypeVar

from flowsched.clock import Clock
from flowsched.postgres.connections import DEFAULT_POOL_SIZE, seconds
from flowsched.postgres.operations import Setup
from flowsched.store.measured_clock import MeasuredClock

__all__ = ["StoreBase"]

PoolT = TypeVar("PoolT")


class StoreBase(Generic[PoolT]):
    """The arguments of both stores (see :class:`~flowsched.postgres.PostgresTimerStore`),
    checked before any connection is made (a bad one: ``ValueError`` naming it)."""

    server_time: MeasuredClock
    """The server's time as this host measures it, from the server's time each
    :meth:`next_wake` and :meth:`now` answer carries (with ``clock=``, that clock): what a
    node face counts due times from (:func:`~flowsched.node.store_time.face_clock`, which
    calls ``now()`` when no sample is fresh), so that a host whose clock is off schedules
    "in 10 s" by the server's clock; and what the next-due shift reads."""

    def __init__(
        self,
        conninfo_or_pool: str | PoolT,
        *,
        table: str = "flowsched_timers",
        clock: Clock | None = None,
        migrate: bool = True,
        notify_within: timedelta = timedelta(seconds=5),
        history_limit: int = 20,
        history_retention: timedelta = timedelta(days=7),
        pool_size: int = DEFAULT_POOL_SIZE,
        op_timeout: timedelta | float | None = None,
        durable_firing: bool = False,
    ) -> None:
        self.setup = Setup.checked(
            table, clock, notify_within, history_limit, history_retention, durable_firing
        )
        self.server_time = MeasuredClock(
            clock, None, what="the PostgreSQL server", precision=timedelta(microseconds=1)
        )
        self._timeout = seconds(op_timeout, "op_timeout")
        self._attach(conninfo_or_pool, pool_size, migrate)

    def _attach(self, conninfo_or_pool: str | PoolT, pool_size: int, migrate: bool) -> None:
        """Take the pool given, or open (now or later) one of ``pool_size`` connections to
        the conninfo given; migrate the tables (now or later) if ``migrate``."""
        raise NotImplementedError

    @property
    def table(self) -> str:
        """The timers table's name."""
        return self.setup.queries.table

    @property
    def clock(self) -> Clock | None:
        """The clock due times are judged by (``None``: the server's)."""
        return self.setup.clock

    @property
    def op_timeout(self) -> timedelta | None:
        """How long a call may take before it gives up (:mod:`flowsched.postgres.time_limit`)."""
        return None if self._timeout is None else timedelta(seconds=self._timeout)

    @property
    def host_clock(self) -> Clock:
        """This host's clock, as the node's driver reads it (``next_wake`` answers in it)."""
        return self.server_time.node

    @host_clock.setter
    def host_clock(self, clock: Clock) -> None:
        self.server_time.node = clock

    def _sent(self) -> tuple[float, datetime]:
        """When a statement whose answer carries the server's time leaves (monotonic, wall)."""
        host = self.host_clock
        return host.monotonic(), host.now()

    def _wake(
        self, sent: tuple[float, datetime], when: datetime | None, server: datetime | None
    ) -> datetime | None:
        """``when`` (a due time the server read at ``server``, in an answer to a statement
        that left at ``sent``) in :attr:`host_clock`'s time, unless a ``clock=`` judges due
        times (then ``when`` itself); the answer is a sample of :attr:`server_time`."""
        if self.setup.clock is not None:
            return when
        self._sampled(sent, server)
        if when is None or server is None:
            return when
        # The host reads `when` once the server's time has surely reached it: shifted by the
        # host's lead over the earliest the server's time can be now (at the answer, the
        # server's time is at least what it read: the bound is the quickest answer's time
        # after the read, of the samples kept - one slow answer costs nothing after it).
        return when + (self.host_clock.now() - self.server_time.earliest())

    def _sampled(self, sent: tuple[float, datetime], server: datetime | None) -> None:
        """The server's time ``server`` came back for a statement that left at ``sent``."""
        if server is not None and self.setup.clock is None:
            self.server_time.sample(sent[0], self.host_clock.monotonic(), sent[1], server)
