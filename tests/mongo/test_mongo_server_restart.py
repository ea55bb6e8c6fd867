"""The MongoDB server stops for a few seconds mid-run and comes back: nothing is lost.

Runs a private test server (own data dir and port, the shared server's venv) so that
stopping it disturbs nobody. Skipped against a real MongoDB, where there is no script to
stop and start a server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mongo_nodes import REPO, Nodes, all_done, deliveries, schedule_spread, wait_until
from pymongo import MongoClient

from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind, SchedulerUnavailable

pytestmark = [pytest.mark.wire, pytest.mark.slow]


class PrivateServer:
    """A SecantusDB of our own, started and stopped through ``tools/start-mongo.sh``."""

    def __init__(self, script: str, venv: str) -> None:
        self.home = tempfile.mkdtemp(prefix="flowsched-restart-")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.script = script
        self.env = {
            **os.environ,
            "MONGO_HOME": self.home,
            "MONGO_PORT": str(self.port),
            "MONGO_VENV": venv,
        }
        self.uri = f"mongodb://127.0.0.1:{self.port}/?directConnection=true&retryWrites=false"

    def start(self) -> None:
        subprocess.run(["bash", self.script], env=self.env, check=True, timeout=120)

    def stop(self) -> None:
        subprocess.run(["bash", self.script, "stop"], env=self.env, check=True, timeout=60)

    def remove(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture
def private_server(mongo_uri: str) -> Iterator[PrivateServer]:
    home = os.environ.get("MONGO_HOME", "/tmp/flowsched-mongo")
    venv = os.environ.get("MONGO_VENV") or f"{home}/venv"
    script = os.environ.get("FLOWSCHED_MONGO_SCRIPT") or str(REPO / "tools" / "start-mongo.sh")
    if not Path(venv, "bin", "secantusd-py").exists():
        pytest.skip("no local test server install to run a private server with (real MongoDB?)")
    server = PrivateServer(script, venv)
    server.start()
    yield server
    server.stop()
    server.remove()


def test_schedulers_recover_when_the_server_restarts(private_server: PrivateServer) -> None:
    client: Any = MongoClient(private_server.uri, tz_aware=True, serverSelectionTimeoutMS=2000)
    db = client["restart"]
    group = Nodes(private_server.uri, "restart")
    try:
        group.start("r1", "r2", redelivery=0.3)
        ids = schedule_spread(db, 150, timedelta(seconds=1), timedelta(seconds=6))
        wait_until(lambda: db["deliveries"].count_documents({}) >= 20, 60, "first deliveries")

        assert db["timers"].count_documents({}) > 0, "all fired before the outage"
        private_server.stop()
        # While it is down a caller learns it at once: an error, not a silent drop.
        caller = MongoScheduler(db["timers"], op_timeout=timedelta(seconds=1))
        late = ScheduleItem("during-outage", ScheduleKind.TIMER, datetime.now(UTC))
        with pytest.raises(SchedulerUnavailable):
            caller.schedule(late)
        time.sleep(1.0)
        assert sorted(group.alive()) == ["r1", "r2"]

        private_server.start()
        wait_until(lambda: all_done(db, ids), 120, "every item after the restart")
        assert sorted(group.alive()) == ["r1", "r2"]
        group.stop()
        assert set(Counter(r["item"] for r in deliveries(db))) == ids
    finally:
        group.kill_all()
        client.close()
