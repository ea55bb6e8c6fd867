"""Internal: a due time of the server's, as this host's clock will read it.

The node core sleeps on its host's clock until the next due time a store told it, then
claims; the claim is judged by the server's clock (``statement_timestamp()``). On a host
whose clock runs ahead of the server's by even a millisecond, the node would wake before the
row is due by the server, claim nothing, learn that the row is due "already" and, as for any
row its claim cannot take, wait a whole poll: a woken timer a poll late on every such host.

So the stores' ``next_wake`` (what the node core asks for, instead of ``next_due``, when a
store has it) also reads the server's time in the same statement, and shifts the due time by
the offset between the two clocks; ``next_due`` itself answers in the server's time.

The server read its time between the statement's sending and its answer, so at the answer
the server's time is *at least* what it read: each answer bounds this host's lead over the
server from above, ``answered - server``, and :func:`on_this_host` shifts by such a bound (the
safe side), so the node never wakes before the server says due. The margin is how long
before the answer the server read its clock; :class:`HostOffset` keeps the tightest bound of
the last :data:`KEEP` answers (each grown by :data:`~flowsched.node.clock_filter.DRIFT` per
second of its age, NTP's clock-filter rule), so one slow answer (a reply held up by a busy
host) does not delay the wake-ups after it: the margin is about the quickest answer's time
after the server read its clock, a fraction of a round trip.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from datetime import datetime, timedelta

from flowsched.node.clock_filter import DRIFT

__all__ = ["KEEP", "HostOffset", "on_this_host"]

KEEP = 8


def on_this_host(
    when: datetime | None, server: datetime | None, answered: datetime
) -> datetime | None:
    """``when`` (the server's time) shifted to this host's clock: ``server`` is the server's
    time in the answer that arrived at ``answered`` (this host's clock). None stays None; no
    ``server`` (nothing was asked) leaves ``when`` as it is."""
    if when is None or server is None:
        return when
    return when + (answered - server)


class HostOffset:
    """The tightest recent upper bound of this host's lead over the server (see the module);
    thread-safe (a store's calls may come from several threads)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._bounds: deque[tuple[float, timedelta]] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def shift(
        self, when: datetime | None, server: datetime | None, answered: datetime
    ) -> datetime | None:
        """Record the answer (the server's time ``server``, arrived at ``answered`` on this
        host) and return ``when`` on this host's clock, by the tightest bound kept."""
        if server is None:
            return when
        now = time.monotonic()
        with self._lock:
            self._bounds.append((now, answered - server))
            lead = min(bound + timedelta(seconds=DRIFT * (now - at)) for at, bound in self._bounds)
        return None if when is None else when + lead
