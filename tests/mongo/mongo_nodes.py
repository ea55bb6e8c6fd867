"""Helpers for the multi-process tests: start, stop and kill scheduler nodes; wait for a state."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind

REPO = Path(__file__).resolve().parents[2]


class Nodes:
    """Scheduler processes (``tests/mongo/node.py``, or another ``module`` taking the same
    arguments) on one database; all killed at teardown."""

    def __init__(self, uri: str, database: str, module: str = "tests.mongo.node") -> None:
        self.uri = uri
        self.database = database
        self.module = module
        self.running: dict[str, subprocess.Popen[str]] = {}

    def start(self, *names: str, **options: float | str) -> None:
        """Start one process per name and wait until each reports ``ready``."""
        flags = [f"--{key.replace('_', '-')}={value}" for key, value in options.items()]
        for name in names:
            command = [sys.executable, "-m", self.module, self.uri, self.database, name]
            self.running[name] = subprocess.Popen(
                [*command, *flags], cwd=REPO, stdout=subprocess.PIPE, text=True
            )
        for name in names:
            stdout = self.running[name].stdout
            assert stdout is not None
            assert stdout.readline().strip() == "ready", f"node {name} did not start"

    def kill(self, name: str) -> None:
        """``kill -9``: no close, no outcome written, claims left to expire."""
        process = self.running.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(30)

    def pause(self, name: str) -> None:
        """``kill -STOP``: the node freezes (a VM paused, a long GC), holding what it holds."""
        self.running[name].send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        """``kill -CONT``: the paused node runs on from where it was."""
        self.running[name].send_signal(signal.SIGCONT)

    def stop(self, *names: str) -> None:
        """SIGTERM: the node closes gracefully (waits for handlers, writes outcomes)."""
        for name in names or tuple(self.running):
            self.running[name].send_signal(signal.SIGTERM)
        for name in names or tuple(self.running):
            assert self.running.pop(name).wait(60) == 0, f"node {name} did not close cleanly"

    def alive(self) -> list[str]:
        return [name for name, process in self.running.items() if process.poll() is None]

    def kill_all(self) -> None:
        for name in list(self.running):
            self.kill(name)


WAIT = 20.0
"""Seconds a test waits for a background state: generous, for a loaded 2-core machine."""


def eventually(condition: Callable[[], bool], timeout: float = WAIT) -> bool:
    """Poll ``condition`` until true or ``timeout`` seconds have passed; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def wait_until(
    condition: Callable[[], bool],
    timeout: float,
    what: str,
    state: Callable[[], str] | None = None,
) -> None:
    """Poll ``condition`` until true; fail naming ``what`` (and ``state()``, what was seen)
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            seen = f"; {state()}" if state is not None else ""
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{seen}")
        time.sleep(0.1)


class Spread:
    """``count`` timers due evenly over ``spread``, from ``start`` from now, scheduled one by
    one from a background thread while the caller watches the cluster (call ``join``).

    On a loaded server, scheduling them can take longer than ``start``: the nodes then deliver
    them as they are written, and a state a test waits for (a node delivering and holding
    claims) comes and goes before a caller that waited for the scheduling starts to look.
    Use it in a ``with`` block: leaving it stops the scheduling, so a test that fails before
    ``join`` leaves no thread writing into the next test's database.
    """

    def __init__(self, db: Any, count: int, start: timedelta, spread: timedelta) -> None:
        self.ids = {f"t-{n:04}" for n in range(count)}
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._schedule, args=(db, count, start, spread), daemon=True
        )
        self._thread.start()

    def _schedule(self, db: Any, count: int, start: timedelta, spread: timedelta) -> None:
        try:
            scheduler = MongoScheduler(db["timers"], node_id="test")
            first = datetime.now(UTC) + start
            for n in range(count):
                if self._stop.is_set():
                    return
                due = first + spread * n / count
                scheduler.schedule(ScheduleItem(f"t-{n:04}", ScheduleKind.TIMER, due))
        except BaseException as error:  # re-raised in join()
            self._error = error

    def join(self, timeout: float = 120) -> set[str]:
        """Wait until every timer is scheduled (re-raising what failed); their ids."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"scheduling took over {timeout:.0f}s"
        if self._error is not None:
            raise self._error
        return self.ids

    def __enter__(self) -> Spread:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def schedule_spread(db: Any, count: int, start: timedelta, spread: timedelta) -> set[str]:
    """Schedule ``count`` timers due evenly over ``spread``, from ``start`` from now."""
    with Spread(db, count, start, spread) as scheduling:
        return scheduling.join()


def all_done(db: Any, ids: set[str]) -> bool:
    if db["timers"].count_documents({}):
        return False
    return set(db["deliveries"].distinct("item")) >= ids


def deliveries(db: Any) -> list[dict[str, Any]]:
    return list(db["deliveries"].find({}, {"_id": 0}))


def cluster_state(db: Any, nodes: Nodes) -> str:
    """What a failed wait saw: deliveries per node, claims per owner, the nodes alive."""
    delivered = Counter(record["node"] for record in deliveries(db))
    claims = Counter((doc.get("claim") or {}).get("owner") for doc in db["timers"].find())
    alive = nodes.alive()
    return f"deliveries by node {dict(delivered)}, claims by owner {dict(claims)}, alive {alive}"


def kill_while_holding(db: Any, nodes: Nodes, victim: str, timeout: float = 60) -> set[str]:
    """SIGKILL ``victim`` once it has delivered and still holds claims; the ids it held.

    Schedule the timers over several seconds: the victim then keeps claiming the ones coming
    due, and the window in which it holds claims stays open while this polls (timers all due
    at once can be finished between two polls, and the kill would test nothing).
    """
    wait_until(
        lambda: (
            db["deliveries"].count_documents({"node": victim}) >= 1
            and db["timers"].count_documents({"claim.owner": victim}) > 0
        ),
        timeout,
        f"{victim} to be delivering and holding claims",
        lambda: cluster_state(db, nodes),
    )
    nodes.kill(victim)
    time.sleep(0.5)  # a write the victim sent just before dying may still be applied
    held = set(db["timers"].distinct("_id", {"claim.owner": victim}))
    assert held, f"{victim} held no claims when killed: nothing was tested"
    return held
