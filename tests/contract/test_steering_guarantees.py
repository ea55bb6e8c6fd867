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
    TimerPage,
)
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.common import selection
from flowsched.node.scheduler import NodeScheduler
from flowsched.steering import Attempt
from flowsched.steering_query import TimerFilters
from flowsched.store import MemoryTimerStore, as_async
from flowsched.testing import async_port_guarantees, port_guarantees
from flowsched.testing._async_trial import BlockingPort, LoopClock, Portal, built
from flowsched.testing._checks_steering import STEERING_GUARANTEES
from flowsched.testing._trial import Factory, try_guarantee

HISTORY = STEERING_GUARANTEES[-1].name


def check_steering(factory: Factory) -> list[str]:
    """Try every steering guarantee on ``factory``; the names of those skipped."""
    return [g.name for g in STEERING_GUARANTEES if not try_guarantee(g, factory, None)]


def check_async_steering(factory: Callable[[ManualClock], Any]) -> list[str]:
    portal = Portal()
    try:

        def blocking(clock: ManualClock) -> BlockingPort:
            return BlockingPort(portal, portal.call(built(factory, clock)))

        def new_clock(start: datetime) -> ManualClock:
            return LoopClock(portal, start)

        return [
            g.name for g in STEERING_GUARANTEES if not try_guarantee(g, blocking, None, new_clock)
        ]
    finally:
        portal.close()


def _mongomock() -> Any:
    mongomock = pytest.importorskip("mongomock")
    return mongomock.MongoClient(tz_aware=True)["steering"]


def test_the_steering_guarantees_are_listed_in_order() -> None:
    names = [g.name for g in STEERING_GUARANTEES]
    assert port_guarantees()[-len(names) :] == names
    assert "(skipped when the adapter has no history)" in HISTORY
    assert "iter_timers() is an async iterator" in async_port_guarantees()[-1]


# -- every adapter -------------------------------------------------------------------------


def _has_history(scheduler_class: type) -> bool:
    return hasattr(scheduler_class, "history")


def test_in_memory_scheduler() -> None:
    skipped = check_steering(lambda clock: InMemoryScheduler(clock=clock))
    assert skipped == ([] if _has_history(InMemoryScheduler) else [HISTORY])


def test_async_in_memory_scheduler() -> None:
    skipped = check_async_steering(lambda clock: AsyncInMemoryScheduler(clock=clock))
    assert skipped == ([] if _has_history(AsyncInMemoryScheduler) else [HISTORY])


def test_mongo_scheduler_on_mongomock() -> None:
    from flowsched import MongoScheduler

    db = _mongomock()
    skipped = check_steering(
        lambda clock: MongoScheduler(db[f"t_{uuid.uuid4().hex[:8]}"], node_id="n", clock=clock)
    )
    assert skipped == ([] if _has_history(MongoScheduler) else [HISTORY])


def test_async_mongo_scheduler_on_mongomock() -> None:
    from flowsched import AsyncMongoScheduler

    db = _mongomock()
    skipped = check_async_steering(
        lambda clock: AsyncMongoScheduler(db[f"t_{uuid.uuid4().hex[:8]}"], node_id="n", clock=clock)
    )
    assert skipped == ([] if _has_history(AsyncMongoScheduler) else [HISTORY])


@pytest.mark.wire
def test_mongo_scheduler_on_the_wire_server(mongo_db: Any) -> None:
    from flowsched import MongoScheduler

    skipped = check_steering(
        lambda clock: MongoScheduler(
            mongo_db[f"t_{uuid.uuid4().hex[:8]}"], node_id="n", clock=clock
        )
    )
    assert skipped == ([] if _has_history(MongoScheduler) else [HISTORY])


def _node(clock: ManualClock) -> NodeScheduler:
    return NodeScheduler(MemoryTimerStore(clock), clock=clock)


def test_node_scheduler_over_the_reference_store_history_included() -> None:
    assert check_steering(_node) == []


def test_async_node_scheduler_over_the_reference_store_history_included() -> None:
    skipped = check_async_steering(
        lambda clock: AsyncNodeScheduler(as_async(MemoryTimerStore(clock)), clock=clock)
    )
    assert skipped == []


# -- adapters broken on purpose ------------------------------------------------------------


class StoreFilters(NodeScheduler):
    """The node scheduler before it bridged the store's listing to the port's: dead letters
    listed with every state, ``due_to`` inclusive, arguments unchecked."""

    def timers(self, **filters: Any) -> TimerPage:
        return self._store.timers(selection(**filters))


class PauseDoesNothing(InMemoryScheduler):
    def _pause(self, item_id: str) -> bool:
        return self.exists(item_id)


class PauseSaysYes(InMemoryScheduler):
    def _pause(self, item_id: str) -> bool:
        super()._pause(item_id)
        return True


class NoNextCursor(InMemoryScheduler):
    def _timer_page(self, filters: TimerFilters) -> TimerPage:
        return TimerPage(super()._timer_page(filters).items, None)


class AcceptsAnything(InMemoryScheduler):
    def timers(self, **filters: Any) -> TimerPage:
        try:
            return super().timers(**filters)
        except (ValueError, TypeError):
            return TimerPage([])


class ResumeReplays(MemoryTimerStore):
    """Resume only unpauses: a recurring item keeps the slot it missed."""

    def resume(self, item_id: str) -> bool:
        with self._lock:
            row = self._rows.get(item_id)
            if row is None:
                return False
            row.paused = False
            return True


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


BROKEN: list[tuple[str, Factory, str]] = [
    ("store-filters", lambda clock: StoreFilters(MemoryTimerStore(clock), clock=clock), "filter"),
    ("pause-does-nothing", lambda clock: PauseDoesNothing(clock=clock), "fires nothing"),
    ("pause-says-yes", lambda clock: PauseSaysYes(clock=clock), "unknown id"),
    ("no-next", lambda clock: NoNextCursor(clock=clock), "cursor paging"),
    ("accepts-anything", lambda clock: AcceptsAnything(clock=clock), "refuse"),
    (
        "resume-replays",
        lambda clock: NodeScheduler(ResumeReplays(clock), clock=clock),
        "missed slots are not replayed",
    ),
    (
        "newest-first",
        lambda clock: NewestFirstHistory(MemoryTimerStore(clock), clock=clock),
        "history",
    ),
]


@pytest.mark.parametrize(("factory", "part"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_adapter_fails_naming_the_steering_guarantee(factory: Factory, part: str) -> None:
    guarantee = _names(part)
    with pytest.raises(AssertionError) as raised:
        check_steering(factory)
    message = str(raised.value)
    assert message.startswith(f"port guarantee not held: {guarantee}"), message


def test_history_is_skipped_not_failed_without_a_history_attribute() -> None:
    skipped = check_steering(lambda clock: HidesHistory(MemoryTimerStore(clock), clock=clock))
    assert skipped == [HISTORY]


def test_the_node_scheduler_checks_arguments_at_the_call() -> None:
    scheduler = _node(ManualClock(datetime.fromisoformat("2026-01-01T00:00:00+00:00")))
    with pytest.raises(ValueError, match="limit"):
        scheduler.iter_timers(limit=0)
    with pytest.raises(TypeError, match="after"):
        scheduler.timers(after=3)
    with pytest.raises(TypeError):
        scheduler.timers(colour="red")
