"""``history(item_id)`` on the four scheduler classes (CONTRACT section 18): the recent
attempts, oldest first, with node, times, outcome and error; bounded per item, kept after
the item is gone, and (MongoDB) a lapsed claim recorded when the item is claimed again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from history_faces import Face, face_fixture  # noqa: F401  (the fixture "face")

from flowsched import Attempt, ScheduleItem, ScheduleKind
from flowsched.history import HistoryPolicy
from flowsched.routes import name_route

S = timedelta(seconds=1)


def failing(times: int):
    def handler(item: ScheduleItem, attempt: int) -> None:
        if attempt < times:
            raise RuntimeError(f"bad gateway #{attempt}")

    return handler


def test_five_failed_attempts_are_read_back_whole_on_a_second_node(face: Face) -> None:
    runner = face.node("alpha")
    runner.register("pay", failing(5))
    started = face.clock.now()
    runner.schedule(ScheduleItem("p-1", ScheduleKind.TIMER, started, handler="pay"))
    face.clock.advance(10 * 60 * S)  # 3+6+12+24+30 s of backoff, then the sixth succeeds

    reader = face.node("beta") if face.mongo else runner
    attempts = reader.history("p-1")

    assert [a.outcome for a in attempts] == ["failed"] * 5 + ["succeeded"]
    assert [a.attempt for a in attempts] == [0, 1, 2, 3, 4, 5]
    # Each attempt ran at its due time (ManualClock): 0, 3, 9, 21, 45, 75 s.
    offsets = [int((a.started - started).total_seconds()) for a in attempts]
    assert offsets == [0, 3, 9, 21, 45, 75]
    for n, attempt in enumerate(attempts[:5]):
        assert attempt.node == attempts[0].node
        assert attempt.ended is not None and attempt.ended >= attempt.started
        assert attempt.error_type == "RuntimeError"
        assert attempt.error_message == f"bad gateway #{n}"
        assert attempt.traceback is not None and "bad gateway" in attempt.traceback
        assert 'raise RuntimeError(f"bad gateway' in attempt.traceback
    if face.mongo:
        assert {a.node for a in attempts} == {"alpha"}
    assert attempts[-1].error_type is None and attempts[-1].traceback is None


def test_history_is_kept_after_the_item_is_gone_and_bounded_per_item(face: Face) -> None:
    scheduler = face.node("alpha", history=HistoryPolicy(limit=3))
    scheduler.register("pay", failing(4))
    scheduler.schedule(ScheduleItem("p-2", ScheduleKind.TIMER, face.clock.now(), handler="pay"))
    face.clock.advance(5 * 60 * S)

    assert not scheduler.exists("p-2")
    attempts = scheduler.history("p-2")
    assert [(a.attempt, a.outcome) for a in attempts] == [
        (2, "failed"),
        (3, "failed"),
        (4, "succeeded"),
    ]
    assert scheduler.history("never-scheduled") == []


def test_history_expires_after_its_retention_in_process(face: Face) -> None:
    if face.mongo:
        pytest.skip("MongoDB expires it with a TTL index (the server's job, checked below)")
    scheduler = face.node("alpha", history=HistoryPolicy(retention=timedelta(hours=1)))
    scheduler.register("pay", failing(0))
    scheduler.schedule(ScheduleItem("p-3", ScheduleKind.TIMER, face.clock.now(), handler="pay"))
    face.clock.advance(S)
    assert [a.outcome for a in scheduler.history("p-3")] == ["succeeded"]
    face.clock.advance(timedelta(hours=1))
    assert scheduler.history("p-3") == []


def test_a_lapsed_claim_is_recorded_when_the_item_is_claimed_again(face: Face) -> None:
    if not face.mongo or face.name.startswith("async"):
        pytest.skip("leases are MongoDB's (the claim path is shared by both faces)")
    lease = timedelta(seconds=30)
    dead = face.node("dead-node", lease=lease)
    dead.register("pay", failing(0))
    dead.schedule(ScheduleItem("p-4", ScheduleKind.TIMER, face.clock.now(), handler="pay"))
    # Claims and starts through its store (as its firing does: start on claim), then
    # "dies" before any outcome.
    claimed = dead.store.claim_started([name_route("pay")], "dead-node", lease, 10)
    assert len(claimed) == 1
    dead.close()

    survivor = face.node("survivor", lease=lease)
    survivor.register("pay", failing(0))
    face.clock.advance(lease + S)

    attempts = survivor.history("p-4")
    assert [(a.node, a.outcome) for a in attempts] == [
        ("dead-node", "lapsed"),
        ("survivor", "succeeded"),
    ]
    assert attempts[0].ended is not None and attempts[0].started < attempts[0].ended


def test_mongo_history_lives_in_its_own_collection_with_a_ttl_index(face: Face) -> None:
    if face.name != "mongomock":
        pytest.skip("the collection layout is checked once, on mongomock")
    scheduler = face.node("alpha")
    scheduler.register("pay", failing(1))
    scheduler.schedule(ScheduleItem("p-5", ScheduleKind.TIMER, face.clock.now(), handler="pay"))
    face.clock.advance(60 * S)
    items = scheduler.collection
    history = items.database[f"{items.name}_history"]
    document = history.find_one({"_id": "p-5"})
    assert [a["outcome"] for a in document["attempts"]] == ["failed", "succeeded"]
    expires = document["expires_at"]
    ended = document["attempts"][-1]["ended"]
    # Seven days after its end, or after the wall clock's now if that is later (the TTL
    # monitor's clock: the virtual one may be behind it by the time the suite gets here).
    wall = datetime.now(UTC).replace(tzinfo=None if ended.tzinfo is None else UTC)
    assert ended + timedelta(days=7) <= expires <= max(ended, wall) + timedelta(days=7)
    ttl = [i for i in history.list_indexes() if i["name"] == "history_ttl"]
    assert ttl and ttl[0]["expireAfterSeconds"] == 0


def test_a_running_attempt_is_open() -> None:
    from history_faces import CLOCK_START

    attempt = Attempt("n", CLOCK_START)
    assert attempt.ended is None and attempt.outcome is None and attempt.traceback is None


@pytest.mark.parametrize("transient", [True, False])
def test_a_failed_history_write_never_fails_the_settle(transient: bool) -> None:
    mongomock = pytest.importorskip("mongomock")
    from history_faces import CLOCK_START
    from pymongo.errors import AutoReconnect, OperationFailure

    from flowsched.clock import ManualClock
    from flowsched.mongo import MongoScheduler

    clock = ManualClock(CLOCK_START)
    collection = mongomock.MongoClient(tz_aware=True)["flowsched"]["timers"]
    scheduler = MongoScheduler(collection, node_id="alpha", clock=clock)
    scheduler.register("pay", failing(0))
    scheduler.start()
    items = scheduler.collection
    history = items.database[f"{items.name}_history"]  # mongomock: one object per name
    error = AutoReconnect("blip") if transient else OperationFailure("refused", code=121)

    def broken(*args: object, **kwargs: object) -> None:
        raise error

    original = history.update_one
    history.update_one = broken
    scheduler.schedule(ScheduleItem("p-6", ScheduleKind.TIMER, clock.now(), handler="pay"))
    clock.advance(S)
    assert not scheduler.exists("p-6")  # the outcome was written all the same
    history.update_one = original
    scheduler.schedule(ScheduleItem("p-7", ScheduleKind.TIMER, clock.now(), handler="pay"))
    clock.advance(S)
    kept = [a.outcome for a in scheduler.history("p-6")]
    assert kept == (["succeeded"] if transient else [])  # kept for the next settle, or dropped
    assert [a.outcome for a in scheduler.history("p-7")] == ["succeeded"]
    scheduler.close()


def test_history_settings_come_from_the_config_and_bad_values_name_their_key() -> None:
    from flowsched import ConfigError, InMemoryScheduler, SchedulingConfig

    config = SchedulingConfig.from_string(
        "ipf-scheduler.flowsched { history-limit = 5, history-retention = 2d }"
    )
    settings = config.scheduler_settings()
    assert (settings.history_limit, settings.history_retention) == (5, timedelta(days=2))
    scheduler = InMemoryScheduler.from_config(config)
    store = scheduler.store
    assert (store.history_limit, store.history_retention) == (5, timedelta(days=2))
    scheduler.close()
    for bad in ("history-limit = 0", "history-limit = 1001", "history-retention = 0s"):
        with pytest.raises(ConfigError, match=bad.split(" ")[0]):
            SchedulingConfig.from_string(f"ipf-scheduler.flowsched.{bad}").scheduler_settings()


def test_a_mongo_history_expires_by_the_wall_clock_even_under_a_virtual_one() -> None:
    # The TTL monitor judges expires_at by the server's wall clock: counted from a virtual
    # clock in the past, the history would be removed at once.
    from flowsched.mongo.history import expires_at

    week = timedelta(days=7)
    wall = datetime(2030, 6, 1, tzinfo=UTC)
    past = datetime(2026, 1, 1, tzinfo=UTC)
    assert expires_at(past, week, lambda: wall) == wall + week
    assert expires_at(wall + S, week, lambda: wall) == wall + S + week  # ahead: its own end
