"""Internal: push wake-up, a change stream that tells a node at once of items made due elsewhere.

Polling is the source of truth: every node sweeps at least once per ``poll_interval``, and
an item is only ever delivered by a claim. What a change stream adds is latency: without
it, a timer that node A schedules due in 300 ms is seen by node B (the only node that
handles its kind, say) at B's next poll, up to a whole poll later. With it, B hears of the
write within milliseconds and plans a sweep at the item's due time.

:class:`WakeUp` runs one thread per node that watches the timers collection for writes that
leave an item unclaimed with a ``ready_at`` (fresh schedules, replacements, redeliveries,
releases, moves to a recurring item's next slot; not claims nor lease renewals, filtered on
the server) and calls ``poke(ready_at)``; the sweeper ignores a poke that is not sooner than
its next planned sweep. It costs nothing when nothing is written: one awaiting ``getMore``
per ``max_await`` that the server parks until a write arrives.

While a wake-up could start no claim (``paused()``: a claim is out, or the node may take no
more - it holds all it may, or owes a batch of outcomes: ``NodeCore.saturated``), the stream
is left unread. Reading it then is
not free: each ``getMore`` has the server filter every write of the burst, the node's own
claims and settlements included - on the wire server, with 2,000 timers due within 1 s,
about a fifth of the server's work and half the node's round trips.
After a pause of :data:`REOPEN_AFTER` or more, the stream is opened again *from now* (the
burst's writes are of no interest) and a sweep is poked at once, which finds whatever another
node wrote meanwhile; after a shorter one it is read on where it stopped (a trickle of
timers does not reopen it over and over).

Failure is never fatal, and never silent more than once:

* a server or stand-in without change streams (a standalone ``mongod``, mongomock): logged
  once at INFO, and the node polls only;
* a stream that breaks (outage, failover): logged once at WARNING, then reopened with
  backoff, resuming after the last event seen (or from now, if the server no longer has
  that point); every reopening pokes a sweep at once, since events may have been missed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pymongo.collection import Collection
from pymongo.errors import OperationFailure, PyMongoError

from flowsched.mongo.documents import bson_utc
from flowsched.mongo.transient import OutageBackoff

__all__ = ["MAX_AWAIT", "PIPELINE", "REOPEN_AFTER", "WakeUp"]

log = logging.getLogger("flowsched.mongo")

MAX_AWAIT = timedelta(seconds=5)
"""The longest a change stream's ``getMore`` waits on the server before coming back empty."""

PIPELINE: list[dict[str, Any]] = [
    {
        "$match": {
            "$or": [
                {"operationType": {"$in": ["insert", "replace"]}, "fullDocument.claim": None},
                # A settle sets claim to null explicitly; a claim sets it to a lease and a
                # renewal only touches claim.lease_until: those two never wake anyone.
                {
                    "operationType": "update",
                    "updateDescription.updatedFields.claim": {"$type": "null"},
                },
            ]
        }
    },
    {
        "$project": {
            "operationType": 1,
            "fullDocument.ready_at": 1,
            "fullDocument.kind": 1,
            "fullDocument.route": 1,
            "fullDocument.bucket": 1,
            "updateDescription.updatedFields.ready_at": 1,
        }
    },
]
"""What a node watches: unclaimed-and-ready writes, projected to the fields it reads."""

# A server that cannot run change streams: standalone mongod (40573), no such command or
# stage (59, 115, 40324), not enabled (136: majority read concern off).
_UNSUPPORTED = frozenset({40573, 59, 115, 136, 40324})
# The resume point is no longer in the server's oplog: start again from now.
_RESUME_LOST = frozenset({260, 280, 286})

MIN_GAP = 0.05
"""Seconds: the shortest time between two of the stream's ``getMore`` commands."""

REOPEN_AFTER = 1.0
"""Seconds: a stream left unread this long while the node swept is opened again from now."""

Wanted = Callable[[Mapping[str, Any]], bool]
"""Whether this node handles an item, from the projected ``fullDocument``."""


class WakeUp:
    """Watches ``collection`` and calls ``poke(ready_at)`` for items this node may claim."""

    def __init__(
        self,
        collection: Any,
        poke: Callable[[datetime | None], None],
        wanted: Wanted,
        *,
        max_await: timedelta = timedelta(seconds=1),
        name: str = "flowsched-wakeup",
        paused: Callable[[], bool] = lambda: False,
    ) -> None:
        self._collection = collection
        self._poke = poke
        self._paused = paused
        self._wanted = wanted
        self._max_await_ms = max(1, int(max_await.total_seconds() * 1000))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream: Any = None
        self._token: Mapping[str, Any] | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.watching = threading.Event()
        """Set while a stream is open (tests and benchmarks wait on it)."""
        self.events = 0
        """Change events received so far (for tests and metrics)."""

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Close the stream and let the thread end (waits at most ``timeout`` seconds)."""
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            try:
                stream.close()  # ends a getMore in progress rather than waiting it out
            except Exception as exc:  # closing is best effort: the thread ends anyway
                log.debug("closing the change stream: %s", exc)
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        if not isinstance(self._collection, Collection):
            # mongomock and other stand-ins: no change streams (mongomock's attribute
            # access would even return a sub-collection named "watch").
            log.info("push wake-up unavailable on %r: polling only", self._collection)
            return
        backoff = OutageBackoff(first=0.5, cap=30.0)
        broken = False
        opened_once = False
        while not self._stop.is_set():
            try:
                stream = self._open()
            except OperationFailure as exc:
                if exc.code in _UNSUPPORTED:
                    log.info("push wake-up unavailable (%s): polling only", exc)
                    return
                # Whatever the server holds against the resume point (lost from its oplog,
                # after an invalidate...), the next try starts from now; the sweep it pokes
                # at once covers what happened in between.
                self._token = None
                broken = self._broken(exc, broken)
                self._stop.wait(backoff.next())
                continue
            except PyMongoError as exc:
                broken = self._broken(exc, broken)
                self._stop.wait(backoff.next())
                continue
            if opened_once:
                self._poke(None)  # events may have been missed while it was closed
            opened_once = True
            if broken:
                log.warning("push wake-up resumed")
                broken = False
            backoff.reset()
            try:
                if self._follow(stream):
                    self._token = None  # paused: start again from now (see the module's docstring)
            except PyMongoError as exc:
                if self._stop.is_set():
                    return
                if isinstance(exc, OperationFailure) and exc.code in _RESUME_LOST:
                    self._token = None
                broken = self._broken(exc, broken)
                self._stop.wait(backoff.next())
            finally:
                self.watching.clear()
                with self._lock:
                    self._stream = None
                stream.close()

    def _open(self) -> Any:
        stream = self._collection.watch(
            PIPELINE, resume_after=self._token, max_await_time_ms=self._max_await_ms
        )
        with self._lock:
            self._stream = stream
        if self._stop.is_set():  # stop() ran before the stream was published
            stream.close()
        self.watching.set()
        return stream

    def _follow(self, stream: Any) -> bool:
        """Read ``stream`` until it ends; ``True``: it was left unread for REOPEN_AFTER or
        more while the node swept, open a new one from now."""
        asked = 0.0
        paused_at: float | None = None
        while not self._stop.is_set() and stream.alive:
            if self._paused():
                paused_at = time.monotonic() if paused_at is None else paused_at
                if self._stop.wait(MIN_GAP):
                    return False
                continue
            if paused_at is not None:
                if time.monotonic() - paused_at >= REOPEN_AFTER:
                    return True
                paused_at = None
            # At most one getMore per MIN_GAP: a server that answers awaiting getMores on
            # every write (to any collection) or a burst of events costs a bounded number
            # of round trips; events are buffered on the server meanwhile, and a poke only
            # has to land before the item's due time.
            pause = asked + MIN_GAP - time.monotonic()
            if pause > 0 and self._stop.wait(pause):
                return False
            asked = time.monotonic()
            change = stream.try_next()
            token = stream.resume_token
            if token is not None:
                self._token = token
            if change is not None:
                self.events += 1
                self._consider(change)
        return False

    def _consider(self, change: Mapping[str, Any]) -> None:
        document = change.get("fullDocument")
        if isinstance(document, Mapping):
            if not self._wanted(document):
                return
            ready = document.get("ready_at")
        else:  # an update: its kind is not in the event, poke anyway (cheap, bounded)
            fields = change.get("updateDescription", {}).get("updatedFields", {})
            ready = fields.get("ready_at")
        if isinstance(ready, datetime):
            self._poke(bson_utc(ready))

    def _broken(self, exc: Exception, already: bool) -> bool:
        if not already:
            log.warning("push wake-up interrupted, polling until it resumes: %s", exc)
        else:
            log.debug("push wake-up still interrupted: %s", exc)
        return True
