"""Internal: delivery history on MongoDB - ``<name>_history``, written with the settlements.

One document per item id that has run::

    {_id: <item id>, attempts: [<attempt>, ...], expires_at: <BSON date>}
    <attempt> = {k: <key>, node, started, ended, outcome, error_type, error_message,
                 traceback, generation, attempt}

* **No round trip of its own on the firing path.** The node records each finished attempt
  in memory (:class:`MongoHistory`, the delivery core's journal); the timer store's settle
  (:meth:`MongoHistory.settle_steps`) sends the records gathered so far with the
  settlements it writes anyway: on MongoDB 8.0+ (and the wire server) in the settle's own
  command (one client-level ``bulkWrite`` for both collections,
  :mod:`flowsched.mongo.together`), on an older server one more command in the same settle
  (one upsert per item, one ``bulk_write``), whatever the batch's size.
* **Bounded per item**: ``$push`` with ``$slice`` keeps the last ``limit`` attempts.
* **Kept after the item is gone**: ``expires_at`` is the last attempt's end plus
  ``retention``; a TTL index (``history_ttl``) removes the document then. The TTL monitor
  compares ``expires_at`` with the server's *wall* clock, not with the scheduler's: so the
  end counted is the later of the last attempt's end and the wall clock's now
  (:func:`expires_at`) - under a virtual clock set in the past (a test's
  :class:`~flowsched.clock.ManualClock`) a history is then kept ``retention`` of real time,
  not removed at once. Retention is housekeeping in real time.
* **Lapsed claims**: a node that claims an item still carrying an earlier, unsettled claim
  (its node died or was cut off: :attr:`~flowsched.mongo.settlement.Claim.suspect`) records
  that claim as an attempt with ``outcome="lapsed"``, ended at its lease's end.
* **Times** are the database's (the node's :class:`~flowsched.mongo.server_clock.ServerClock`),
  in whole milliseconds.

A write that fails is kept and sent with the next settlement; one repeated after a lost reply
may store an attempt twice, which :meth:`MongoHistory.read_steps` drops (by ``k``). The running
attempt is read from the item's claim: from ``claim.started``, the start the claim recorded
(database time: :mod:`flowsched.mongo.start_check`), or, for a claim that waited in the
queue and was checked before its handler, from ``claim.at`` (when it was claimed). A
delivery whose start was recorded keeps that start when it ends (:meth:`MongoHistory.recorded`),
so a cancel or replace that returned after the claim finds it in ``history``: open while its
item's claim is there, then, once its outcome is written, ended after the cancel and started
before it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from flowsched.clock import capped
from flowsched.history import HistoryPolicy, Journal, OpenAttempt, finished_attempt
from flowsched.mongo.commands import Call, Counts, Steps, Write
from flowsched.mongo.documents import bson_utc, truncate_ms
from flowsched.mongo.store import TimerStore
from flowsched.mongo.together import together_steps
from flowsched.mongo.transient import is_transient
from flowsched.outcomes import Outcome
from flowsched.records import ScheduleItem
from flowsched.steering import ATTEMPT_OUTCOMES, Attempt

__all__ = [
    "HISTORY_TTL_INDEX",
    "MongoHistory",
    "Record",
    "attempt_from_document",
    "expires_at",
    "running_attempt",
]

HISTORY_TTL_INDEX = "history_ttl"

MAX_PENDING = 10_000
"""The most attempt records a node keeps unwritten (through an outage)."""

log = logging.getLogger("flowsched.mongo")

Record = tuple[Any, dict[str, Any]]
"""One attempt to write: the item id and the attempt's sub-document."""


def expires_at(
    last: datetime,
    retention: timedelta,
    wall: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> datetime:
    """When the TTL index may remove a history whose last attempt ended at ``last`` (by
    the scheduler's clock): ``retention`` after the later of ``last`` and the wall clock's
    now. The TTL monitor goes by the server's wall clock, so an expiry counted from a
    virtual clock in the past would remove the history at once. Near the year 9999: the
    last date (:func:`~flowsched.clock.capped`)."""
    return capped(max(last, wall()), retention)


class MongoHistory(Journal):
    """The history journal of one MongoDB node: records attempts as they end, hands them to
    the next settlement (:meth:`take`), reads an item's history back. Thread-safe."""

    def __init__(
        self, clock: Callable[[], datetime], node: str, policy: HistoryPolicy | None = None
    ) -> None:
        super().__init__(clock, node)
        self.policy = policy or HistoryPolicy()
        self._lock = threading.Lock()
        self._pending: list[Record] = []
        self._recorded: dict[tuple[str, int | None], datetime] = {}  # see recorded()
        self.wall: Callable[[], datetime] = lambda: datetime.now(UTC)
        """The wall clock the expiry is counted from (see :func:`expires_at`)."""

    def recorded(self, starts: Sequence[tuple[Any, int, datetime]]) -> None:
        """The starts a claim recorded ((item id, generation, ``claim.started``)): the
        attempt of each is opened at its recorded start, not when its handler is called
        (CONTRACT section 15: ``started`` is when the node recorded the start)."""
        for item_id, generation, started in starts:
            self._recorded[(repr(item_id), generation)] = started

    def settled(self, keys: Iterable[tuple[Any, int | None]]) -> None:
        """Forget the recorded starts of the claims settled ((item id, generation))."""
        for item_id, generation in keys:
            self._recorded.pop((repr(item_id), generation), None)

    def opened(self, item: ScheduleItem, attempt: int) -> OpenAttempt:
        started = self._recorded.pop((repr(item.id), item.generation), None)
        return OpenAttempt(item.id, item.generation, attempt, started or self.now())

    def closed(self, opened: OpenAttempt, outcome: Outcome) -> None:
        attempt = finished_attempt(opened, self.node, self.now(), outcome)
        record = (opened.item_id, attempt_document(attempt, uuid.uuid4().hex))
        with self._lock:
            self._pending.append(record)

    def lapsed(self, document: Mapping[str, Any], lease: timedelta) -> None:
        """Record the earlier claim ``document`` carried when this node claimed it."""
        claim = document.get("claim")
        if not isinstance(claim, Mapping):
            return
        try:
            ended = bson_utc(claim["lease_until"])
            at = _start_of(claim)
            started = bson_utc(at) if isinstance(at, datetime) else ended - lease
            owner = str(claim.get("owner", "?"))
            token = str(claim.get("token", uuid.uuid4().hex))
        except (KeyError, TypeError, ValueError, OverflowError):
            return  # a claim we cannot read: no record (the claim itself was checked)
        generation = document.get("generation")
        attempts = document.get("attempts")
        attempt = Attempt(
            owner,
            started,
            ended,
            "lapsed",
            error_message="its node's lease ran out before an outcome was written",
            generation=generation if isinstance(generation, int) else None,
            attempt=attempts if isinstance(attempts, int) else 0,
        )
        with self._lock:
            self._pending.append((document["_id"], attempt_document(attempt, token)))

    def take(self) -> list[Record]:
        """The records not yet written (now the caller's, see :meth:`put_back`)."""
        with self._lock:
            pending, self._pending = self._pending, []
        return pending

    def put_back(self, records: Sequence[Record]) -> None:
        """Records whose write failed: sent with the next settlement (at most
        :data:`MAX_PENDING` are kept through an outage; the oldest go first)."""
        if records:
            with self._lock:
                self._pending[:0] = records
                excess = len(self._pending) - MAX_PENDING
                if excess > 0:
                    del self._pending[:excess]
                    log.warning("history: %d attempt records dropped (outage)", excess)

    def writes(self, records: Sequence[Record]) -> list[Write]:
        """One upsert per item: push its new attempts (keeping the last ``limit``) and move
        its expiry to the last one's end (not before the wall clock's now) plus the
        retention (:func:`expires_at`)."""
        by_item: dict[str, tuple[Any, list[dict[str, Any]]]] = {}
        for item_id, record in records:
            by_item.setdefault(repr(item_id), (item_id, []))[1].append(record)
        writes = []
        for item_id, attempts in by_item.values():
            last = max(a["ended"] or a["started"] for a in attempts)
            push = {"$each": attempts, "$slice": -self.policy.limit}
            update = {
                "$push": {"attempts": push},
                "$set": {"expires_at": expires_at(last, self.policy.retention, self.wall)},
            }
            writes.append(Write({"_id": item_id}, update, upsert=True))
        return writes

    def kept(self, document: Mapping[str, Any]) -> Write | None:
        """The upsert that keeps in the history the attempt ``document``'s claim recorded as
        started (``claim.started``), keyed by the claim's token, for a cancel or replace that
        removes the claim (:mod:`flowsched.mongo.keep_started`); ``None`` without a recorded
        start. It is kept open, flagged ``kept``, with the claim's lease end: on reading, the
        run's own record takes its place, and with none by the lease's end it reads
        ``"lapsed"`` there once its node has no live heartbeat (it died or was cut off), as
        a claim that takes an item over says; while its node is alive it stays open."""
        claim = document.get("claim")
        if not isinstance(claim, Mapping) or not isinstance(claim.get("started"), datetime):
            return None
        attempt = running_attempt(document)
        if attempt is None:
            return None
        number = document.get("attempts")
        attempt = replace(attempt, attempt=number if isinstance(number, int) else 0)
        record = attempt_document(attempt, str(claim.get("token")))
        record["kept"] = True
        lease_until = claim.get("lease_until")
        if isinstance(lease_until, datetime):
            record["lease_until"] = truncate_ms(bson_utc(lease_until))
        [write] = self.writes([(document["_id"], record)])
        return write

    def settle_steps(
        self,
        store: TimerStore,
        writes: Sequence[Write],
        records: Sequence[Record],
        items: Callable[[Sequence[Write]], Steps[Counts]],
    ) -> Steps[Counts]:
        """A settle's ``writes`` to the items (``items`` applies some alone, counted) and
        ``records`` with them: in the same command where the server can (MongoDB 8.0+ and
        the wire server, :mod:`flowsched.mongo.together`), else after them
        (:meth:`write_steps`). An error of the items' writes puts ``records`` back (they
        ride on the next settle) and propagates; the history's own never does."""
        try:
            history = self._writes_or_none(records) if writes else []
            if history:
                parts = (("items", writes), ("history", history))
                done = yield from together_steps(parts, store.together)
                if done is not None:
                    counts, (refused_items, refused_history) = done.counts[0], done.refused
                    if refused_items:  # on their own, for the old error (or outcome)
                        counts += yield from items(refused_items)
                    if refused_history:
                        log.error("history: %d attempt writes refused", len(refused_history))
                    return counts
            counts = yield from items(writes)
        except BaseException:
            self.put_back(records)
            raise
        yield from self.write_steps(store, records)
        return counts

    def _writes_or_none(self, records: Sequence[Record]) -> list[Write]:
        """:meth:`writes`, or none where they cannot be made (:meth:`write_steps` says why)."""
        try:
            return self.writes(records)
        except Exception:
            return []

    def write_steps(self, store: TimerStore, records: Sequence[Record]) -> Steps[None]:
        """Write ``records`` (one ``bulk_write``). Never raises an ``Exception``: the history
        is a record, not a delivery, so the settle it rides on stands. A write that fails is
        put back for the next settle if the error is transient, else dropped (logged)."""
        if not records:
            return
        try:
            yield from store.write_steps("history", self.writes(records))
        except Exception as exc:
            if is_transient(exc):
                self.put_back(records)
                log.debug("history write failed, kept for the next settle: %s", exc)
            else:
                log.error("dropping %d attempt records the server refused: %s", len(records), exc)
        except BaseException:
            self.put_back(records)
            raise

    def read(self, store: TimerStore, item_id: Any) -> list[Attempt]:
        """:meth:`read_steps` on ``store``'s synchronous collections."""
        return store.run(self.read_steps(store, item_id))

    def read_steps(self, store: TimerStore, item_id: Any) -> Steps[list[Attempt]]:
        """The history of ``item_id``, oldest first: its stored attempts, and the running one
        read from the item's claim (two ``find_one``; one more per node of a kept attempt
        past its lease: is it alive?)."""
        found = yield Call("history", "find_one", ({"_id": item_id},))
        fields = {"claim": 1, "generation": 1}
        document = yield Call("items", "find_one", (store.key(item_id), fields))
        now = self.now()
        entries: list[tuple[Attempt, bool]] = []  # (attempt, kept by a cancel or replace)
        seen: set[str] = set()
        ends: dict[int, datetime] = {}  # kept open attempts' lease ends, by place
        stored = found.get("attempts") if isinstance(found, Mapping) else None
        for entry in stored if isinstance(stored, list) else []:
            attempt = attempt_from_document(entry)
            mark = entry.get("k") if isinstance(entry, Mapping) else None
            if attempt is None or (isinstance(mark, str) and mark in seen):
                continue
            if isinstance(mark, str):
                seen.add(mark)
            kept = bool(entry.get("kept"))
            lease = entry.get("lease_until")
            if kept and attempt.ended is None and isinstance(lease, datetime):
                ends[len(entries)] = bson_utc(lease)
            entries.append((attempt, kept))
        # Past its lease, a kept attempt still runs while its node is alive (a heartbeat in
        # ``<name>_nodes``, one ``find_one`` per such node: there is rarely more than one);
        # with none (its node died, or never advertised) it reads "lapsed" at the lease end.
        alive: dict[str, bool] = {}
        for place, lease_end in ends.items():
            attempt = entries[place][0]
            if lease_end > now:
                continue
            if attempt.node not in alive:
                beat = {"_id": attempt.node, "expires_at": {"$gt": now}}
                alive[attempt.node] = (yield Call("nodes", "find_one", (beat,))) is not None
            if not alive[attempt.node]:
                entries[place] = (_lapsed(attempt, lease_end), True)
        running = _running(document, seen)
        if running is not None:
            entries.append((running, False))
        # A kept attempt gives way to its run's own record; an open one to its end.
        own = {(a.generation, a.started) for a, kept in entries if not kept and a.ended}
        ended = {(a.generation, a.started) for a, _ in entries if a.ended is not None}
        attempts = [
            a
            for a, kept in entries
            if not (kept and (a.generation, a.started) in own)
            and not (a.ended is None and (a.generation, a.started) in ended)
        ]
        attempts.sort(key=lambda a: a.started)
        return attempts[-self.policy.limit :]


def _lapsed(attempt: Attempt, lease_until: datetime) -> Attempt:
    """A kept open ``attempt`` whose lease ended with no outcome and whose node is gone:
    ``"lapsed"`` at the lease's end."""
    message = "its node's lease ran out before an outcome was written"
    return replace(attempt, ended=lease_until, outcome="lapsed", error_message=message)


def attempt_document(attempt: Attempt, key: str) -> dict[str, Any]:
    """The sub-document of ``attempt`` (``key``: its identity, against repeated writes)."""
    return {
        "k": key,
        "node": attempt.node,
        "started": truncate_ms(attempt.started),
        "ended": None if attempt.ended is None else truncate_ms(attempt.ended),
        "outcome": attempt.outcome,
        "error_type": attempt.error_type,
        "error_message": attempt.error_message,
        "traceback": attempt.traceback,
        "generation": attempt.generation,
        "attempt": attempt.attempt,
    }


def attempt_from_document(entry: object) -> Attempt | None:
    """The :class:`Attempt` a sub-document holds; ``None`` for one that is not readable."""
    if not isinstance(entry, Mapping):
        return None
    try:
        started = bson_utc(entry["started"])
        ended = entry.get("ended")
        outcome = entry.get("outcome")
        generation = entry.get("generation")
        number = entry.get("attempt")
        return Attempt(
            str(entry.get("node", "?")),
            started,
            None if ended is None else bson_utc(ended),
            outcome if outcome in ATTEMPT_OUTCOMES else None,
            _text(entry.get("error_type")),
            _text(entry.get("error_message")),
            _text(entry.get("traceback")),
            generation if isinstance(generation, int) else None,
            number if isinstance(number, int) else 0,
        )
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def running_attempt(document: object) -> Attempt | None:
    """The attempt running on ``document``'s claim (started at ``claim.at``), if any."""
    return _running(document, set())


def _start_of(claim: Mapping[str, Any]) -> object:
    """When ``claim``'s attempt started: the start the claim recorded (``started``), else
    when it was claimed (``at``: a queued claim, checked before its handler was called)."""
    started = claim.get("started")
    return started if isinstance(started, datetime) else claim.get("at")


def _running(document: object, seen: set[str]) -> Attempt | None:
    """The attempt running on the item's current claim, if it has one with a start."""
    if not isinstance(document, Mapping):
        return None
    claim = document.get("claim")
    if not isinstance(claim, Mapping) or claim.get("token") in seen:
        return None
    at = _start_of(claim)
    if not isinstance(at, datetime):
        return None
    generation = document.get("generation")
    return Attempt(
        str(claim.get("owner", "?")),
        bson_utc(at),
        generation=generation if isinstance(generation, int) else None,
    )
