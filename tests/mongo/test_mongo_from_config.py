"""MongoScheduler.from_config: the collection and settings come from application.conf."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import mongomock
import pytest

from flowsched import ConfigError, ManualClock, MongoFlowStore, MongoScheduler, SchedulingConfig
from flowsched.mongo.documents import bucket_of
from flowsched.port import ScheduleItem, ScheduleKind

# The start of the `clock` fixture (tests/mongo/conftest.py). Not imported: `conftest` is
# ambiguous when pytest collects several test folders in one process.
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

SETTINGS = """
ipf-scheduler {
  mongodb { uri = "mongodb://db.example/ipf", database-name = scheduled, collection = timers_a }
  flowsched {
    poll-interval = 200ms
    lease = 10s
    batch-size = 5
    workers = 2
    op-timeout = 3s
    redelivery { initial = 1s, maximum = 4s }
    max-attempts = 2
    node-id = node-from-file
  }
}
"""


class Factory:
    """A client factory that hands out one mongomock client and records its arguments."""

    def __init__(self) -> None:
        self.client: Any = mongomock.MongoClient()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.closed = False

    def __call__(self, uri: str, **options: Any) -> Any:
        self.calls.append((uri, options))
        self.client.close = self.close
        return self.client

    def close(self) -> None:
        self.closed = True


def failing(item: ScheduleItem, attempt: int) -> None:
    raise RuntimeError("handler down")


def test_the_collection_and_the_settings_come_from_the_file() -> None:
    factory = Factory()
    clock = ManualClock(START)
    config = SchedulingConfig.from_string(SETTINGS)

    with MongoScheduler.from_config(config, clock=clock, client_factory=factory) as scheduler:
        assert scheduler.node_id == "node-from-file"
        scheduler.subscribe(ScheduleKind.TIMER, failing)
        scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, START + timedelta(seconds=1)))
        stored = factory.client["scheduled"]["timers_a"].find_one({"_id": "t-1"})
        assert stored is not None

        # max-attempts = 2 with redelivery from 1s: fails at +1s, again at +2s, dead.
        clock.advance(timedelta(seconds=1))
        scheduler.run_due()
        clock.advance(timedelta(seconds=1))
        scheduler.run_due()
        assert [d.item.id for d in scheduler.dead_letters()] == ["t-1"]

    ((uri, options),) = factory.calls
    assert uri == "mongodb://db.example/ipf"
    assert options["tz_aware"] is True
    assert options["serverSelectionTimeoutMS"] == 3000
    assert factory.closed, "close() closes the client from_config made"


def test_the_node_id_argument_wins_and_the_database_may_come_from_the_uri() -> None:
    factory = Factory()
    config = SchedulingConfig.from_string('ipf-scheduler.mongodb.uri = "mongodb://h/ipf"')

    scheduler = MongoScheduler.from_config(
        config, node_id="node-b", clock=ManualClock(START), client_factory=factory
    )
    scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, START))
    scheduler.close()

    assert scheduler.node_id == "node-b"
    assert factory.client["ipf"]["timers"].count_documents({}) == 1


def test_an_option_the_uri_sets_is_the_uris() -> None:
    factory = Factory()
    config = SchedulingConfig.from_string(
        'ipf-scheduler.mongodb.uri = "mongodb://h/ipf?serverSelectionTimeoutMS=500"'
    )

    MongoScheduler.from_config(config, clock=ManualClock(START), client_factory=factory).close()

    assert "serverSelectionTimeoutMS" not in factory.calls[0][1]


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        ("", "ipf-scheduler.mongodb.uri"),
        ('ipf-scheduler.mongodb.uri = "mongodb://h"', "ipf-scheduler.mongodb.database-name"),
    ],
)
def test_without_a_uri_or_a_database_the_error_names_the_key(conf: str, named: str) -> None:
    factory = Factory()

    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        MongoScheduler.from_config(SchedulingConfig.from_string(conf), client_factory=factory)
    assert factory.calls == []


@pytest.mark.parametrize(
    ("mongodb", "message"),
    [
        ('uri = "mongodb://h:99999/db"', "uri: the MongoDB driver refused it: ValueError: Port"),
        ('uri = "mongodb+srv://h:27017/db"', "uri: the MongoDB driver refused it: InvalidURI"),
        ('uri = "mongodb://h/bad.name"', "uri: names the database 'bad.name', which is no"),
        ('uri = "mongodb://h/db", collection = "a..b"', 'collection = "a..b": must be a'),
    ],
)
def test_a_uri_database_or_collection_the_driver_refuses_is_a_config_error_naming_the_key(
    mongodb: str, message: str
) -> None:
    # The real driver (not the test factory): its own refusals become a ConfigError.
    with pytest.raises(ConfigError) as caught:
        config = SchedulingConfig.from_string(f"ipf-scheduler.mongodb {{ {mongodb} }}")
        MongoScheduler.from_config(config).close()
    assert f"ipf-scheduler.mongodb.{message}" in str(caught.value)


def test_bad_scheduler_settings_are_rejected_when_the_file_is_loaded() -> None:
    with pytest.raises(ConfigError) as caught:
        SchedulingConfig.from_string("ipf-scheduler.flowsched { lease = -1s, batch-siz = 3 }")

    shown = str(caught.value)
    assert 'ipf-scheduler.flowsched.lease = "-1s": a duration cannot be negative' in shown
    assert "did you mean ipf-scheduler.flowsched.batch-size?" in shown


def test_on_the_wire_server_timers_survive_a_new_scheduler(mongo_uri: str, mongo_db: Any) -> None:
    quoted = mongo_uri.replace('"', '\\"')
    config = SchedulingConfig.from_string(
        f"""
        ipf-scheduler.mongodb {{ uri = "{quoted}", database-name = {mongo_db.name} }}
        ipf-scheduler.flowsched {{ node-id = wire-node, op-timeout = 10s }}
        """
    )
    clock = ManualClock(START)
    fired: list[str] = []

    first = MongoScheduler.from_config(config, clock=clock)
    first.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, START + timedelta(seconds=5)))
    first.close()

    with MongoScheduler.from_config(config, clock=clock) as second:
        assert second.node_id == "wire-node"
        assert second.exists("t-1")
        second.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
        clock.advance(timedelta(seconds=5))
        second.run_due()

    assert fired == ["t-1"]
    assert mongo_db["timers"].count_documents({}) == 0


@pytest.mark.parametrize(
    ("argument", "value", "named"),
    [
        ("lease", timedelta(days=10**6), "lease"),
        ("poll_interval", timedelta(days=366), "poll_interval"),
        ("op_timeout", timedelta(days=2), "op_timeout"),
        ("batch_size", 2**70, "batch_size"),
        ("workers", 10**6, "workers"),
        ("buckets", 10**12, "buckets"),  # the node lists its buckets: a MemoryError
    ],
)
def test_the_constructor_refuses_what_from_config_refuses(
    argument: str, value: object, named: str
) -> None:
    # Built directly, a scheduler has the same bounds as from a file (a huge lease never
    # fired, a huge op_timeout or batch raised OverflowError only once running).
    collection: Any = mongomock.MongoClient()["db"]["timers"]
    with pytest.raises(ValueError, match=f"MongoScheduler {named} must be"):
        MongoScheduler(collection, **{argument: value})


def test_the_bucket_count_comes_from_the_file() -> None:
    factory = Factory()
    config = SchedulingConfig.from_string(
        'ipf-scheduler { mongodb.uri = "mongodb://h/db", flowsched.buckets = 4 }'
    )
    far = next(f"t-{n}" for n in range(100) if bucket_of(f"t-{n}", 4) == 3)
    with MongoScheduler.from_config(config, clock=ManualClock(START), client_factory=factory) as s:
        s.schedule(ScheduleItem(far, ScheduleKind.TIMER, START))
        assert s.collection.find_one({"_id": far})["bucket"] == 3  # spread over 4 buckets
        settings = s.collection.database[f"{s.collection.name}_settings"]
        assert settings.find_one({"_id": "buckets"})["value"] == 4  # and recorded so


def test_the_collection_is_public_so_a_flow_store_can_share_its_database() -> None:
    factory = Factory()
    scheduler = MongoScheduler.from_config(
        SchedulingConfig.from_string(SETTINGS),
        clock=ManualClock(START),
        client_factory=factory,
    )
    with scheduler:
        assert scheduler.collection.full_name == "scheduled.timers_a"
        store = MongoFlowStore(scheduler.collection.database["flows"])
        assert store.collection.full_name == "scheduled.flows"
