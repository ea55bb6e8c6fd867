"""The database's clock: a node learns its offset from ``hello``'s ``localTime`` (half the
round trip corrected), judges time by it, says once when its own clock is off, and records
the offset in its heartbeat. A ManualClock is trusted as it is."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched.clock import ManualClock, SystemClock
from flowsched.config import SchedulingConfig
from flowsched.mongo import MongoScheduler
from flowsched.mongo.nodes import Heartbeat, live_nodes
from flowsched.mongo.server_clock import ServerClock, offset_from_hello, server_clock
from flowsched.port import ScheduleItem, ScheduleKind
from flowsched.store.measured_clock import WARM

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Server:
    """A ``database.command`` whose clock is ``ahead`` of the node's, answering after
    ``delay`` seconds of the node's clock (``local_time=False``: no ``localTime``)."""

    def __init__(self, node: ManualClock, ahead: timedelta, *, local_time: bool = True) -> None:
        self.node, self.ahead, self.local_time = node, ahead, local_time
        self.calls: list[str] = []

    def __call__(self, name: str) -> dict[str, Any]:
        self.calls.append(name)
        self.node.jump(timedelta(milliseconds=20))  # the request's half of the round trip
        reply: dict[str, Any] = {"ok": 1}
        if self.local_time:
            reply["localTime"] = (self.node.now() + self.ahead).replace(tzinfo=None)  # naive
        self.node.jump(timedelta(milliseconds=20))  # the reply's half
        return reply


def test_the_offset_is_local_time_minus_the_send_time_and_half_the_round_trip() -> None:
    reply = {"localTime": datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)}
    assert offset_from_hello(reply, T0, round_trip=0.2) == timedelta(seconds=4.9)
    assert offset_from_hello({"ok": 1}, T0, 0.2) is None


def test_a_node_judges_time_by_the_server_clock_and_says_once_that_its_own_is_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = ManualClock(T0)
    server = Server(node, timedelta(seconds=-90))
    clock = ServerClock(node, server, measure=True, owner="n1")
    with caplog.at_level(logging.WARNING, "flowsched.mongo"):
        clock.refresh()
        clock.refresh()

    assert clock.offset == timedelta(seconds=-90)
    assert clock.now() == node.now() - timedelta(seconds=90)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "n1: its clock is 90.000s ahead of the database's (bound 1s" in warnings[0]


def test_the_offset_is_measured_again_every_thirty_seconds_not_on_every_claim() -> None:
    node = ManualClock(T0)
    server = Server(node, timedelta(seconds=0.5))
    clock = ServerClock(node, server, measure=True)
    clock.refresh_when_due()
    clock.refresh_when_due()
    node.jump(timedelta(seconds=31))
    clock.refresh_when_due()
    assert server.calls == ["hello", "hello"]
    assert clock.offset == timedelta(seconds=0.5)


def test_a_server_without_local_time_leaves_the_offset_at_zero_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = ManualClock(T0)
    clock = ServerClock(node, Server(node, timedelta(hours=1), local_time=False), measure=True)
    with caplog.at_level(logging.INFO, "flowsched.mongo"):
        clock.refresh()
        clock.refresh()
    assert clock.offset == timedelta(0) and not clock.measured
    assert [r.getMessage() for r in caplog.records if "localTime" in r.getMessage()] != []
    assert len(caplog.records) == 1


def test_mongomock_has_no_hello_the_offset_stays_zero(collection: Any) -> None:
    clock = server_clock(SystemClock(), collection, None, timedelta(seconds=1), "n1")
    clock.refresh()
    assert clock.measures and not clock.measured and clock.offset == timedelta(0)


def test_a_manual_clock_is_trusted_as_it_is_unless_told_otherwise(collection: Any) -> None:
    manual = ManualClock(T0)
    assert not server_clock(manual, collection, None, timedelta(seconds=1), "n").measures
    assert server_clock(manual, collection, True, timedelta(seconds=1), "n").measures
    assert not server_clock(SystemClock(), collection, False, timedelta(1), "n").measures


def test_the_heartbeat_records_the_measured_offset(collection: Any) -> None:
    node = ManualClock(datetime.now(UTC))
    nodes = collection.database["timers_nodes"]
    measured = ServerClock(node, Server(node, timedelta(seconds=-2.5)), measure=True)
    measured.refresh()
    Heartbeat(nodes, "measured", timedelta(minutes=1)).beat_when_due(frozenset(), measured, 1)
    unmeasured = ServerClock(node, None, measure=False)
    Heartbeat(nodes, "trusted", timedelta(minutes=1)).beat_when_due(frozenset(), unmeasured, 1)

    found = {n.node_id: n.clock_offset for n in live_nodes(nodes, node.now())}
    assert found == {"measured": timedelta(seconds=-2.5), "trusted": None}


def test_max_clock_skew_is_a_setting_and_a_constructor_argument(collection: Any) -> None:
    config = SchedulingConfig.from_string(
        'ipf-scheduler { mongodb { uri = "mongodb://h/db" }, flowsched { max-clock-skew = 250ms } }'
    )
    assert config.scheduler_settings().max_clock_skew == timedelta(milliseconds=250)
    client = collection.database.client
    built = MongoScheduler.from_config(config, client_factory=lambda uri, **options: client)
    assert database_time(built).filter.max_skew == timedelta(milliseconds=250)
    built.close()
    with pytest.raises(ValueError, match="max_clock_skew"):
        MongoScheduler(collection, max_clock_skew=timedelta(0))


def test_the_async_face_reads_max_clock_skew_from_config_too(collection: Any) -> None:
    from flowsched import AsyncMongoScheduler

    config = SchedulingConfig.from_string(
        'ipf-scheduler { mongodb { uri = "mongodb://h/db" }, flowsched { max-clock-skew = 250ms } }'
    )
    client = collection.database.client
    built = AsyncMongoScheduler.from_config(config, client_factory=lambda uri, **options: client)
    assert database_time(built).filter.max_skew == timedelta(milliseconds=250)
    with pytest.raises(ValueError, match="max_clock_skew"):
        AsyncMongoScheduler(collection, max_clock_skew=timedelta(0))


class SteppingClock:
    """A node's wall clock that an operator (or NTP, or a resumed VM) can step, over a
    monotonic clock that a step does not move."""

    def __init__(self, base: ManualClock) -> None:
        self.base, self.step = base, timedelta(0)

    def now(self) -> datetime:
        return self.base.now() + self.step

    def monotonic(self) -> float:
        return self.base.monotonic()


def test_a_step_of_the_node_clock_between_measurements_changes_nothing() -> None:
    base = ManualClock(T0)
    node = SteppingClock(base)
    server = Server(base, timedelta(seconds=3))
    clock = ServerClock(node, server, measure=True, owner="n1")  # type: ignore[arg-type]
    clock.refresh()
    before = clock.now()

    node.step = timedelta(minutes=2)  # the wall clock jumps ahead; no time passes
    assert clock.now() == before
    base.advance(timedelta(seconds=5))  # 5 s pass (monotonic too)
    assert clock.now() == before + timedelta(seconds=5)

    clock.refresh()  # the next measurement reports the step as the new offset
    assert clock.offset == timedelta(seconds=3) - timedelta(minutes=2)
    assert abs(clock.now() - (base.now() + timedelta(seconds=3))) <= timedelta(milliseconds=1)


def test_the_asyncio_face_measures_with_an_awaited_hello() -> None:
    import asyncio

    node = ManualClock(T0)
    server = Server(node, timedelta(seconds=-90))

    async def command(name: str) -> dict[str, Any]:
        return server(name)

    clock = ServerClock(node, None, measure=True, owner="a1")  # AsyncMongoScheduler's
    assert clock.due()
    asyncio.run(clock.refresh_async(command))

    assert clock.offset == timedelta(seconds=-90) and not clock.due()
    assert clock.now() == node.now() - timedelta(seconds=90)
    clock.refresh_when_due()  # no synchronous command: nothing sent
    assert server.calls == ["hello"]


def test_an_async_mongo_scheduler_judges_time_by_the_database_clock() -> None:
    import mongomock

    from flowsched import AsyncMongoScheduler

    scheduler = AsyncMongoScheduler(mongomock.MongoClient(tz_aware=True)["db"]["t"], node_id="a")
    store = getattr(scheduler.store, "sync", scheduler.store)  # mongomock: run inline
    assert store.clock is None and database_time(scheduler).wants_sample()  # measured
    manual = AsyncMongoScheduler(
        mongomock.MongoClient(tz_aware=True)["db"]["t"], node_id="m", clock=ManualClock(T0)
    )
    manual_store = getattr(manual.store, "sync", manual.store)
    assert manual_store.clock is not None and not database_time(manual).wants_sample()


def test_a_node_that_only_schedules_writes_due_times_by_the_database_clock(
    collection: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """No handler, never started (an API process): its first call measures the offset. It
    used to write every due time by its own clock, 4 minutes slow here, so a worker fired
    the timers 4 minutes early."""
    node = ManualClock(T0)
    writer = MongoScheduler(collection, node_id="api", clock=SteppingClock(node))  # type: ignore[arg-type]
    server = Server(node, timedelta(minutes=4))
    hello(writer, server)  # the server's hello (mongomock has none)
    # Its very first call a schedule: fenced by the database's time, not the host's (4 min
    # behind: more than op_timeout, it used to refuse the write as past its deadline).
    first = writer.schedule(ScheduleItem("first", ScheduleKind.TIMER, T0 + timedelta(hours=1)))
    assert first.id == "first"
    item = writer.create_single_timer("t-1", timedelta(seconds=20), "worker")
    expected = node.now() + timedelta(minutes=4, seconds=20)
    assert abs(item.due - expected) < timedelta(seconds=1)
    warm = len(server.calls)
    assert 1 <= warm <= WARM  # a few samples to start with ...
    for n in range(5):
        writer.create_single_timer(f"t-{n + 2}", timedelta(seconds=20), "worker")
    assert len(server.calls) == warm  # ... then not per call

    node.jump(timedelta(seconds=31))  # the last sample is stale: measured again, once
    item = writer.create_single_timer("t-8", timedelta(seconds=20), "worker")
    writer.create_single_timer("t-9", timedelta(seconds=20), "worker")
    assert abs(item.due - (node.now() + timedelta(minutes=4, seconds=20))) < timedelta(seconds=1)
    assert len(server.calls) == warm + 1


def hello(scheduler: Any, server: Any) -> None:
    """Answer the store's ``hello`` with ``server`` (a plain call: mongomock's store runs
    inline, on either face)."""
    store = getattr(scheduler.store, "sync", scheduler.store)
    store.steps.roles.database.command = server


def database_time(scheduler: Any) -> Any:
    """The store's measurement of the database's clock (a MeasuredClock)."""
    return getattr(scheduler.store, "sync", scheduler.store).time


def test_an_async_node_that_only_schedules_measures_before_it_writes(collection: Any) -> None:
    import asyncio

    from flowsched import AsyncMongoScheduler

    node = ManualClock(T0)
    writer = AsyncMongoScheduler(collection, node_id="api", clock=SteppingClock(node))
    server = Server(node, timedelta(minutes=-4))
    hello(writer, server)  # mongomock: the store runs inline, its hello a plain call

    async def schedule() -> Any:
        return await writer.create_single_timer("t-1", timedelta(seconds=20), "worker")

    item = asyncio.run(schedule())
    expected = node.now() - timedelta(minutes=4) + timedelta(seconds=20)
    assert abs(item.due - expected) < timedelta(seconds=1)
    assert 1 <= len(server.calls) <= WARM


def test_a_flow_domain_on_a_skewed_node_counts_its_timers_on_the_database_clock(
    collection: Any,
) -> None:
    """The domain read entry times from its own clock (the host's), so on a node 290 s
    behind, a 60 s action timeout was stored 230 s in the past and fired at once."""
    from flowsched import ActionTimeoutEvent, Flow, FlowDomain

    node = ManualClock(T0)
    skewed = SteppingClock(node)
    skewed.step = timedelta(seconds=-290)
    scheduler = MongoScheduler(collection, node_id="api", clock=skewed)  # type: ignore[arg-type]
    hello(scheduler, Server(node, timedelta(0)))  # the database keeps true time
    flow = (
        Flow("Pay")
        .initial("Checking", invokes="Check")
        .terminal("TimedOut")
        .on(ActionTimeoutEvent, in_state="Checking", action="Check", go_to="TimedOut")
    )
    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string("Pay.Checking.Check.timeout-duration = 60s"))
        .with_scheduler_adapter(scheduler)
        .with_clock(skewed)
        .with_flow(flow)
        .with_action_adapter("Check", lambda request: None)
        .build()
    )
    domain.start("Pay", "p-1")
    [timer] = [doc for doc in collection.find() if doc.get("kind") == "ACTION_TIMEOUT"]
    due = timer["due"].replace(tzinfo=UTC)
    assert abs(due - (node.now() + timedelta(seconds=60))) < timedelta(seconds=1)


def test_an_async_node_measures_before_run_due_claims(collection: Any) -> None:
    """A fresh node 290 s ahead fired at once an item due in 60 s by the database's clock:
    its ``run_due`` claimed by its own clock (the sync face measured)."""
    import asyncio

    from flowsched import AsyncMongoScheduler, ScheduleItem, ScheduleKind

    node = ManualClock(T0)
    ahead = SteppingClock(node)
    ahead.step = timedelta(seconds=290)
    scheduler = AsyncMongoScheduler(collection, node_id="a", clock=ahead)
    hello(scheduler, Server(node, timedelta(0)))
    ran: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: ran.append(item.id))

    async def run() -> int:
        due = node.now() + timedelta(seconds=60)  # the database's time
        await scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, due))
        return await scheduler.run_due()

    assert asyncio.run(run()) == 0 and ran == []
    assert abs(scheduler.now() - node.now()) < timedelta(seconds=1)


@pytest.mark.parametrize("stored", [float("inf"), float("nan"), 1e300, "12"], ids=repr)
def test_a_heartbeat_with_an_odd_clock_offset_is_listed_without_it(
    collection: Any, stored: object
) -> None:
    nodes = collection.database["timers_nodes"]
    nodes.insert_one(
        {"_id": "n1", "routes": ["k:TIMER"], "renewed_at": T0,
         "expires_at": T0 + timedelta(minutes=1), "clock_offset_ms": stored}
    )  # fmt: skip
    [found] = live_nodes(nodes, T0)
    assert found.node_id == "n1" and found.clock_offset is None


def test_a_node_that_never_measured_measures_as_soon_as_the_database_answers_again() -> None:
    """A failed first try (an outage) must not leave the node judging due times by its own
    clock for RETRY seconds after the database is back (simulator seed 31: a node whose
    clock had stepped 6.8 s ahead claimed a timer 5.9 s early)."""
    import pymongo.errors

    node = ManualClock(T0)
    server = Server(node, timedelta(seconds=-7))
    down = True

    def command(name: str) -> dict[str, Any]:
        if down:
            raise pymongo.errors.AutoReconnect("outage")
        return server(name)

    clock = ServerClock(node, command, measure=True, owner="n1")
    clock.measured_now(timedelta(seconds=1))  # fails: the database is down
    assert not clock.measured
    down = False
    node.jump(timedelta(seconds=1))  # back well within RETRY
    clock.refresh_when_due()
    assert clock.measured
    assert clock.offset == timedelta(seconds=-7)
