"""A server that is down: one short error line naming what, where and how long, and a way
to learn it at start-up (``ping()``, ``from_config(..., check=True)``) instead of at the
first call."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import mongomock
import pymongo
import pytest
from pymongo.errors import PyMongoError

from flowsched import MongoScheduler, SchedulerUnavailable, SchedulingConfig, SystemClock
from flowsched.port import ScheduleItem, ScheduleKind

QUICK = timedelta(milliseconds=400)


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def down_client(closed_port: int) -> Iterator[Any]:
    client: Any = pymongo.MongoClient(
        f"mongodb://127.0.0.1:{closed_port}/?directConnection=true",
        serverSelectionTimeoutMS=300,
        connectTimeoutMS=300,
    )
    yield client
    client.close()


def test_scheduler_unavailable_is_one_short_line_with_the_driver_error_as_cause(
    down_client, closed_port
):
    scheduler = MongoScheduler(down_client["db"]["timers"], op_timeout=QUICK)
    item = ScheduleItem("t", ScheduleKind.TIMER, SystemClock().now())

    with pytest.raises(SchedulerUnavailable) as raised:
        scheduler.schedule(item)

    message = str(raised.value)
    assert message.startswith(
        f"MongoDB at 127.0.0.1:{closed_port} unreachable: schedule('t') did not take effect "
        "within op_timeout=0.4s (ServerSelectionTimeoutError: "
    )
    assert "\n" not in message and len(message) < 300, message
    assert "Topology Description" not in message and "configured timeouts" not in message
    assert isinstance(raised.value.__cause__, PyMongoError)
    assert "Topology Description" in str(raised.value.__cause__)  # the detail is kept there


def test_ping_fails_fast_against_a_down_server(down_client, closed_port):
    scheduler = MongoScheduler(down_client["db"]["timers"], op_timeout=QUICK)
    started = time.monotonic()

    with pytest.raises(
        SchedulerUnavailable, match=rf"127\.0\.0\.1:{closed_port} unreachable: ping"
    ):
        scheduler.ping()

    assert time.monotonic() - started < 5  # op_timeout, not the driver's 30 s default


def test_ping_passes_when_the_server_answers():
    scheduler = MongoScheduler(mongomock.MongoClient()["db"]["timers"])

    assert scheduler.ping() is None


def config_for(port: int) -> SchedulingConfig:
    return SchedulingConfig.from_string(
        f"""
        ipf-scheduler {{
          mongodb {{ uri = "mongodb://127.0.0.1:{port}/?directConnection=true",
                     database-name = scheduled }}
          flowsched.op-timeout = 400ms
        }}
        """
    )


def test_from_config_with_check_fails_at_once_against_a_down_server_and_closes_its_client(
    closed_port,
):
    made: list[Any] = []

    def factory(uri: str, **options: Any) -> Any:
        made.append(pymongo.MongoClient(uri, **options))
        return made[-1]

    with pytest.raises(SchedulerUnavailable, match="unreachable: ping did not take effect"):
        MongoScheduler.from_config(config_for(closed_port), check=True, client_factory=factory)

    assert len(made) == 1
    with pytest.raises(pymongo.errors.InvalidOperation):  # closed: no thread left behind
        made[0]["scheduled"].command("ping")


def test_from_config_without_check_makes_no_round_trip(closed_port):
    scheduler = MongoScheduler.from_config(config_for(closed_port))  # as before: lazy

    scheduler.close()


@pytest.mark.wire
def test_from_config_with_check_passes_against_a_live_server(mongo_uri):
    database = f"flowsched_ping_{uuid.uuid4().hex[:8]}"
    config = SchedulingConfig.from_string(
        f'ipf-scheduler.mongodb {{ uri = "{mongo_uri}", database-name = {database} }}'
    )

    with MongoScheduler.from_config(config, check=True) as scheduler:
        assert scheduler.node_id
