"""Bursts of replaces and cancels 10-30 ms apart on 3 ``MongoScheduler`` nodes with idle
workers (CONTRACT section 15; :mod:`flowsched.testing.seam_burst`): every start follows a
check of its claim, and no form starts on a check sent after its successor - a replace, or
a cancel that answered ``True`` - had returned; a form that started after its successor
returned (its check had answered before) is listed in ``history``. Kept small (the wire
server is slow); ``bench/seam_burst.py`` runs larger bursts and prints the counts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")

from pymongo import MongoClient

from flowsched import HistoryPolicy, MongoScheduler
from flowsched.mongo.settlement import Claim
from flowsched.mongo.start_check import StartChecks
from flowsched.testing.seam_burst import SeamBurst

pytestmark = [pytest.mark.wire, pytest.mark.slow]


def report_checks(monkeypatch: pytest.MonkeyPatch, burst: SeamBurst) -> None:
    """Tell ``burst`` of every start check the nodes send (one ``find`` per batch)."""
    check_steps = StartChecks.check_steps

    def reported(self: StartChecks, batch: Sequence[Claim]) -> Any:
        for claim in batch:
            burst.checked(claim.item.id, claim.item.generation)
        return (yield from check_steps(self, batch))

    monkeypatch.setattr(StartChecks, "check_steps", reported)


@pytest.fixture
def nodes(mongo_uri: str, mongo_db: Any) -> Iterator[list[MongoScheduler]]:
    clients: list[Any] = [MongoClient(mongo_uri) for _ in range(3)]
    built = [
        MongoScheduler(
            client[mongo_db.name]["timers"],
            node_id=f"burst-{k}-{uuid.uuid4().hex[:4]}",
            poll_interval=timedelta(milliseconds=200),
            history=HistoryPolicy(limit=1000),  # every form's attempt stays listed
        )
        for k, client in enumerate(clients)
    ]
    yield built
    for node in built:
        node.close()
    for client in clients:
        client.close()


def test_no_form_starts_on_a_check_sent_after_its_successor_returned(
    nodes: list[MongoScheduler], monkeypatch: pytest.MonkeyPatch
) -> None:
    burst = SeamBurst(nodes, seed=37)
    report_checks(monkeypatch, burst)
    report = burst.run(operations=300)
    print(report.describe())

    assert report.errors == [], report.describe()
    assert report.starts > 0 and report.checks > 0, report.describe()
    assert report.uncheck_started == [], report.describe()
    assert report.unchecked == [], report.describe()
    # A form that started after its successor returned (its check had answered before) is
    # one the caller learns of from history (CONTRACT section 15).
    assert report.unrecorded == [], report.describe()
    assert report.unfired == [], report.describe()  # and no last form was lost
