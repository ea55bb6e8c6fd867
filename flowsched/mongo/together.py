"""Internal: a settle and the history it carries in one round trip, where the server can.

A settle writes the outcomes to the items collection and the attempts that ended to
``<name>_history`` (:mod:`flowsched.mongo.history`): two collections, so two ``bulk_write``
commands, two round trips per batch, on a server before MongoDB 8.0. MongoDB 8.0's
client-level ``bulkWrite`` takes writes to several collections in one command:
:func:`together_steps` sends both parts that way (:class:`~flowsched.mongo.commands.Together`)
and falls back to one ``bulk_write`` per part where it cannot:

* a server older than 8.0 (pymongo refuses before sending anything), or one that has no such
  command: from then on this store writes its parts one after the other
  (:attr:`Capability.usable` turns false, once);
* a stand-in collection (mongomock) that has no client-level ``bulk_write``: never tried;
* a write refused inside the command (a write error, a write concern error): both parts are
  written again one after the other, which raises what the old path raises (every write of a
  settle is idempotent, and a history record written twice is dropped on reading, by its
  key);
* an error of the whole command (the connection, the server's answer): the error itself is
  raised, as from a ``bulk_write`` of one collection, so the caller tells a transient outage
  from a refusal as before; what the command did is unknown, and the settle repeats safely.

The parts are unordered either way: a part never waits for the other to succeed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pymongo.errors import ClientBulkWriteException, InvalidOperation, OperationFailure

from flowsched.mongo.commands import Counts, Steps, Together, Write

__all__ = ["NOT_SUPPORTED", "Capability", "together_steps"]

log = logging.getLogger("flowsched.mongo")

NOT_SUPPORTED = frozenset({59, 115})
"""``CommandNotFound`` and ``CommandNotSupported``: a server that speaks MongoDB 8.0's wire
version without its ``bulkWrite`` command (a compatible database)."""


class Capability:
    """Whether a store's writes to several collections may go in one ``bulkWrite``: a real
    pymongo collection, until the server is found older than MongoDB 8.0."""

    def __init__(self, usable: bool) -> None:
        self.usable = usable

    def refused(self, exc: Exception) -> None:
        """The server is older than 8.0 (said once in the log): one write per collection."""
        if self.usable:
            log.info("one bulk write per collection (%s)", exc)
        self.usable = False


def together_steps(
    parts: Sequence[tuple[str, Sequence[Write]]], capability: Capability
) -> Steps[list[Counts] | None]:
    """Apply each part's writes to its collection (role, writes) in one round trip (see the
    module); what each part did, in order. ``None``: nothing is known to be written, the
    caller writes the parts one ``bulk_write`` each, as before MongoDB 8.0 (the server is
    older, or a write was refused inside the command)."""
    if not capability.usable:
        return None
    sent = tuple((role, tuple(writes)) for role, writes in parts)
    try:
        counts: list[Counts] = yield Together(sent)
    except InvalidOperation as exc:  # nothing was sent
        capability.refused(exc)
        return None
    except ClientBulkWriteException as exc:
        error = exc.error
        if isinstance(error, OperationFailure) and error.code in NOT_SUPPORTED:
            capability.refused(error)  # a server that says 8.0 but has no such command
            return None
        if isinstance(error, Exception):
            raise error from exc  # the command's own failure: as from one collection
        log.debug("a write of a settle was refused, written again part by part: %s", exc)
        return None
    return counts
