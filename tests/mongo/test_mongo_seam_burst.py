"""Bursts of replaces and cancels 10-30 ms apart on 3 ``MongoScheduler`` nodes with idle
workers (CONTRACT section 15; :mod:`flowsched.testing.seam_burst`): every start follows a
check of its claim (a ``find``, or the claim itself when it records the start), and no form
starts on a check sent after its successor - a replace, or a cancel that answered ``True`` -
had returned; a form whose handler was called after its successor returned (its check or
recorded start came before) is listed in ``history``. Kept small (the wire
server is slow); ``bench/seam_burst.py`` runs larger bursts and prints the counts.

A start the server acknowledged to the claim and then lost - the cancel or replace that
removed its form returned it without that start, which breaks single-document atomicity
(SecantusDB 0.7.0b3 does under concurrent writes to one document) - is printed and set apart
(:class:`flowsched.testing.mongo_burst.ServerRecord`): no store can list a start its server
lost. Every other stale start must be in ``history``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")

from pymongo import AsyncMongoClient, MongoClient

from flowsched import AsyncMongoScheduler, HistoryPolicy, MongoScheduler
from flowsched.testing.mongo_burst import ServerRecord, reported_checks
from flowsched.testing.seam_burst import AsyncSeamBurst, BurstReport, SeamBurst

pytestmark = [pytest.mark.wire, pytest.mark.slow]


POLL = timedelta(milliseconds=200)
HISTORY = HistoryPolicy(limit=1000)  # every form's attempt stays listed


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


def check(report: BurstReport, server: ServerRecord) -> None:
    print(report.describe())
    kept = server.excused(report)
    for stale in server.excused_starts:
        print(f"  start lost by the server (acknowledged, then not in its removal): {stale}")
    kept.assert_kept()


def test_no_form_starts_on_a_check_sent_after_its_successor_returned(
    nodes: list[MongoScheduler],
) -> None:
    burst = SeamBurst(nodes, seed=37)
    with reported_checks(burst) as server:  # a claim that records the start, or a confirm
        check(burst.run(operations=300), server)


def test_the_async_face_starts_no_form_on_a_check_sent_after_its_successor_returned(
    mongo_uri: str, mongo_db: Any
) -> None:
    async def run() -> tuple[BurstReport, ServerRecord]:
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
        try:
            with reported_checks(burst) as server:
                return await burst.run(operations=300), server
        finally:
            for node in nodes:
                await node.aclose(timeout=5)
            for client in clients:
                await client.close()

    check(*asyncio.run(run()))
