"""The steering guarantees of the test kit (CONTRACT section 18) hold on every adapter -
both faces of the in-memory, MongoDB (mongomock) and generic node schedulers - and fail,
naming the guarantee, on adapters broken on purpose. The history guarantee is skipped on an
adapter without ``history``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from flowsched import (
    AsyncInMemoryScheduler,
    InMemoryScheduler,
    ManualClock,
    RedeliveryPolicy,
    TimerPage,
)
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.common import selection
from flowsched.node.scheduler import NodeScheduler
from flowsched.steering import Attempt
from flowsched.store import MemoryTimerStore, as_async
from flowsched.testing import async_port_guarantees, port_guarantees
from flowsched.testing._async_trial import BlockingPort, LoopClock, Portal, built
from flowsched.testing._checks_steering import STEERING_GUARANTEES
from flowsched.testing._trial import try_guarantee

HISTORY = STEERING_GUARANTEES[-1].name
NEED_HISTORY = [g.name for g in STEERING_GUARANTEES if g.needs == "history"]


def check_steering(factory: Callable[..., Any]) -> list[str]:
    """Try every steering guarantee on ``factory(clock, policy=None)``; the names of those
    skipped."""
    return [g.name for g in STEERING_GUARANTEES if not try_guarantee(g, factory, factory)]


def check_async_steering(factory: Callable[..., Any]) -> list[str]:
    """The same for an async adapter, through the kit's blocking view of it."""
    portal = Portal()
    try:

        def blocking(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> BlockingPort:
            return BlockingPort(portal, portal.call(built(factory, clock, policy)))

        def new_clock(start: datetime) -> ManualClock:
            return LoopClock(portal, start)

        return [
            g.name
            for g in STEERING_GUARANTEES
            if not try_guarantee(g, blocking, blocking, new_clock)
        ]
    finally:
        portal.close()


def _mongomock() -> Any:
    mongomock = pytest.importorskip("mongomock")
    return mongomock.MongoClient(tz_aware=True)["steering"]


def _collection(db: Any) -> Any:
    return db[f"t_{uuid.uuid4().hex[:8]}"]


def test_the_steering_guarantees_are_listed_in_order() -> None:
    names = [g.name for g in STEERING_GUARANTEES]
    assert port_guarantees()[-len(names) :] == names
    assert "(skipped when the adapter has no history)" in HISTORY
    assert "iter_timers() is an async iterator" in async_port_guarantees()[-1]


# -- every adapter -------------------------------------------------------------------------


def _skipped_for(scheduler_class: type) -> list[str]:
    """What is skipped on that class: history until it has one (branch ``history``)."""
    return [] if hasattr(scheduler_class, "history") else NEED_HISTORY


def test_in_memory_scheduler() -> None:
    skipped = check_steering(
        lambda clock, policy=None: InMemoryScheduler(clock=clock, redelivery=policy)
    )
    assert skipped == _skipped_for(InMemoryScheduler)


def test_async_in_memory_scheduler() -> None:
    skipped = check_async_steering(
        lambda clock, policy=None: AsyncInMemoryScheduler(clock=clock, redelivery=policy)
    )
    assert skipped == _skipped_for(AsyncInMemoryScheduler)


def _mongo(db: Any) -> Callable[..., Any]:
    from flowsched import MongoScheduler

    return lambda clock, policy=None: MongoScheduler(
        _collection(db), node_id="n", clock=clock, redelivery=policy
    )


def test_mongo_scheduler_on_mongomock() -> None:
    from flowsched import MongoScheduler

    assert check_steering(_mongo(_mongomock())) == _skipped_for(MongoScheduler)


@pytest.mark.wire
def test_mongo_scheduler_on_the_wire_server(mongo_db: Any) -> None:
    from flowsched import MongoScheduler

    assert check_steering(_mongo(mongo_db)) == _skipped_for(MongoScheduler)


def test_async_mongo_scheduler_on_mongomock() -> None:
    from flowsched import AsyncMongoScheduler

    db = _mongomock()
    skipped = check_async_steering(
        lambda clock, policy=None: AsyncMongoScheduler(
            _collection(db), node_id="n", clock=clock, redelivery=policy
        )
    )
    assert skipped == _skipped_for(AsyncMongoScheduler)


def _node(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> NodeScheduler:
    return NodeScheduler(MemoryTimerStore(clock), clock=clock, redelivery=policy)


def test_node_scheduler_over_the_reference_store_history_included() -> None:
    assert check_steering(_node) == []


def test_async_node_scheduler_over_the_reference_store_history_included() -> None:
    skipped = check_async_steering(
        lambda clock, policy=None: AsyncNodeScheduler(
            as_async(MemoryTimerStore(clock)), clock=clock, redelivery=policy
        )
    )
    assert skipped == []


def test_node_scheduler_over_the_mongo_timer_store_on_mongomock() -> None:
    from flowsched.mongo import MongoTimerStore

    db = _mongomock()
    assert (
        check_steering(
            lambda clock, policy=None: NodeScheduler(
                MongoTimerStore(_collection(db), clock=clock), clock=clock, redelivery=policy
            )
        )
        == []
    )


# -- adapters broken on purpose ------------------------------------------------------------


class StoreFilters(NodeScheduler):
    """The node scheduler before it bridged the store's listing to the port's: dead letters
    listed with every state, ``due_to`` inclusive, arguments unchecked."""

    def timers(self, **filters: Any) -> TimerPage:
        return self._store.timers(selection(**filters))


class PauseDoesNothing(InMemoryScheduler):
    def pause(self, item_id: str) -> bool:
        return self.exists(item_id)


class PauseSaysYes(InMemoryScheduler):
    def pause(self, item_id: str) -> bool:
        super().pause(item_id)
        return True


class NoNextCursor(InMemoryScheduler):
    def timers(self, **filters: Any) -> TimerPage:
        return TimerPage(super().timers(**filters).items, None)


class AcceptsAnything(InMemoryScheduler):
    def timers(self, **filters: Any) -> TimerPage:
        try:
            return super().timers(**filters)
        except (ValueError, TypeError):
            return TimerPage([])


class ResumeReplays(MemoryTimerStore):
    """Resume only unpauses: a recurring item keeps the slot it missed."""

    def resume(self, item_id: str) -> bool:
        item = self.get(item_id)
        if item is not None and item.recurrence is not None:
            with self._lock:
                self._paused.discard(item_id)
                self._index.push(item)
            return True
        return super().resume(item_id)


class NewestFirstHistory(NodeScheduler):
    def history(self, item_id: str) -> list[Attempt]:
        return list(reversed(super().history(item_id)))


class HidesHistory(NodeScheduler):
    def __getattribute__(self, name: str) -> Any:
        if name == "history":
            raise AttributeError(name)
        return super().__getattribute__(name)


def _names(part: str) -> str:
    found = [g.name for g in STEERING_GUARANTEES if part in g.name]
    assert len(found) == 1, f"{part!r} names {found}"
    return found[0]


BROKEN: list[tuple[str, Callable[..., Any], str]] = [
    (
        "store-filters",
        lambda clock, policy=None: StoreFilters(
            MemoryTimerStore(clock), clock=clock, redelivery=policy
        ),
        "filter",
    ),
    (
        "pause-does-nothing",
        lambda clock, policy=None: PauseDoesNothing(clock=clock, redelivery=policy),
        "fires nothing",
    ),
    (
        "pause-says-yes",
        lambda clock, policy=None: PauseSaysYes(clock=clock, redelivery=policy),
        "unknown id",
    ),
    (
        "no-next",
        lambda clock, policy=None: NoNextCursor(clock=clock, redelivery=policy),
        "cursor paging",
    ),
    (
        "accepts-anything",
        lambda clock, policy=None: AcceptsAnything(clock=clock, redelivery=policy),
        "refuse",
    ),
    (
        "resume-replays",
        lambda clock, policy=None: NodeScheduler(
            ResumeReplays(clock), clock=clock, redelivery=policy
        ),
        "missed slots are not replayed",
    ),
    (
        "newest-first",
        lambda clock, policy=None: NewestFirstHistory(
            MemoryTimerStore(clock), clock=clock, redelivery=policy
        ),
        "history() lists",
    ),
]


@pytest.mark.parametrize(("factory", "part"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_adapter_fails_naming_the_steering_guarantee(
    factory: Callable[..., Any], part: str
) -> None:
    guarantee = _names(part)
    with pytest.raises(AssertionError) as raised:
        check_steering(factory)
    message = str(raised.value)
    assert message.startswith(f"port guarantee not held: {guarantee}"), message


def test_history_is_skipped_not_failed_without_a_history_attribute() -> None:
    skipped = check_steering(
        lambda clock, policy=None: HidesHistory(
            MemoryTimerStore(clock), clock=clock, redelivery=policy
        )
    )
    assert skipped == NEED_HISTORY


def test_the_node_scheduler_checks_arguments_at_the_call() -> None:
    scheduler = _node(ManualClock(datetime.fromisoformat("2026-01-01T00:00:00+00:00")))
    with pytest.raises(ValueError, match="limit"):
        scheduler.iter_timers(limit=0)
    with pytest.raises(TypeError, match="after"):
        scheduler.timers(after=3)
    with pytest.raises(TypeError):
        scheduler.timers(colour="red")


def test_without_the_bridge_the_node_scheduler_would_list_dead_letters() -> None:
    dead = next(g for g in STEERING_GUARANTEES if "state='dead'" in g.name)

    def build(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> NodeScheduler:
        return StoreFilters(MemoryTimerStore(clock), clock=clock, redelivery=policy)

    with pytest.raises(AssertionError, match="dead letters only with state='dead'"):
        try_guarantee(dead, build, build)
    assert try_guarantee(dead, _node, _node)
