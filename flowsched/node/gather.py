"""Internal: how long a node waits for a fuller batch before a smaller call goes: a claim,
when it starts its claims as it claims them (``start_on_claim``), and a settle, always.

Such a node queues no claims, so it claims only for free handler slots; and every node's
handlers' outcomes come in one by one. Sent at the first chance, its claims and settles
would carry a few timers each (a statement per handful); waiting for the batch to fill could
wait for as long as the slowest handler runs. A :class:`Gather` window does both: a full
batch goes at once, a partial one once the window has passed since it could first have gone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["GATHER", "PACE", "SETTLE_GATHER", "Gather"]

GATHER = timedelta(milliseconds=10)
"""The longest a partial claim or settle waits for more (never longer than a poll)."""

SETTLE_GATHER = timedelta(milliseconds=50)
"""The longest outcomes wait for more (never longer than a poll): a settle is on no
delivery's path (leases last seconds), so the outcomes of a few waves of handlers - a
threaded node of 8 workers claims and starts 8 at a time - go in one call, not one each."""

PACE = timedelta(milliseconds=3)
"""After a claim that came back short but not empty, following one that was not empty either
(timers falling due in a stream, not one now and then), the next claim goes this long after
it was sent, with no next-due call between: each claim carries a few milliseconds' worth of
timers, so a node that keeps up sends about two statements (a claim and its settle) per
``PACE`` however prompt it is, for at most ``PACE`` more lateness (Nagle's rule). Otherwise
the node asks for the next due time as before."""


class Gather:
    """One kind of call's window: :meth:`ready` says whether it goes now."""

    __slots__ = ("since", "width")

    def __init__(self, width: timedelta) -> None:
        self.width = width
        self.since: datetime | None = None  # when a partial call could first have gone

    def ready(self, now: datetime, full: bool) -> bool:
        """Whether the call may go at ``now``: at once when ``full``, else once the window
        has passed since it first could (this call starts the window if none is open)."""
        if not full:
            if self.since is None:
                self.since = now
            if now < self.since + self.width:
                return False
        self.since = None
        return True

    def clear(self) -> None:
        """The call went, or is no longer wanted: the next partial one opens a new window."""
        self.since = None

    @property
    def at(self) -> datetime | None:
        """When the open window ends (``None``: none is open)."""
        return None if self.since is None else self.since + self.width
