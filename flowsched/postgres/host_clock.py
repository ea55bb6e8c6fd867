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
the server's time is *at least* what it read: :func:`on_this_host` shifts by that bound (the
safe side), so the node never wakes before the server says due. The margin is how long
before the answer the server read its clock: at most the round trip, about half of it (the
server reads it on arrival), as a clock filter's estimate error
(:mod:`flowsched.node.clock_filter`).
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["on_this_host"]


def on_this_host(
    when: datetime | None, server: datetime | None, answered: datetime
) -> datetime | None:
    """``when`` (the server's time) shifted to this host's clock: ``server`` is the server's
    time in the answer that arrived at ``answered`` (this host's clock). None stays None; no
    ``server`` (nothing was asked) leaves ``when`` as it is."""
    if when is None or server is None:
        return when
    return when + (answered - server)
