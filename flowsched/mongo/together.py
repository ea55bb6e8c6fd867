"""Internal: writes to two collections in one round trip, where the server can.

A settle writes the outcomes to the items collection and the attempts that ended to
``<name>_history`` (:mod:`flowsched.mongo.history`); a cancel that meets a started delivery
removes the item and keeps its attempt (:mod:`flowsched.mongo.keep_started`); a schedule
stores its form and removes its id's dead letter (:mod:`flowsched.mongo.timer_ops`). Two
collections: two commands on a server before MongoDB 8.0. MongoDB 8.0's client-level
``bulkWrite`` takes writes to several collections in one command, and :func:`together_steps`
sends the parts that way (:class:`~flowsched.mongo.commands.Together`; unordered, a part never
waiting for the other to succeed, unless ``ordered``), with the items collection's write
concern. What comes back:

* **all applied**: each part's counts;
* **some writes refused** (write errors, say a history document the server will not
  update): the counts of what applied, and per part the writes refused, which the caller
  sends again on their own, the old way, to get the old error or outcome
  (:class:`Together`'s result; nothing applied is sent twice). In order (``ordered``: a
  schedule's form, then the removal of its id's dead letter, which must not go without the
  form), the writes after a refused one are not tried and are handed back with it;
* **a write concern error**: raised as pymongo's ``WriteConcernError`` (``WTimeoutError``
  for a time-out), as a single-collection write raises it: it may have been applied;
* **an error of the whole command**: a transient one (the connection, a step-down) is
  raised as itself, so the caller's outage rules and "the outcome is unknown" apply as
  before; a refusal of the command itself before anything applied returns ``None``: nothing
  was applied, the caller writes the parts the old way (which tells which write the server
  refused). A refusal that will not change (no such command, not authorised: :data:`NEVER`)
  turns this store to one ``bulk_write`` per collection for good, as does a server older
  than 8.0 (pymongo's ``InvalidOperation``).

A store never tries when its collections encode differently from their client (a codec
option such as ``uuid_representation`` set on the collection only: the client-level
command encodes with the client's), or when they are not pymongo's (mongomock).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pymongo.errors import (
    ClientBulkWriteException,
    InvalidOperation,
    OperationFailure,
    WriteConcernError,
    WTimeoutError,
)

from flowsched.mongo.commands import Counts, Steps, Together, Write
from flowsched.mongo.transient import is_transient

__all__ = ["NEVER", "Capability", "Done", "encodes_alike", "together_steps"]

log = logging.getLogger("flowsched.mongo")

_TOO_OLD = "requires MongoDB server version 8.0"

NEVER = frozenset({13, 59, 115})
"""``Unauthorized`` (say, no rights on the history collection), ``CommandNotFound`` and
``CommandNotSupported`` (a compatible server without the command): this store stops trying."""


class Capability:
    """Whether a store's writes to several collections may go in one ``bulkWrite``: a real
    pymongo collection that encodes as its client does, until the server refuses it."""

    def __init__(self, usable: bool) -> None:
        self.usable = usable

    def refused(self, exc: Exception) -> None:
        """The server cannot take it (said once in the log): one write per collection."""
        if self.usable:
            log.info("one bulk write per collection from now on (%s)", exc)
        self.usable = False


def encodes_alike(*collections: Any) -> bool:
    """Whether ``collections`` encode documents as their client does (the client-level
    ``bulkWrite`` encodes with the client's codec options)."""
    for collection in collections:
        mine, client = collection.codec_options, collection.database.client.codec_options
        if (mine.uuid_representation, mine.type_registry) != (
            client.uuid_representation,
            client.type_registry,
        ):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Done:
    """What one command did: each part's counts, and each part's writes the server refused
    (to be sent again on their own); ``codes``: the server's error code of each refused
    write, by its index in the command (a write not tried, in order, has none)."""

    counts: list[Counts]
    refused: list[list[Write]]
    codes: Mapping[int, int] = field(default_factory=dict)


def together_steps(
    parts: Sequence[tuple[str, Sequence[Write]]], capability: Capability, *, ordered: bool = False
) -> Steps[Done | None]:
    """Apply each part's writes to its collection (role, writes) in one round trip (see the
    module); ``None`` when nothing was applied and the caller writes the parts the old way."""
    if not capability.usable:
        return None
    sent = tuple((role, tuple(writes)) for role, writes in parts)
    op = Together(sent, ordered)
    try:
        counts: list[Counts] = yield op
    except InvalidOperation as exc:
        if _TOO_OLD not in str(exc):
            raise  # a closed client, say: as from any write
        capability.refused(exc)
        return None
    except ClientBulkWriteException as exc:
        return _partly(op, exc, capability)
    return Done(counts, [[] for _ in sent])


def _partly(op: Together, exc: ClientBulkWriteException, capability: Capability) -> Done | None:
    error = exc.error
    if isinstance(error, Exception):
        applied = exc.partial_result is not None
        if isinstance(error, OperationFailure) and not is_transient(error) and not applied:
            if error.code in NEVER:
                capability.refused(error)  # the command itself refused: nothing applied
            return None  # this batch the old way, which tells which write the server refused
        raise error from exc  # the command's own failure: as from one collection
    details: Mapping[str, Any] = exc.details  # the server's documents, as sent back
    concern = details.get("writeConcernErrors") or []
    if concern:  # it may have been applied: as a single-collection write raises it
        first = concern[0]
        code, message = first.get("code"), str(first.get("errmsg", "write concern error"))
        timed_out = code == 64 or bool((first.get("errInfo") or {}).get("wtimeout"))
        raise (WTimeoutError if timed_out else WriteConcernError)(message, code, first) from exc
    errors = details.get("writeErrors") or []
    codes = {int(write["idx"]): int(write.get("code") or 0) for write in errors}
    refused = set(codes)
    if op.ordered and refused:  # the writes after the first refused one were not tried
        refused |= set(range(min(refused), sum(len(writes) for _, writes in op.parts)))
    result = exc.partial_result
    counts = op.counts(result) if result is not None else [Counts() for _ in op.parts]
    per_part, first_index = [], 0
    for _, writes in op.parts:
        indexes = range(first_index, first_index + len(writes))
        per_part.append([writes[n - first_index] for n in indexes if n in refused])
        first_index += len(writes)
    log.debug("%d writes refused (or, in order, not tried) inside a bulkWrite", len(refused))
    return Done(counts, per_part, codes)
