"""Bursts of replaces and cancels 10-30 ms apart on 3 ``MongoScheduler`` nodes with idle
workers (CONTRACT section 15; :mod:`flowsched.testing.seam_burst`): every start follows a
check of its claim, and no form starts on a check sent after its successor - a replace, or
a cancel that answered ``True`` - had returned; a form that started after its successor
returned (its check had answered before) is listed in ``history``. Kept small (the wire
server is slow); ``bench/seam_burst.py`` runs larger bursts and prints the counts."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")

from pymongo import AsyncMongoClient, MongoClient

from flowsched import AsyncMongoScheduler, HistoryPolicy, MongoScheduler
from flowsched.mongo.settlement import Claim
from flowsched.mongo.start_check import StartChecks
from flowsched.testing.seam_burst import AsyncSeamBurst, BurstReport, SeamBurst

pytestmark = [pytest.mark.wire, pytest.mark.slow]


POLL = timedelta(milliseconds=200)
HISTORY = HistoryPolicy(limit=1000)  # every form's attempt stays listed


def report_checks(monkeypatch: pytest.MonkeyPatch, burst: SeamBurst | AsyncSeamBurst) -> None:
    """Tell ``burst`` of every start check the nodes send (one ``find`` per batch; the
    asyncio face's checks are the same procedure)."""
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
            poll_interval=POLL,
            history=HISTORY,
        )
        for k, client in enumerate(clients)
    ]
    yield built
    for node in built:
        node.close()
    for client in clients:
        client.close()


def check(report: BurstReport) -> None:
    print(report.describe())
    report.assert_kept()


def test_no_form_starts_on_a_check_sent_after_its_successor_returned(
    nodes: list[MongoScheduler], monkeypatch: pytest.MonkeyPatch
) -> None:
    burst = SeamBurst(nodes, seed=37)
    report_checks(monkeypatch, burst)
    check(burst.run(operations=300))


def test_the_async_face_starts_no_form_on_a_check_sent_after_its_successor_returned(
    mongo_uri: str, mongo_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run() -> BurstReport:
        clients: list[Any] = [AsyncMongoClient(mongo_uri) for _ in range(3)]
        nodes = [
            AsyncMongoScheduler(
                client[mongo_db.name]["timers"],
                node_id=f"burst-{k}-{uuid.uuid4().hex[:4]}",
                poll_interval=POLL,
                history=HISTORY,
            )
            for k, client in enumerate(clients)
        ]
        burst = AsyncSeamBurst(nodes, seed=38)
        report_checks(monkeypatch, burst)
        try:
            return await burst.run(operations=300)
        finally:
            for node in nodes:
                await node.aclose(timeout=5)
            for client in clients:
                await client.close()

    check(asyncio.run(run()))
