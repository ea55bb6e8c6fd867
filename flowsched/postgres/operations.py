"""Internal: every operation of the PostgreSQL timer store, as a plan written once.

Each function returns a :data:`~flowsched.postgres.plans.Plan`: the statements of
``queries.sql`` it sends (almost always one: a batch is one statement over parallel arrays)
and how their rows become the store interface's typed records. ``PostgresTimerStore`` runs
them on a connection, ``AsyncPostgresTimerStore`` on an asyncio one.

:class:`Setup` is what every plan needs: the table's statements and the store's clock (a
``clock=`` given: its ``now()`` travels as the ``now`` parameter and the SQL compares with
it; none: the server's ``statement_timestamp()``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowsched.clock import Clock, ensure_utc
from flowsched.errors import SchedulerUnavailable
from flowsched.limits import check_id
from flowsched.node.heartbeats import LiveNode
from flowsched.postgres.claim_rows import claims_from_rows
from flowsched.postgres.plans import Plan, Statement
from flowsched.postgres.queries import Queries
from flowsched.postgres.rows import (
    attempt_from_row,
    dead_letter_from_row,
    item_from_row,
    item_params,
    timer_info_from_row,
    utc,
    utc_or_none,
    whole,
)
from flowsched.postgres.settle_columns import (
    CLOSE_COLUMNS,
    completed_columns,
    fences,
    settle_columns,
    settled,
)
from flowsched.records import DeadLetter, ScheduleItem, set_generation
from flowsched.recurrence import Recurrence
from flowsched.steering import Attempt, TimerPage
from flowsched.store.paging import decode_cursor, encode_cursor
from flowsched.store.records import (
    Claim,
    QuarantinedRecord,
    Settlement,
    SettleResult,
    TimerSelection,
)

__all__ = ["Setup"]


@dataclass(frozen=True, slots=True)
class Setup:
    """What the plans of one store share (see the module docstring)."""

    queries: Queries
    clock: Clock | None = None
    notify_within: timedelta = timedelta(seconds=5)
    """A row due within this of now wakes the listening nodes when it is scheduled."""
    history_limit: int = 20
    history_retention: timedelta = timedelta(days=7)
    durable_firing: bool = False
    """``False`` (the default): the firing path's writes - claims, starts, lease renewals,
    releases and outcomes - commit with ``synchronous_commit = off`` (no wait for the WAL
    flush; PostgreSQL still writes them within ``wal_writer_delay``, 200 ms by default).
    Only a crash of the server (not a clean restart, not a node's death) can lose the last of
    them, and what is lost is delivered again: at least once holds. Every write of the
    port's calls (schedule, cancel, pause, resume, requeue) commits durably, and a durable
    commit makes every earlier one durable (the WAL is written in order). ``True``: every
    write waits for the server's ``synchronous_commit`` setting."""

    @classmethod
    def checked(
        cls,
        table: str,
        clock: Clock | None,
        notify_within: timedelta,
        history_limit: int,
        history_retention: timedelta,
        durable_firing: bool,
    ) -> Setup:
        """A store's setup from its constructor's arguments; ``ValueError`` naming
        ``history_limit`` unless it is a whole number of at least 1."""
        if not isinstance(history_limit, int) or history_limit < 1:
            raise ValueError(f"history_limit must be at least 1, got {history_limit!r}")
        queries = Queries(table)
        return cls(queries, clock, notify_within, history_limit, history_retention, durable_firing)

    def params(self, **values: Any) -> dict[str, Any]:
        """``values``, the ``now`` parameter (``None``: the server's time) and
        ``firing_commit`` (see :attr:`durable_firing`)."""
        values["now"] = None if self.clock is None else self.clock.now()
        values["firing_commit"] = None if self.durable_firing else "off"
        return values

    def statement(self, name: str, **values: Any) -> Statement:
        """The statement ``name`` with ``values`` (and ``now``)."""
        return Statement(self.queries[name], self.params(**values))

    # -- the port's writes -------------------------------------------------------------

    def now(self) -> Plan[datetime]:
        rows = yield self.statement("now")
        return utc(rows[0][0], "now")

    def put(self, item: ScheduleItem, deadline: datetime | None) -> Plan[ScheduleItem]:
        if not isinstance(item, ScheduleItem):
            raise TypeError(f"put: expected a ScheduleItem, got {type(item).__name__}")
        params = item_params(item)
        rows = yield self.statement(
            "put",
            deadline=_aware(deadline, "deadline"),
            notify_within=self.notify_within,
            channel=self.queries.channel,
            keep=self.history_limit,
            **params,
        )
        if not rows:
            raise SchedulerUnavailable(
                f"put({item.id!r}): arrived after its deadline {deadline}; nothing was stored"
            )
        generation = whole(rows[0][0], "generation", item.id)
        if item.generation:
            return item.with_generation(generation)
        set_generation(item, generation)
        return item

    def get(self, item_id: str) -> Plan[ScheduleItem | None]:
        if _unusable(item_id):
            return None
        rows = yield self.statement("get", id=item_id)
        return item_from_row(rows[0]) if rows else None

    def exists(self, item_id: str) -> Plan[bool]:
        if _unusable(item_id):
            return False
        rows = yield self.statement("exists", id=item_id)
        return bool(rows and rows[0][0] is True)

    def remove(self, item_id: str, generation: int | None, deadline: datetime | None) -> Plan[bool]:
        if _unusable(item_id):
            return False
        rows = yield self.statement(
            "remove",
            id=item_id,
            generation=generation,
            deadline=_aware(deadline, "deadline"),
            keep=self.history_limit,
        )
        return bool(rows)

    def remove_flow(self, flow_id: str, deadline: datetime | None) -> Plan[list[str]]:
        if _unusable(flow_id):
            return []
        rows = yield self.statement(
            "remove_flow",
            flow_id=flow_id,
            deadline=_aware(deadline, "deadline"),
            keep=self.history_limit,
        )
        return sorted(str(row[0]) for row in rows)

    # -- claims ------------------------------------------------------------------------

    def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> Plan[list[Claim]]:
        return (yield from self._claim("claim_due", routes, owner, lease, limit))

    def claim_started(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> Plan[list[Claim]]:
        """:meth:`claim_due` and :meth:`confirm_start` of its claims in one statement (see
        ``claim_started`` in ``queries.sql``): for a node that starts each claim at once."""
        return (yield from self._claim("claim_started", routes, owner, lease, limit))

    def _claim(
        self, name: str, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> Plan[list[Claim]]:
        if not isinstance(lease, timedelta) or lease <= timedelta(0):
            raise ValueError(f"{name}: lease must be a positive timedelta, got {lease!r}")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"{name}: limit must be at least 1, got {limit!r}")
        if not routes:
            return []
        rows = yield self.statement(
            name,
            routes=sorted(routes),
            owner=owner,
            lease=lease,
            limit=limit,
            keep=self.history_limit,
        )
        claims, bad = claims_from_rows(rows, owner)
        if bad:
            yield self.statement(
                "quarantine_claimed",
                ids=list(bad),
                reasons=list(bad.values()),
                owner=owner,
                keep=self.history_limit,
            )
        return claims

    def confirm_start(self, claims: Sequence[Claim]) -> Plan[list[Claim]]:
        if not claims:
            return []
        rows = yield self.statement("confirm_start", **fences(claims))
        held = {(row[0], row[1]) for row in rows}  # a claim is named by (id, token)
        return [claim for claim in claims if (claim.item.id, claim.token) in held]

    def renew(self, claims: Sequence[Claim], lease: timedelta) -> Plan[list[Claim]]:
        if not claims:
            return []
        rows = yield self.statement("renew", lease=lease, **fences(claims))
        until = {(row[0], row[2]): utc(row[1], "lease_until", row[0]) for row in rows}
        return [
            Claim(claim.item, claim.attempt, claim.owner, until[key], claim.token, claim.lapsed)
            for claim in claims
            if (key := (claim.item.id, claim.token)) in until
        ]

    def release(self, claims: Sequence[Claim]) -> Plan[int]:
        if not claims:
            return 0
        rows = yield self.statement("release", **fences(claims))
        return len(rows)

    def settle(self, settlements: Sequence[Settlement]) -> Plan[list[SettleResult]]:
        if not settlements:
            return []
        completed = completed_columns(settlements)
        if completed is not None:
            rows = yield self.statement("settle_completed", keep=self.history_limit, **completed)
        else:
            rows = yield self.statement(
                "settle",
                keep=self.history_limit,
                **fences([s.claim for s in settlements]),
                **settle_columns(settlements),
            )
        results = settled(settlements, rows)
        if not all(result.applied for result in results):  # rare: some were stale
            results = yield from self._settle_late(settlements, results)
        stale = [s for s, result in zip(settlements, results, strict=True) if not result.applied]
        if stale:
            # Rare: a run whose row was cancelled or replaced while it ran (its attempt kept
            # open in the history), or a lost lease. One more statement ends the kept ones.
            columns = settle_columns(stale)
            yield self.statement(
                "close_kept",
                ids=[s.claim.item.id for s in stale],
                generations=[s.claim.generation for s in stale],
                owners=[s.claim.owner for s in stale],
                attempts=[s.claim.attempt for s in stale],  # that run's, not a later one's
                **{name: columns[name] for name in CLOSE_COLUMNS},
            )
        return results

    def _settle_late(
        self, settlements: Sequence[Settlement], results: list[SettleResult]
    ) -> Plan[list[SettleResult]]:
        """``results`` with the late completions among the stale ones applied (one more
        statement, ``settle_late``, if there are any): late from each claim's own lease end
        (by the store's clock)."""
        pairs = list(zip(settlements, results, strict=True))
        late = [s for s, r in pairs if s.settles_late and not r.applied]
        if not late:
            return results
        ids, generations = [s.claim.item.id for s in late], [s.claim.generation for s in late]
        rows = yield self.statement(
            "settle_late", ids=ids, generations=generations, keep=self.history_limit
        )
        done = {(row[0], row[1]): utc(row[2], "now") for row in rows}
        return [
            SettleResult.at(s.claim, at, s.claim.lease_until)
            if not r.applied
            and s.settles_late
            and (at := done.pop((s.claim.item.id, s.claim.generation), None)) is not None
            else r
            for s, r in pairs
        ]

    def next_due(
        self, routes: Collection[str], after: datetime | None = None
    ) -> Plan[datetime | None]:
        when, _ = yield from self.next_due_seen(routes, after)
        return when

    def next_due_seen(
        self, routes: Collection[str], after: datetime | None = None
    ) -> Plan[tuple[datetime | None, datetime | None]]:
        """:meth:`next_due` and the store's time of its answer (None: no statement sent)."""
        if not routes:
            return None, None
        rows = yield self.statement(
            "next_due",
            routes=sorted(routes),
            after=_aware(after, "after"),
            retention=self.history_retention,
        )
        if not rows:
            return None, None
        return utc_or_none(rows[0][0], "next_due"), utc_or_none(rows[0][1], "now")

    # -- dead letters, quarantine ------------------------------------------------------

    def dead_letters(self) -> Plan[list[DeadLetter]]:
        rows = yield self.statement("dead_letters")
        return [dead_letter_from_row(row) for row in rows]

    def requeue(self, item_id: str, due: datetime) -> Plan[ScheduleItem | None]:
        if _unusable(item_id):
            return None
        due = ensure_utc(due, "requeue due")
        rows = yield self.statement(
            "requeue",
            id=item_id,
            due=due,
            notify_within=self.notify_within,
            channel=self.queries.channel,
            keep=self.history_limit,
        )
        return item_from_row(rows[0]) if rows else None

    def quarantined(self) -> Plan[list[QuarantinedRecord]]:
        rows = yield self.statement("quarantined")
        records = []
        for row in rows:
            record = row[3]
            records.append(
                QuarantinedRecord(
                    id=str(row[0]),
                    reason=str(row[1]),
                    quarantined_at=utc(row[2], "quarantined_at", row[0]),
                    record=dict(record) if isinstance(record, dict) else {"value": record},
                )
            )
        return records

    # -- steering ----------------------------------------------------------------------

    def timers(self, query: TimerSelection) -> Plan[TimerPage]:
        after_due, after_id = (None, None)
        if query.after is not None:
            after_due, after_id = decode_cursor(query.after)
        state = query.state
        rows = yield self.statement(
            "timers",
            with_live=state != "dead",
            with_dead=state in (None, "dead"),
            state=state,
            id_prefix=query.id_prefix,
            flow_id=query.flow_id,
            kind=None if query.kind is None else str(query.kind),
            handler=query.handler,
            due_from=_aware(query.due_from, "due_from"),
            due_to=_aware(query.due_to, "due_to"),
            after_due=after_due,
            after_id=after_id,
            limit=query.limit,
        )
        infos = [timer_info_from_row(row) for row in rows[: query.limit]]
        more = len(rows) > query.limit
        return TimerPage(infos, encode_cursor(infos[-1].due, infos[-1].id) if more else None)

    def history(self, item_id: str) -> Plan[list[Attempt]]:
        if _unusable(item_id):
            return []
        rows = yield self.statement("history", id=item_id, keep=self.history_limit)
        return [attempt_from_row(row, item_id) for row in rows]

    def pause(self, item_id: str) -> Plan[bool]:
        if _unusable(item_id):
            return False
        rows = yield self.statement("pause", id=item_id)
        return bool(rows)

    def resume(self, item_id: str) -> Plan[bool]:
        if _unusable(item_id):
            return False
        rows = yield self.statement("resume_read", id=item_id)
        if not rows:
            return False
        generation, recurrence_json, _previous, due_value, paused, now_value = rows[0]
        due = utc(due_value, "due", item_id)
        now = utc(now_value, "now")
        new_due = new_previous = None
        if paused is True and isinstance(recurrence_json, dict):
            recurrence = Recurrence.from_json(recurrence_json)
            try:
                following = recurrence.next_slot(now)
            except ValueError:
                following = due  # no slot left: the next tick sets it aside
            if following > due:
                # Missed slots are not replayed: the last one missed counts as applied.
                new_due, new_previous = following, max(due, now)
        elif paused is True and due < now:
            new_due = now  # a one-shot whose time passed while paused is due now
        rows = yield self.statement(
            "resume", id=item_id, generation=generation, due=new_due, previous=new_previous
        )
        return bool(rows)

    # -- nodes ---------------------------------------------------------------------------

    def heartbeat(self, node: str, routes: Collection[str], ttl: timedelta) -> Plan[None]:
        yield self.statement("heartbeat", node=node, routes=sorted(routes), ttl=ttl)
        return None

    def leave(self, node: str) -> Plan[None]:
        yield self.statement("leave", node=node)
        return None

    def live_nodes(self) -> Plan[list[LiveNode]]:
        rows = yield self.statement("live_nodes")
        return [
            LiveNode(
                str(row[0]),
                tuple(str(route) for route in row[1]) if isinstance(row[1], list) else (),
                utc(row[2], "renewed_at", row[0]),
                utc(row[3], "expires_at", row[0]),
            )
            for row in rows
        ]


def _unusable(value: object) -> bool:
    """Whether ``value`` is no id any item can have (not a string, empty, NUL, a lone
    surrogate, too long): looking it up answers "not there" without asking the server,
    which would refuse such text."""
    if type(value) is str and value.isascii() and "\x00" not in value and 0 < len(value) <= 1024:
        return False
    try:
        check_id(value)
    except ValueError:
        return True
    return False


def _aware(value: datetime | None, what: str) -> datetime | None:
    return None if value is None else ensure_utc(value, what)
