"""Durable machine timeouts outlive the process and fire once in a cluster (wire server, real
processes: ``tests/integrations/machine_process.py``).

* Restart: a process arms a 30 s timeout for one order and cancels another's, then ends
  without closing anything. A new process (same name, same collection, a ``load_model``)
  fires the first at exactly 30 s of its virtual clock, once, and the second never.
* Cluster: two nodes on one collection, ``FLOWSCHED_CLUSTER_MODELS`` orders (200 by default,
  1,000 for the acceptance run) in a 3 s timeout, a tenth of them paid before it; one node is
  SIGKILLed while firing. Every waiting order expires exactly once (0 lost, 0 duplicates);
  no paid order expires.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pymongo")

pytestmark = [pytest.mark.wire, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
MODULE = "tests.integrations.machine_process"


def process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", MODULE, *args], cwd=REPO, stdout=subprocess.PIPE, text=True
    )


def finished(popen: subprocess.Popen[str], timeout: float = 240) -> list[str]:
    out, _ = popen.communicate(timeout=timeout)
    assert popen.returncode == 0, f"{MODULE} failed: {out}"
    return out.splitlines()


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def nodes() -> Iterator[dict[str, subprocess.Popen[str]]]:
    running: dict[str, subprocess.Popen[str]] = {}
    yield running
    for popen in running.values():
        if popen.poll() is None:
            popen.kill()
            popen.wait(30)


@pytest.mark.timeout(300)  # two processes start on the shared, sometimes slow, wire server
def test_a_waiting_model_survives_a_restart(mongo_uri: str, mongo_db: Any) -> None:
    [armed] = finished(process("arm", mongo_uri, mongo_db.name, "--models", "2", "--leave", "1"))
    assert json.loads(armed) == {"armed": 2, "left": 1}
    assert mongo_db["timers"].count_documents({}) == 1  # the paid order's timer is cancelled

    steps = [json.loads(line) for line in finished(process("fire", mongo_uri, mongo_db.name))]

    at_29s, at_30s, later = steps
    assert at_29s["calls"] == []
    assert at_30s["calls"] == ["o-1"]  # o-0 left the state: it gets nothing
    assert at_30s["loaded_at"] == ["2026-01-01T00:00:30+00:00"]  # fired at its due time
    assert later["calls"] == ["o-1"]  # exactly once
    assert mongo_db["orders"].find_one({"_id": "o-1"})["fires"] == 1
    assert mongo_db["timers"].count_documents({}) == 0


@pytest.mark.timeout(600)
def test_two_nodes_one_killed_every_timeout_exactly_once(
    mongo_uri: str, mongo_db: Any, nodes: dict[str, subprocess.Popen[str]]
) -> None:
    models = int(os.environ.get("FLOWSCHED_CLUSTER_MODELS", "200"))
    leave = models // 10
    for name in ("victim", "survivor"):
        nodes[name] = process("node", mongo_uri, mongo_db.name, "--node", name, "--timeout", "3")
    for popen in nodes.values():
        assert popen.stdout is not None and popen.stdout.readline().strip() == "ready"
    started = time.monotonic()
    arm = process(
        "arm", mongo_uri, mongo_db.name, "--system-clock", "--threads", "8",
        "--models", str(models), "--leave", str(leave), "--timeout", "3",
    )  # fmt: skip
    orders = mongo_db["orders"]
    wait_until(
        lambda: orders.count_documents({"by": "victim"}) >= max(5, models // 20),
        240,
        "the victim to be firing",
    )
    nodes["victim"].send_signal(signal.SIGKILL)
    nodes["victim"].wait(30)
    time.sleep(0.5)  # a write the victim sent just before dying may still be applied
    held = mongo_db["timers"].count_documents({"claim.owner": "victim"})
    finished(arm)
    waiting = models - leave
    wait_until(
        lambda: (
            orders.count_documents({"state": "expired"}) >= waiting
            and mongo_db["timers"].count_documents({}) == 0
        ),
        300,
        f"{waiting} orders to expire",
    )
    elapsed = time.monotonic() - started

    fires = Counter(doc["fires"] for doc in orders.find({}, {"fires": 1}))
    assert fires == {1: waiting, 0: leave}  # 0 lost, 0 duplicates
    assert orders.count_documents({"state": "paid", "fires": 0}) == leave
    repeats = mongo_db["calls"].count_documents({"repeat": True})
    by = Counter(doc["by"] for doc in orders.find({"state": "expired"}, {"by": 1}))
    print(
        f"\n{models} models, {elapsed:.1f} s; fired by {dict(by)}; claims the victim held at "
        f"its death: {held}; on_timeout repeats: {repeats}"
    )
    assert set(by) == {"victim", "survivor"}
