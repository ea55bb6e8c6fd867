"""The node core on its own: events in, actions out; no threads, no I/O but the reference
store's calls, made here one by one as a driver would."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from flowsched import (
    ManualClock,
    OutcomeUnknown,
    ScheduleItem,
    ScheduleKind,
    SchedulerUnavailable,
)
from flowsched.node.actions import (
    ClaimDue,
    ConfirmStart,
    ReleaseClaims,
    RenewLeases,
    SettleBatch,
    Sleep,
    StartHandler,
)
from flowsched.node.core import NodeCore, NodeSettings, store_call
from flowsched.node.gather import SETTLE_GATHER
from flowsched.outcomes import Completed
from flowsched.store import MemoryTimerStore, Settlement, SettleResult

START = datetime(2026, 1, 1, tzinfo=UTC)
ROUTE = "h:work"
S = timedelta(seconds=1)


class Node:
    """A driver that performs the core's store calls at once and holds handlers until told."""

    def __init__(self, store: MemoryTimerStore, clock: ManualClock, **settings: object) -> None:
        self.store = store
        self.clock = clock
        self.core = NodeCore(NodeSettings("n1", **settings), lambda: frozenset({ROUTE}))  # type: ignore[arg-type]
        self.started: list[StartHandler] = []
        self.actions: list[object] = []

    def run(self, steps: int = 50) -> Sleep:
        """Perform actions until the core sleeps."""
        for _ in range(steps):
            action = self.core.next_action(self.clock.now())
            self.actions.append(action)
            if isinstance(action, Sleep):
                return action
            if isinstance(action, StartHandler):
                self.started.append(action)
                continue
            try:
                result = store_call(action, self.store, self.core.settings, frozenset({ROUTE}))
            except Exception as exc:
                self.core.failed(action, exc, self.clock.now())
            else:
                self.core.succeeded(action, result, self.clock.now())
        raise AssertionError(f"the core never sleeps: {self.actions[-5:]}")

    def finish(self, start: StartHandler) -> None:
        self.core.finished(start.ticket, Completed())


def _item(store: MemoryTimerStore, item_id: str, due: datetime) -> ScheduleItem:
    return store.put(ScheduleItem(item_id, ScheduleKind.TIMER, due, handler="work"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store(clock: ManualClock) -> MemoryTimerStore:
    return MemoryTimerStore(clock)


def test_a_queued_claim_cancelled_before_its_start_never_starts(
    store: MemoryTimerStore, clock: ManualClock
) -> None:
    node = Node(store, clock, workers=1)
    _item(store, "a", START)
    _item(store, "b", START)
    node.run()
    assert [s.claim.item.id for s in node.started] == ["a"]
    assert [c.item.id for c in node.core.queue] == ["b"], "b waits in the queue, claimed"
    assert store.remove("b"), "the cancel returned True"
    node.finish(node.started[0])
    node.run()
    assert [s.claim.item.id for s in node.started] == ["a"], "the cancelled b started"
    assert any(isinstance(a, ConfirmStart) for a in node.actions[3:]), "b was not checked"


def test_a_replaced_queued_claim_starts_only_in_its_new_form(
    store: MemoryTimerStore, clock: ManualClock
) -> None:
    node = Node(store, clock, workers=1)
    _item(store, "a", START)
    _item(store, "b", START)
    node.run()
    new = _item(store, "b", START)
    node.finish(node.started[0])
    node.run()
    assert [s.claim.item.generation for s in node.started[1:]] == [new.generation]


def test_nothing_is_claimed_before_its_due_time(
    store: MemoryTimerStore, clock: ManualClock
) -> None:
    node = Node(store, clock, poll_interval=60 * S)
    due = _item(store, "a", START + 5 * S).due
    sleep = node.run()
    assert node.started == [] and sleep.until == due
    clock.jump(5 * S - timedelta(microseconds=1))
    node.core.wake()
    node.run()
    assert node.started == [], "started before its due time"
    clock.jump(timedelta(microseconds=1))
    node.run()
    assert [s.claim.item.id for s in node.started] == ["a"]


def test_outcomes_are_settled_in_one_batch(store: MemoryTimerStore, clock: ManualClock) -> None:
    node = Node(store, clock, workers=4)
    for n in range(3):
        _item(store, f"i{n}", START)
    node.run()
    for start in node.started:
        node.finish(start)
    node.run()
    batches = [a for a in node.actions if isinstance(a, SettleBatch)]
    assert [len(b.settlements) for b in batches] == [3]
    assert [store.exists(f"i{n}") for n in range(3)] == [False] * 3


class Refusing(MemoryTimerStore):
    """Settles fail while ``refuse`` holds errors to raise."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.refuse: list[Exception] = []

    def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        if self.refuse:
            raise self.refuse.pop(0)
        return super().settle(settlements)


def test_an_unavailable_store_keeps_the_outcomes_and_retries_after_backoff(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = Refusing(clock)
    node = Node(store, clock, workers=2)
    _item(store, "a", START)
    _item(store, "b", START)
    node.run()
    store.refuse = [SchedulerUnavailable("down")] * 3
    for start in node.started:
        node.finish(start)
    with caplog.at_level(logging.WARNING, "flowsched.node"):
        for _ in range(4):
            sleep = node.run()
            if sleep.until is not None and sleep.until > clock.now():
                clock.jump(sleep.until - clock.now())
    assert not store.exists("a") and not store.exists("b"), "outcomes lost"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, f"one line per outage and one at recovery: {lines}"
    assert "unavailable" in lines[0] and "answers again" in lines[1]


def test_a_refused_batch_is_retried_one_by_one_and_only_the_bad_one_dropped(
    clock: ManualClock,
) -> None:
    store = Refusing(clock)
    node = Node(store, clock, workers=2)
    _item(store, "a", START)
    _item(store, "b", START)
    node.run()
    store.refuse = [ValueError("cannot store this"), ValueError("cannot store this")]
    for start in node.started:
        node.finish(start)
    node.run()
    sizes = [len(a.settlements) for a in node.actions if isinstance(a, SettleBatch)]
    assert sizes == [2, 1, 1], f"batches tried: {sizes}"
    assert store.exists("a") and not store.exists("b"), "a dropped (its lease lapses), b settled"


def test_leases_are_renewed_at_half_time(store: MemoryTimerStore, clock: ManualClock) -> None:
    node = Node(store, clock, lease=10 * S, poll_interval=60 * S)
    _item(store, "a", START)
    sleep = node.run()
    first = node.started[0].claim.lease_until
    assert sleep.until == first - 5 * S
    clock.jump(5 * S)
    node.run()
    assert any(isinstance(a, RenewLeases) for a in node.actions)
    assert node.core.running[node.started[0].ticket].lease_until == first + 5 * S


def test_closing_releases_queued_claims(store: MemoryTimerStore, clock: ManualClock) -> None:
    node = Node(store, clock, workers=1)
    _item(store, "a", START)
    _item(store, "b", START)
    node.run()
    node.core.close()
    sleep = node.run()
    assert any(isinstance(a, ReleaseClaims) for a in node.actions)
    assert not sleep.idle, "a handler still runs"
    node.finish(node.started[0])
    assert node.run().idle
    assert not store.exists("a") and store.exists("b")
    assert [c.item.id for c in store.claim_due({ROUTE}, "n2", S, 5)] == ["b"], "b not freed"


def test_a_full_node_does_not_claim(store: MemoryTimerStore, clock: ManualClock) -> None:
    node = Node(store, clock, workers=1, batch_size=1)
    for n in range(5):
        _item(store, f"i{n}", START)
    node.run()
    claims = [a for a in node.actions if isinstance(a, ClaimDue)]
    assert len(claims) == 2, f"one running and one queued, no more: {claims}"


def test_a_handler_ending_while_its_renewal_is_on_the_way_settles_on_the_new_lease(
    store: MemoryTimerStore, clock: ManualClock
) -> None:
    node = Node(store, clock, lease=10 * S, poll_interval=60 * S)
    _item(store, "a", START)
    node.run()
    clock.jump(5 * S)
    renew = node.core.next_action(clock.now())
    assert isinstance(renew, RenewLeases)
    result = store_call(renew, store, node.core.settings, frozenset({ROUTE}))  # applied
    node.finish(node.started[0])  # the handler ends before the reply arrives
    node.core.succeeded(renew, result, clock.now())
    node.run()
    assert not store.exists("a"), "the settle carried the old lease and was stale"


def test_a_renewal_whose_reply_was_lost_leaves_the_claim_valid(
    store: MemoryTimerStore, clock: ManualClock
) -> None:
    # The store renews the lease, the reply is lost (OutcomeUnknown): the node keeps the old
    # lease end. Its claim is fenced by identity, so the handler's settle applies in time
    # and the item never runs again (with a fence on the lease end it was stale: a rerun).
    node = Node(store, clock, workers=1, lease=10 * S, poll_interval=60 * S)
    _item(store, "a", START)
    _item(store, "b", START)
    node.run()
    [first] = node.started
    clock.jump(5 * S)
    renew = node.core.next_action(clock.now())
    assert isinstance(renew, RenewLeases) and len(renew.claims) == 2, renew
    store_call(renew, store, node.core.settings, frozenset({ROUTE}))  # applied ...
    node.core.failed(renew, OutcomeUnknown("reply lost"), clock.now())  # ... reply lost
    clock.jump(6 * S)  # past the lease end the node knows, within the renewed one
    node.finish(first)
    node.run()
    clock.jump(SETTLE_GATHER)  # the settle waits a little for more outcomes ("b" queued)
    node.run()
    assert not store.exists("a"), "the settle of a claim renewed without its reply was stale"
    assert [s.claim.item.id for s in node.started] == ["a", "b"], "the queued claim lost"
    clock.jump(60 * S)
    node.run()
    runs = [s.claim.item.id for s in node.started]
    assert runs.count("a") == 1 and runs.count("b") == 1, f"runs: {runs}"
    assert store.claim_due({ROUTE}, "n2", S, 5) == [], "an item is claimable again"
