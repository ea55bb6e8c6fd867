"""Instrumentation of MongoDB nodes for a seam burst (:mod:`flowsched.testing.seam_burst`):
every check before a start is reported to the burst when it is sent.

Both faces run the MongoDB timer stores' procedures (:mod:`flowsched.mongo.timer_claims`),
where a claim is checked in one of two ways before its handler is called:

* a claim that records the start of the claims it takes (``claim_started``, the node core's
  start on claim): reported, at the time its claiming update was sent, for the claims it
  *won* (a claim that failed to take a form - the form was replaced or cancelled first - is
  no check of another node's claim of it);
* a confirm of claims that waited for a worker (``confirm_start``): reported, at the time
  its update was sent, for the claims it confirmed.

The time reported is when the procedure handed its last write to the items collection to
the driver (the claiming or confirming update: what is read back or written to the history
after it comes later), so a check is never reported earlier than it was sent.

The block also yields a :class:`ServerRecord`: the forms whose start the server both
acknowledged and lost. A claim (or confirm) is fenced on the form's generation, which a
replace renews and a cancel removes, so on a server that keeps single-document atomicity a
cancel or replace that removes a form it started returns it with that start
(``claim.at`` under the claim's token) - which is how ``history`` learns of it. A form
whose recorded start the server acknowledged (the update counted it) while its removal
returned it without that start is one the server broke that atomicity on (SecantusDB
0.7.0b3 does, under concurrent writes to one document): no store can list a start the
server lost, so :meth:`ServerRecord.excused` names such stale starts apart.

>>> with reported_checks(burst) as server:  # doctest: +SKIP
...     report = server.excused(burst.run(operations=300))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from flowsched.testing.seam_burst import BurstReport, StaleStart

__all__ = ["ServerRecord", "reported_checks"]

_WRITES = frozenset({"bulk_write", "update_one", "update_many"})


class Checked(Protocol):
    """What is told of each check (:meth:`flowsched.testing.seam_burst.SeamBurst.checked`)."""

    def checked(self, item_id: str, generation: int | None, sent: float | None = None) -> None: ...


@dataclass
class ServerRecord:
    """What the server acknowledged and returned around starts (see the module)."""

    started: set[tuple[str, int, str]] = field(default_factory=set)
    """(item id, generation, claim token) of every start the server acknowledged."""
    removed: dict[tuple[str, int], set[str | None]] = field(default_factory=dict)
    """(item id, generation) of each form a cancel or replace removed: the tokens of the
    started claims its removal returned it with (``None``: no started claim)."""
    excused_starts: list[StaleStart] = field(default_factory=list)
    """The stale starts :meth:`excused` set apart (the server lost their recorded start)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def lost(self) -> set[tuple[str, int]]:
        """The forms whose acknowledged start their removal did not return."""
        with self._lock:
            return {
                (item_id, generation)
                for item_id, generation, token in self.started
                if token not in self.removed.get((item_id, generation), {token})
            }

    def excused(self, report: BurstReport) -> BurstReport:
        """``report`` without the stale starts missing from ``history`` whose start the
        server acknowledged and then lost (kept in :attr:`excused_starts`)."""
        lost = self.lost()
        kept = []
        for stale in report.stale:
            if stale.recorded is False and (stale.item, stale.generation) in lost:
                self.excused_starts.append(stale)
            else:
                kept.append(stale)
        return replace(report, stale=kept)


def _token(claim: object) -> str | None:
    """The batch token of a stored claim that recorded a start (``None``: none)."""
    if not isinstance(claim, Mapping) or claim.get("at") is None:
        return None
    return str(claim.get("token"))


def _reporting(
    burst: Checked, server: ServerRecord, procedure: Callable[..., Any]
) -> Callable[..., Any]:
    """``procedure`` (a claim-side procedure returning claims), reporting the claims it
    returns as checked when its last write to the items collection was sent."""
    from flowsched.mongo.timer_writes import batch_of

    def reported(*args: Any, **kwargs: Any) -> Any:
        steps = procedure(*args, **kwargs)
        sent: float | None = None
        result: Any = None
        try:
            op = next(steps)
            while True:
                if getattr(op, "role", None) == "items" and getattr(op, "method", "") in _WRITES:
                    sent = time.monotonic()
                try:
                    result = yield op
                except BaseException as exc:  # thrown into the procedure by its driver
                    op = steps.throw(exc)
                else:
                    op = steps.send(result)
        except StopIteration as done:
            claims: Sequence[Any] = done.value or ()
        if sent is not None:
            for claim in claims:
                burst.checked(claim.item.id, claim.item.generation, sent)
        with server._lock:
            server.started.update((c.item.id, c.item.generation, batch_of(c)) for c in claims)
        return claims

    return reported


def _recording(server: ServerRecord, keep: Callable[..., Any]) -> Callable[..., Any]:
    """``TimerSteps._keep_running`` (told the forms a cancel or replace removed, as the
    server returned them), recording each form's started claim."""

    def kept(self: Any, removed: list[Any]) -> Any:
        with server._lock:
            for doc in removed:
                if isinstance(doc, Mapping) and isinstance(doc.get("generation"), int):
                    key = (doc["_id"], doc["generation"])
                    server.removed.setdefault(key, set()).add(_token(doc.get("claim")))
        return (yield from keep(self, removed))

    return kept


@contextmanager
def reported_checks(burst: Checked) -> Iterator[ServerRecord]:
    """Report to ``burst`` every check the MongoDB nodes of this process send, while the
    block runs (the procedures are patched, then restored); yields the
    :class:`ServerRecord` of the block."""
    from flowsched.mongo.timer_claims import ClaimSteps
    from flowsched.mongo.timer_ops import TimerSteps

    server = ServerRecord()
    originals = {name: getattr(ClaimSteps, name) for name in ("claim_started", "confirm_start")}
    keep = TimerSteps._keep_running
    for name, original in originals.items():
        setattr(ClaimSteps, name, _reporting(burst, server, original))
    TimerSteps._keep_running = _recording(server, keep)  # type: ignore[method-assign]
    try:
        yield server
    finally:
        for name, original in originals.items():
            setattr(ClaimSteps, name, original)
        TimerSteps._keep_running = keep  # type: ignore[method-assign]
