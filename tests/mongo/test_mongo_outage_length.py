"""The node's recovery line ("the store answers again after ...") gives the outage's real
length (within one poll interval), although the first failing call blocks for
``op_timeout`` before it fails."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pymongo.errors import AutoReconnect

from flowsched.clock import SystemClock
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleKind

POLL = 0.1
OP_TIMEOUT = 1.0


class Outage:
    """A controllable server in front of ``inner`` (a collection): while down, every call
    blocks (until the server is back, at most ``op_timeout``) and then fails, as the driver
    does."""

    _PLAIN = frozenset({"database", "name", "full_name"})

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.up = threading.Event()
        self.up.set()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name in self._PLAIN or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if not self.up.is_set():
                back = self.up.wait(OP_TIMEOUT)
                if not back:
                    raise AutoReconnect("connection refused (test outage)")
            return attribute(*args, **kwargs)

        return call


def test_the_recovery_line_measures_the_outage_from_its_start(
    make: Callable[..., MongoScheduler], collection: Any, caplog: pytest.LogCaptureFixture
) -> None:
    outage = Outage(collection)
    scheduler = make(
        collection=outage,
        clock=SystemClock(),
        poll_interval=timedelta(seconds=POLL),
        op_timeout=timedelta(seconds=OP_TIMEOUT),
        push_wakeup=False,
    )
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    with caplog.at_level(logging.WARNING, "flowsched.node"):
        scheduler.start()
        time.sleep(0.5)
        outage.up.clear()
        began = time.monotonic()
        time.sleep(2.5)
        outage.up.set()
        lasted = time.monotonic() - began
        deadline = time.monotonic() + 10
        while not recovered(caplog) and time.monotonic() < deadline:
            time.sleep(0.05)
    reported = recovered(caplog)
    assert reported is not None, "no recovery line"
    # Within a poll interval (and some scheduling slack) of the real length; before the fix
    # it said about op_timeout less.
    assert lasted - POLL - 0.3 <= reported <= lasted + 0.3, (reported, lasted)


def recovered(caplog: pytest.LogCaptureFixture) -> float | None:
    for record in caplog.records:
        found = re.search(r"answers again after ([0-9.]+)s", record.getMessage())
        if found:
            return float(found.group(1))
    return None
