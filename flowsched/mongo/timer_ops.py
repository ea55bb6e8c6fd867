"""Internal: every operation of the MongoDB timer stores, written once, without I/O.

:class:`TimerSteps` holds what one store keeps (its collections by role, its clock, its
history journal) and returns each operation as a procedure (:mod:`flowsched.mongo.commands`):
:class:`~flowsched.mongo.timer_store.MongoTimerStore` runs it with ``drive`` on pymongo's
``Collection`` (or mongomock), :class:`~flowsched.mongo.async_timer_store.AsyncMongoTimerStore`
with ``drive_async`` on ``AsyncCollection``: the two stores differ only in awaiting.

Documents are ``MongoScheduler``'s (:mod:`flowsched.mongo.documents`, ``bucket`` 0; paused
as it pauses them: the route moved aside, ``paused: true``), plus ``claim.at`` once a
claim's start is confirmed and ``lapses`` once a started run is lost (the form's runs lost
in a row: :attr:`~flowsched.store.Claim.lapsed`; the sweeper ignores it); the indexes
are ``MongoScheduler``'s (:func:`~flowsched.mongo.indexes.index_steps`); the history is
``MongoScheduler``'s ``<name>_history`` (one document per item, bounded, TTL-expired:
:mod:`flowsched.mongo.history`). The firing path is in :mod:`flowsched.mongo.timer_claims`.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import Any, TypedDict

import pymongo
from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from flowsched.clock import Clock, capped, ensure_utc
from flowsched.config.scheduler_settings import LONGEST_SETTING, MAX_BUCKETS
from flowsched.errors import SchedulerUnavailable
from flowsched.history import DEFAULT_HISTORY_RETENTION, HistoryPolicy
from flowsched.mongo.arguments import check_count, check_positive, check_served, storable_id
from flowsched.mongo.commands import Call, Find, Steps, Write, counted_write_steps
from flowsched.mongo.documents import (
    bson_utc_or_none,
    dead_letters_from,
    item_document,
    new_generation,
    truncate_ms,
)
from flowsched.mongo.history import MongoHistory, attempt_document, running_attempt
from flowsched.mongo.indexes import index_steps
from flowsched.mongo.nodes import heartbeat_document
from flowsched.mongo.quarantine import StorePoison, readable
from flowsched.mongo.server_clock import DEFAULT_MAX_SKEW
from flowsched.mongo.store import MongoCollections
from flowsched.mongo.timer_claims import ClaimSteps, Doc
from flowsched.mongo.timer_history import info_of, item_filter, state_filter
from flowsched.mongo.timer_query import oldest_steps, pause_steps, resume_steps
from flowsched.mongo.together import together_steps
from flowsched.records import DeadLetter, ScheduleItem, set_generation
from flowsched.steering import Attempt, TimerInfo, TimerPage
from flowsched.store.call_budget import budget_left
from flowsched.store.info import dead_info
from flowsched.store.measured_clock import MeasuredClock
from flowsched.store.paging import encode_cursor
from flowsched.store.records import QuarantinedRecord, TimerSelection

__all__ = ["MongoStoreArgs", "MongoStoreAttributes", "TimerSteps"]

_RUNNING = {"_id": 1, "generation": 1, "attempts": 1, "claim": 1}
_BEFORE = ReturnDocument.BEFORE
_DUPLICATE_KEY = 11000  # the server's code: a unique index (here `_id`) refused the write
_READY = {"ready_at": 1}
"""What a removal reads back of the form it removed: its running attempt, if any."""


class MongoStoreArgs(TypedDict, total=False):
    """The keywords of both MongoDB stores (their defaults are :class:`TimerSteps`')."""

    clock: Clock | None
    history_limit: int
    history_retention: timedelta
    buckets: int
    serve_buckets: Iterable[int] | None
    node: str
    op_timeout: timedelta | None
    max_clock_skew: timedelta
    node_clock: Clock | None


class TimerSteps(ClaimSteps):
    """The operations of one store on ``collection`` (sync or async: the procedures do no
    I/O), judged by ``clock`` when given, else by the database's measured time."""

    def __init__(
        self,
        collection: Any,
        *,
        clock: Clock | None = None,
        history_limit: int = 20,
        history_retention: timedelta = DEFAULT_HISTORY_RETENTION,
        buckets: int = 1,
        serve_buckets: Iterable[int] | None = None,
        node: str = "store",
        op_timeout: timedelta | None = None,
        max_clock_skew: timedelta = DEFAULT_MAX_SKEW,
        node_clock: Clock | None = None,
    ) -> None:
        super().__init__()
        check_count("buckets", buckets, MAX_BUCKETS)
        served = check_served(serve_buckets, buckets)
        if op_timeout is not None and (
            not isinstance(op_timeout, timedelta) or op_timeout <= timedelta(0)
        ):
            raise ValueError(f"op_timeout must be a positive timedelta or None, got {op_timeout!r}")
        self.op_timeout = op_timeout
        self.clock = clock
        self.roles = MongoCollections(collection, buckets, served, node)
        self.poison = StorePoison(self.roles, node)
        ours = list(self.roles.served)
        self.served = ours[0] if len(ours) == 1 else {"$in": ours}
        check_positive("max_clock_skew", max_clock_skew, LONGEST_SETTING)
        self.time = MeasuredClock(
            clock, None, max_skew=max_clock_skew, what="MongoDB", node=node_clock
        )
        self._nodes_indexed = False
        self.rng = random.Random()
        """Where generations are drawn (a simulation seeds it: a replay stores the same)."""
        policy = HistoryPolicy(history_limit, history_retention)
        self.journal = MongoHistory(self.time.estimate, node, policy)
        self.name = str(collection.full_name)

    def limit(self, what: str) -> AbstractContextManager[object]:
        """The driver's time limit of one store call (``pymongo.timeout``): ``op_timeout``, or
        what is left of the port call's budget (:mod:`flowsched.store.call_budget`) when that
        ends sooner; none without ``op_timeout``. A budget already spent sends nothing."""
        if self.op_timeout is None:
            return nullcontext()
        seconds = self.op_timeout.total_seconds()
        left = budget_left()
        if left is not None:
            if left <= 0:
                raise SchedulerUnavailable(
                    f"{self.name}: {what}: op_timeout spent before the call; nothing was sent"
                )
            seconds = min(seconds, left)
        return pymongo.timeout(seconds)

    def setup(self) -> Steps[None]:
        """Record the bucket count, or check it against the one the collection's first node
        recorded (a :class:`~flowsched.ConfigError` if they differ), and create the indexes
        (idempotent): run once, before the first operation."""
        yield from self.roles.check_buckets_steps()
        yield from index_steps()

    def ping(self) -> Steps[None]:
        """Reach the server once."""
        yield Call("database", "command", ("ping",))

    def now(self) -> Steps[datetime]:
        yield from self.measure()
        return truncate_ms(self.time.now())

    def _late(self, deadline: datetime | None) -> Steps[bool]:
        """Whether the database's time may be past ``deadline`` (checked before sending)."""
        if deadline is None:
            return False
        yield from self.measure()
        return self.time.latest() > deadline

    # -- items ---------------------------------------------------------------------

    def put(self, item: ScheduleItem, deadline: datetime | None) -> Steps[ScheduleItem]:
        if not isinstance(item, ScheduleItem):
            raise TypeError(f"put: expected a ScheduleItem, got {type(item).__name__}")
        if (yield from self._late(deadline)):
            raise SchedulerUnavailable(
                f"put({item.id!r}): past its deadline {deadline}; nothing was sent"
            )
        yield from self.measure()  # the form's stamp: never behind the database's clock
        generation = new_generation(self.rng)
        due = truncate_ms(item.due)
        if item.generation == 0 and due == item.due:
            set_generation(item, generation)
            stored = item
        else:
            stored = item.moved(due, item.previous).with_generation(generation)
        document = item_document(stored, generation, bucket=self.roles.bucket(item.id))
        document["stored_at"] = truncate_ms(self.time.latest())
        key = {**self.roles.key(item.id), **self.roles.fence(deadline)}
        letter = Write({"_id": item.id})  # a new form supersedes its id's dead letter
        try:  # a form not running (none, unclaimed, claimed and not started): one update
            idle = {**key, "claim.at": {"$exists": False}}  # (mongomock: not None)
            form = Write(idle, replacement=document, upsert=True)
            # With the letter's removal after it, in one command where the server can (in
            # order: no letter goes without its form); else, or refused, each on its own.
            parts = (("items", [form]), ("dead", [letter]))
            done = yield from together_steps(parts, self.roles.together, ordered=True)
            if done is not None and not any(done.refused):
                return stored
            if done is not None and done.codes.get(0) == _DUPLICATE_KEY:
                raise DuplicateKeyError("the upsert met a form it did not match", _DUPLICATE_KEY)
            if done is None or done.refused[0]:  # on its own: its error, or it goes now
                yield Call("items", "replace_one", (idle, document), {"upsert": True})
        except DuplicateKeyError:  # running (its attempt is kept), fenced out, or a race
            options = {"projection": _RUNNING, "upsert": True, "return_document": _BEFORE}
            try:
                old = yield Call("items", "find_one_and_replace", (key, document), options)
            except DuplicateKeyError:  # two upserts of one new id raced: now it is there
                old = yield from self._replace_by_id(item.id, document, deadline)
            yield from self._keep_running([old])
        yield Call("dead", "delete_one", (letter.filter,))
        return stored

    def _replace_by_id(self, item_id: str, document: Doc, deadline: datetime | None) -> Steps[Doc]:
        """The upsert met a document of ``item_id`` it did not match: one another upsert
        stored meanwhile, one stored before buckets (no ``bucket``: replaced by ``_id``), or -
        with ``deadline`` - one stored after it (:meth:`MongoCollections.fence`): that newer
        form stays, and the write applies nothing."""
        found = {"_id": item_id, **self.roles.fence(deadline)}
        options = {"projection": _RUNNING, "return_document": _BEFORE}
        old = yield Call("items", "find_one_and_replace", (found, document), options)
        if old is None:
            raise SchedulerUnavailable(
                f"put({item_id!r}): a newer form was stored after its deadline {deadline}; "
                "nothing was applied"
            )
        return dict(old)

    def _keep_running(self, removed: list[Doc | None]) -> Steps[None]:
        """Record the attempts that were running on forms just removed or replaced (their
        settles will be stale): a caller learns from ``history`` that they had started.
        Kept open with the claim's lease end (``kept``): the run's own record, written by its
        stale settle, takes its place; with none by then, and its node gone, it reads
        ``"lapsed"`` (:meth:`MongoHistory.read_steps`)."""
        records = []
        for doc in removed:
            running = running_attempt(doc)
            if doc is not None and running is not None:
                claim = doc["claim"]
                running = _with_attempt(running, doc.get("attempts"))
                kept = attempt_document(running, f"{claim.get('token')}:kept")
                kept["kept"], ends = True, bson_utc_or_none(claim.get("lease_until"))
                if ends is not None:
                    kept["lease_until"] = truncate_ms(ends)
                records.append((doc["_id"], kept))
        if records:
            yield from self._history(records)

    def get(self, item_id: str) -> Steps[ScheduleItem | None]:
        if not storable_id(item_id):
            return None
        read = readable((yield Call("items", "find_one", (self.roles.key(item_id),))), self.name)
        return read[0] if read is not None else None

    def exists(self, item_id: str) -> Steps[bool]:
        if not storable_id(item_id):
            return False
        return (yield Call("items", "find_one", (self.roles.key(item_id), {"_id": 1}))) is not None

    def remove(
        self, item_id: str, generation: int | None, deadline: datetime | None
    ) -> Steps[bool]:
        if not storable_id(item_id) or (yield from self._late(deadline)):
            return False
        found: Doc = {**self.roles.key(item_id), **self.roles.fence(deadline)}
        if generation is not None:
            found["generation"] = generation
        old = yield Call("items", "find_one_and_delete", (found,), {"projection": _RUNNING})
        yield from self._keep_running([old])
        return old is not None

    def remove_flow(self, flow_id: str, deadline: datetime | None) -> Steps[list[str]]:
        if not storable_id(flow_id) or (yield from self._late(deadline)):
            return []
        late = self.roles.fence(deadline)
        query = {"flow_id": flow_id, "bucket": self.roles.every_bucket()}
        found: list[Doc] = yield Find("items", query, _RUNNING)
        if not found:
            return []
        # One delete per form read (fenced by its generation), all in one bulk write; if
        # fewer went, one read says which: a form replaced since stays, and is not reported.
        forms = [(doc["_id"], doc.get("generation")) for doc in found]
        fences = [{"_id": key, "generation": generation, **late} for key, generation in forms]
        writes = [Write(self.roles.keyed(fence)) for fence in fences]
        removed: list[Doc | None] = list(found)
        if (yield from counted_write_steps("items", writes, self.roles.bulk)).deleted < len(found):
            left = yield Find("items", self.roles.keys([key for key, _ in forms]), _RUNNING)
            kept = {doc["_id"] for doc in left}
            removed = [doc for doc in found if doc["_id"] not in kept]
        yield from self._keep_running(removed)
        return sorted(str(doc["_id"]) for doc in removed if doc is not None)

    def next_due(
        self, routes: Collection[str], after: datetime | None, upto: datetime | None = None
    ) -> Steps[datetime | None]:
        # One index range per route and bucket, merged (oldest_steps): never a scan; bounded
        # by ``upto`` if given (the wire server reads a whole range before its limit).
        ready = {
            **({} if after is None else {"$gt": after}),
            **({} if upto is None else {"$lte": upto}),
        }
        found = yield from oldest_steps(sorted(routes), self.roles.served, ready or None, 1, _READY)
        return bson_utc_or_none(found[0].get("ready_at")) if found else None

    def next_wake(
        self, routes: Collection[str], within: timedelta | None = None
    ) -> Steps[datetime | None]:
        """:meth:`next_due` as the node's driver reads time (the best estimate): later by
        the error bound, since a claim takes an item only once the *earliest* the
        database's time can be has reached it - a node woken at the due time itself would
        claim nothing and (no spin) wait for its next poll. ``within``: ``None`` when
        nothing is due by then from now (a node polls again after that long anyway: an
        idle node's poll reads an empty range, not every item stored)."""
        yield from self.measure()
        upto = None if within is None else truncate_ms(capped(self.time.latest(), within))
        when = yield from self.next_due(routes, None, upto)
        if when is None:
            return None
        earliest = self.time.earliest()  # first: the error read is never short
        return when + (self.time.estimate() - earliest)

    # -- heartbeats (flowsched.node.heartbeats) -------------------------------------

    def heartbeat(self, node: str, routes: frozenset[str], ttl: timedelta) -> Steps[None]:
        """Advertise ``node``'s ``routes`` in ``<name>_nodes`` until ``ttl`` from now, with
        its measured clock offset (one upsert; a TTL index, created the first time, removes
        the document of a node that died)."""
        if not self._nodes_indexed:
            index = ([("expires_at", 1)],)
            options = {"name": "expires_at", "expireAfterSeconds": 0}
            yield Call("nodes", "create_index", index, options)
            self._nodes_indexed = True
        offset = None
        if self.time.filter.samples:
            offset = self.time.estimate() - self.time.node.now()
        document = heartbeat_document(routes, self.time.estimate(), ttl, offset)
        yield Call("nodes", "update_one", ({"_id": node}, {"$set": document}), {"upsert": True})

    def leave(self, node: str) -> Steps[None]:
        """Withdraw ``node``'s heartbeat (on close)."""
        yield Call("nodes", "delete_one", ({"_id": node},))

    # -- dead letters, quarantine --------------------------------------------------

    def dead_letters(self) -> Steps[list[DeadLetter]]:
        docs = yield Find("dead", {}, sort=[("dead_at", 1), ("_id", 1)])
        return dead_letters_from(docs, f"{self.name}_dead")

    def requeue(
        self, item_id: str, due: datetime, replace: bool = False
    ) -> Steps[ScheduleItem | None]:
        """The dead letter scheduled again; ``None`` if there is none, or (unless
        ``replace``) if an item of its id was scheduled since it died: that item stays and
        the stale letter is dropped."""
        due = ensure_utc(due, "requeue due")
        if not storable_id(item_id):
            return None
        doc = yield Call("dead", "find_one", ({"_id": item_id},))
        letters = dead_letters_from([doc] if doc is not None else [], f"{self.name}_dead")
        if not letters:
            return None
        if not replace and (yield from self.exists(item_id)):
            yield Call("dead", "delete_one", ({"_id": item_id},))
            return None
        item = letters[0].item
        return (yield from self.put(item.moved(due, item.previous), None))  # drops the letter

    def quarantined(self) -> Steps[list[QuarantinedRecord]]:
        records = []
        for doc in (yield Find("quarantine", {}, sort=[("quarantined_at", 1)])):
            at = bson_utc_or_none(doc.get("quarantined_at"))
            records.append(
                QuarantinedRecord(
                    id=str(doc.get("item_id")),
                    reason=str(doc.get("reason")),
                    quarantined_at=at or truncate_ms(self.time.estimate()),
                    record=dict(doc.get("document") or {}),
                )
            )
        return records

    # -- steering ------------------------------------------------------------------

    def timers(self, query: TimerSelection) -> Steps[TimerPage]:
        now = yield from self.now()
        base = item_filter(query)
        infos: list[TimerInfo] = []
        by_due = [("due", 1), ("_id", 1)]
        if query.state != "dead":
            found = {**base, **state_filter(query.state, now)}
            for doc in (yield Find("items", found, sort=by_due, limit=query.limit + 1)):
                info = info_of(doc, now, readable(doc, self.name))
                if info is not None:
                    infos.append(info)
        if query.state in (None, "dead"):
            docs = yield Find("dead", base, sort=by_due, limit=query.limit + 1)
            infos.extend(dead_info(letter) for letter in dead_letters_from(docs, self.name))
        infos.sort(key=lambda info: (info.due, info.id))
        page = infos[: query.limit]
        more = len(infos) > query.limit
        return TimerPage(page, encode_cursor(page[-1].due, page[-1].id) if more else None)

    def history(self, item_id: str) -> Steps[list[Attempt]]:
        if not storable_id(item_id):
            return []
        yield from self._history([])  # records kept from a failed write go first
        return (yield from self.journal.read_steps(self.roles, item_id))

    def pause(self, item_id: str) -> Steps[bool]:
        """``MongoScheduler``'s pause: the route moved aside (no claim query reads it)."""
        if not storable_id(item_id):
            return False
        return (yield from pause_steps(self.roles, item_id))

    def resume(self, item_id: str) -> Steps[bool]:
        """``MongoScheduler``'s resume: the route back; an unclaimed item whose due passed is
        due now (a recurring one at its next slot after now: missed ones not replayed)."""
        if not storable_id(item_id):
            return False
        now = yield from self.now()
        return (yield from resume_steps(self.roles, item_id, now))


def _with_attempt(running: Attempt, attempts: object) -> Attempt:
    """``running`` numbered by the form's failed attempts before it."""
    number = attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else 0
    return Attempt(running.node, running.started, generation=running.generation, attempt=number)


class MongoStoreAttributes:
    """What both MongoDB stores show of their :class:`TimerSteps` (``steps``): what the
    node's write fence reads (:mod:`flowsched.node.write_fence`)."""

    steps: TimerSteps
    claim_round_trips = 2
    """A claim's round trips (a ``find`` and an ``update_many``): a node with few workers
    for its batch queues its claims (:func:`flowsched.node.common.starts_on_claim`)."""

    @property
    def op_timeout(self) -> timedelta | None:
        """The longest a call takes before it gives up (``None``: no limit)."""
        return self.steps.op_timeout

    @property
    def clock(self) -> Clock | None:
        """The injected clock time is judged by, or ``None`` (the database's, measured)."""
        return self.steps.clock

    @property
    def time(self) -> MeasuredClock:
        """The store's estimate of the database's clock, with its error bound."""
        return self.steps.time
