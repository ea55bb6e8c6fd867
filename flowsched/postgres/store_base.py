"""Internal: what :class:`~flowsched.postgres.PostgresTimerStore` and its asyncio twin
share: the constructor's arguments and checks, and the answers that need no connection.

Each store attaches its own kind of pool (:meth:`StoreBase._attach`) and runs the plans
(:mod:`flowsched.postgres.operations`) its own way.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Generic, TypeVar

from flowsched.clock import Clock, SystemClock
from flowsched.postgres.connections import DEFAULT_POOL_SIZE, seconds
from flowsched.postgres.host_clock import HostOffset
from flowsched.postgres.operations import Setup

__all__ = ["StoreBase"]

PoolT = TypeVar("PoolT")


class StoreBase(Generic[PoolT]):
    """The arguments of both stores (see :class:`~flowsched.postgres.PostgresTimerStore`),
    checked before any connection is made (a bad one: ``ValueError`` naming it)."""

    host_clock: Clock = SystemClock()
    """This host's clock, as the node's driver reads it (``next_wake`` answers in it)."""

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
        self._lead = HostOffset()  # this host's lead over the server (next_wake)
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

    def _wake(self, when: datetime | None, server: datetime | None) -> datetime | None:
        """``when`` (a due time the server read at ``server``) in :attr:`host_clock`'s time,
        unless a ``clock=`` judges due times (then ``when`` itself)."""
        if self.setup.clock is not None:
            return when
        return self._lead.shift(when, server, self.host_clock.now())
