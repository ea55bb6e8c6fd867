"""Node behaviour, one set of tests for both faces (CONTRACT section 15): NodeScheduler and
AsyncNodeScheduler over the reference store and over MongoTimerStore on mongomock.

Virtual time (a ManualClock, delivered with ``run_due``) except for shutdown, which needs
handlers that really hang. No timing assertions: what is checked is what ran, what the
store holds, and what was logged.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched import ManualClock, OutcomeUnknown, SchedulerUnavailable
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.scheduler import NodeScheduler
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.store import MemoryTimerStore, as_async

START = datetime(2026, 1, 1, tzinfo=UTC)
S = timedelta(seconds=1)


class Flaky:
    """A store whose calls can fail (``fail[name]``: errors to raise, in turn) or run a
    hook first (``before[name]``); every call's name and store time kept in ``calls``.

    It shows the interface only: a store's ``claim_started`` (MongoTimerStore's) is hidden,
    so both stores run the claim, the queue and the check before each start that these
    tests are about (start on claim: ``tests/node/test_core_pace.py``, the conformance
    suite and ``tests/node/test_node_on_mongo_wire.py``)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.fail: dict[str, list[BaseException]] = {}
        self.before: dict[str, Callable[[], None]] = {}
        self.calls: list[tuple[str, datetime]] = []

    def __getattr__(self, name: str) -> Any:
        if name == "claim_started":
            raise AttributeError(name)
        method = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, self.store.now()))
            if name in self.before:
                self.before.pop(name)()
            errors = self.fail.get(name)
            if errors:
                raise errors.pop(0)
            return method(*args, **kwargs)

        return call


class Face:
    """One scheduler face over one store, driven synchronously by the test."""

    def __init__(self, face: str, store: str, clock: Any = None, **options: Any) -> None:
        self.clock = clock if clock is not None else ManualClock(START)
        own = None if clock is not None and not isinstance(clock, ManualClock) else self.clock
        if store == "memory":
            self.base: Any = MemoryTimerStore(self.clock)
        else:
            mongomock = pytest.importorskip("mongomock")
            from flowsched.mongo import MongoTimerStore

            client: Any = mongomock.MongoClient(tz_aware=True)
            self.base = MongoTimerStore(client.db[f"t_{uuid.uuid4().hex[:8]}"], clock=own)
        self.store = Flaky(self.base)
        self.is_async = face == "async"
        self.loop = asyncio.new_event_loop() if self.is_async else None
        if self.is_async:
            self.s: Any = AsyncNodeScheduler(as_async(self.store), clock=own, **options)  # type: ignore[arg-type]
        else:
            self.s = NodeScheduler(self.store, clock=own, **options)  # type: ignore[arg-type]

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.s, method)(*args, **kwargs)
        if self.is_async:
            assert self.loop is not None
            return self.loop.run_until_complete(result)
        return result

    def later(self, delta: timedelta) -> int:
        """Move the clock by ``delta`` and deliver what is due; how many ran."""
        self.clock.jump(delta)
        return int(self("run_due"))

    def item(self, item_id: str, due_in: timedelta = -S, **payload: Any) -> ScheduleItem:
        due = self.clock.now() + due_in
        return ScheduleItem(item_id, ScheduleKind.TIMER, due, handler="h", payload=payload or None)

    def close(self) -> None:
        if self.is_async:
            self("aclose")
            assert self.loop is not None
            self.loop.close()
        else:
            self.s.close()


FACES = [
    pytest.param(("sync", "memory"), id="sync-memory"),
    pytest.param(("async", "memory"), id="async-memory"),
    pytest.param(("sync", "mongomock"), id="sync-mongomock"),
    pytest.param(("async", "mongomock"), id="async-mongomock"),
]


@pytest.fixture(params=FACES)
def face(request: pytest.FixtureRequest) -> Iterator[Face]:
    kind, store = request.param
    made = Face(kind, store)
    yield made
    made.close()


def _recording(face: Face) -> list[tuple[str, Any]]:
    ran: list[tuple[str, Any]] = []
    face.s.register("h", lambda item, attempt: ran.append((item.id, item.payload)))
    return ran


# -- a refused settle ------------------------------------------------------------------


def test_a_refused_settle_is_kept_and_retried_never_dropped(face: Face) -> None:
    ran = _recording(face)
    face("schedule", face.item("x"))
    face.store.fail["settle"] = [
        SchedulerUnavailable("down"),
        OutcomeUnknown("reply lost"),
        SchedulerUnavailable("still down"),
    ]
    assert face("run_due") == 1 and ran == [("x", None)]
    assert face("exists", "x"), "the outcome applied although every settle failed"
    for _ in range(10):  # the backoff passes; the kept outcome is settled
        face.later(timedelta(seconds=0.5))
    assert not face("exists", "x"), "the kept outcome was never settled"
    assert ran == [("x", None)], f"the item ran again: {ran}"
    settles = [name for name, _ in face.store.calls if name == "settle"]
    assert len(settles) == 4, f"settle calls: {len(settles)} (3 refused, then applied)"


# -- an outage -------------------------------------------------------------------------


def test_an_outage_logs_once_and_its_recovery_once(
    face: Face, caplog: pytest.LogCaptureFixture
) -> None:
    _recording(face)
    face("schedule", face.item("x"))
    face.store.fail["claim_due"] = [SchedulerUnavailable(f"down {n}") for n in range(6)]
    with caplog.at_level(logging.WARNING, logger="flowsched.node"):
        for _ in range(40):
            face.later(timedelta(seconds=0.5))
    lines = [r.getMessage() for r in caplog.records if r.name == "flowsched.node"]
    down = [line for line in lines if "unavailable" in line]
    back = [line for line in lines if "answers again" in line]
    assert len(down) == 1 and len(back) == 1, f"outage log: {lines}"
    assert "6 failed calls" in back[0], back[0]
    assert not face("exists", "x"), "the item was not delivered after the outage"


def test_outage_backoff_doubles_from_a_tenth_of_a_second_up_to_the_poll(face: Face) -> None:
    _recording(face)
    face("schedule", face.item("x"))
    face.store.fail["claim_due"] = [SchedulerUnavailable(f"down {n}") for n in range(9)]
    for _ in range(600):
        face.later(timedelta(milliseconds=50))
    tries = [at for name, at in face.store.calls if name == "claim_due"][:10]  # 9 refused
    gaps = [round((b - a).total_seconds(), 2) for a, b in itertools.pairwise(tries)]
    assert len(gaps) == 9 and gaps[0] >= 0.1, f"retries after {gaps}s"
    assert all(b >= a for a, b in itertools.pairwise(gaps)), f"gaps not growing: {gaps}"
    # Capped at the poll interval (the faces' default, 1 s), not at 5 s: firing resumes
    # within a poll of the store's return.
    assert 1.0 <= max(gaps) <= 1.05, f"gaps (capped at the 1 s poll): {gaps}"


# -- suspect claims: a lapsed lease ----------------------------------------------------


def test_a_claim_whose_lease_lapsed_is_delivered_again(face: Face) -> None:
    ran = _recording(face)
    face("schedule", face.item("x"))
    routes = frozenset({"h:h"})
    [dead] = face.base.claim_due(routes, "dead-node", timedelta(seconds=30), 10)
    assert face("run_due") == 0 and ran == [], "a claim held by a live lease was delivered"
    face.later(timedelta(seconds=31))
    assert ran == [("x", None)], f"the lapsed claim was not delivered again: {ran}"
    assert not face("exists", "x")
    assert dead.owner == "dead-node"


def test_a_claim_started_then_abandoned_is_redelivered_with_a_lapsed_attempt(face: Face) -> None:
    ran = _recording(face)
    face("schedule", face.item("x"))
    routes = frozenset({"h:h"})
    [dead] = face.base.claim_due(routes, "dead-node", timedelta(seconds=30), 10)
    assert face.base.confirm_start([dead]) == [dead]
    face.later(timedelta(seconds=31))
    assert ran == [("x", None)]
    outcomes = [(a.node, a.outcome) for a in face("history", "x")]
    assert outcomes[0] == ("dead-node", "lapsed") and outcomes[-1][1] == "succeeded", outcomes


# -- the check before a start ----------------------------------------------------------


def test_a_cancel_wins_over_a_queued_claim(face: Face) -> None:
    ran = _recording(face)
    face("schedule", face.item("x"))
    face.store.before["confirm_start"] = lambda: face.base.remove("x")  # claimed, not started
    face("run_due")
    assert ran == [], f"a cancelled claim started: {ran}"
    assert face("history", "x") == [], "a start that never happened is recorded"


def test_a_replace_wins_over_a_queued_claim(face: Face) -> None:
    ran = _recording(face)
    face("schedule", face.item("x", v=1))
    face.store.before["confirm_start"] = lambda: face.base.put(face.item("x", v=2))
    for _ in range(3):
        face.later(timedelta(seconds=1))
    assert ran == [("x", {"v": 2})], f"the old form started, or the new one did not: {ran}"


# -- shutdown --------------------------------------------------------------------------


@pytest.mark.parametrize("store", ["memory", "mongomock"])
def test_close_waits_at_most_shutdown_timeout_and_names_what_is_left(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    from flowsched import SystemClock

    face = Face("sync", store, clock=SystemClock(), shutdown_timeout=timedelta(seconds=0.2))
    started, release = threading.Event(), threading.Event()

    def hangs(item: ScheduleItem, attempt: int) -> None:
        started.set()
        release.wait(30)

    face.s.register("h", hangs)
    face.s.start()
    try:
        face.s.schedule(face.item("stuck"))
        assert started.wait(10), "the handler never started"
        with caplog.at_level(logging.WARNING, logger="flowsched.node"):
            face.s.close()
        assert not release.is_set() and started.is_set()
        left = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
        assert len(left) == 1 and "stuck" in left[0], f"close log: {left}"
    finally:
        release.set()


@pytest.mark.parametrize("store", ["memory", "mongomock"])
def test_aclose_waits_at_most_shutdown_timeout_and_names_what_is_left(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    from flowsched import SystemClock

    face = Face("async", store, clock=SystemClock(), shutdown_timeout=timedelta(seconds=0.2))
    cancelled: list[str] = []

    async def main() -> None:
        started = asyncio.Event()

        async def hangs(item: ScheduleItem, attempt: int) -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(item.id)
                raise

        face.s.register("h", hangs)
        await face.s.start()
        await face.s.schedule(face.item("stuck"))
        await asyncio.wait_for(started.wait(), 10)
        with caplog.at_level(logging.WARNING, logger="flowsched.node"):
            await face.s.aclose()

    assert face.loop is not None
    face.loop.run_until_complete(main())
    face.loop.close()
    left = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
    assert len(left) == 1 and "stuck" in left[0], f"aclose log: {left}"
    assert cancelled == ["stuck"], "the hung handler was not cancelled"


def test_shutdown_timeout_defaults_to_30s() -> None:
    clock = ManualClock(START)
    sync = NodeScheduler(MemoryTimerStore(clock), clock=clock)
    made = AsyncNodeScheduler(as_async(MemoryTimerStore(clock)), clock=clock)
    assert sync._driver.shutdown_timeout == timedelta(seconds=30)
    assert made._driver.shutdown_timeout == timedelta(seconds=30)
