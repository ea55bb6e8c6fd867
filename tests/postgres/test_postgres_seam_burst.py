"""Bursts of replaces and cancels 10-30 ms apart on 3 ``PostgresScheduler`` nodes with idle
workers (CONTRACT section 15; :mod:`flowsched.testing.seam_burst`): every start follows a
confirm of its claim (``confirm_start``, or a claim that records the start, each serialised
with a cancel or replace by the row's lock), and no form starts on a confirm sent after its
successor - a replace, or a cancel that answered ``True`` - had returned. A form whose
handler was called after its successor returned (the confirm's answer was on its way) is
listed in ``history``: its start was recorded before the successor applied.
``bench/seam_burst.py`` runs larger bursts and prints the counts."""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

from flowsched import AsyncPostgresScheduler, HistoryPolicy, PostgresScheduler
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.store import PostgresTimerStore
from flowsched.store.records import Claim
from flowsched.testing.seam_burst import AsyncSeamBurst, BurstReport, SeamBurst

pytestmark = pytest.mark.slow


POLL = timedelta(milliseconds=200)
HISTORY = HistoryPolicy(limit=1000)  # every form's attempt stays listed


def report_confirms(monkeypatch: pytest.MonkeyPatch, burst: SeamBurst | AsyncSeamBurst) -> None:
    """Tell ``burst`` of every start the stores confirm, both faces: the claims a
    ``confirm_start`` - or a ``claim_started``, a claim that records the start, where the
    store has one - returned, as checked when that call was sent. A start whose claim no
    such call returned is one no check allowed."""
    for store in (PostgresTimerStore, AsyncPostgresTimerStore):
        for name in ("confirm_start", "claim_started"):
            if hasattr(store, name):
                monkeypatch.setattr(store, name, reporting(getattr(store, name), burst))


def reporting(call: Callable[..., Any], burst: SeamBurst | AsyncSeamBurst) -> Callable[..., Any]:
    def tell(sent: float, claims: Sequence[Claim]) -> None:
        for claim in claims:
            burst.checked(claim.item.id, claim.item.generation, sent)

    if inspect.iscoroutinefunction(call):

        async def reported_async(*args: Any, **kwargs: Any) -> Any:
            sent = time.monotonic()
            claims = await call(*args, **kwargs)
            tell(sent, claims)
            return claims

        return reported_async

    def reported(*args: Any, **kwargs: Any) -> Any:
        sent = time.monotonic()
        claims = call(*args, **kwargs)
        tell(sent, claims)
        return claims

    return reported


@pytest.fixture
def nodes(postgres_url: str, fresh_table: Callable[[], str]) -> Iterator[list[PostgresScheduler]]:
    table = fresh_table()
    built = [
        PostgresScheduler(
            postgres_url,
            table=table,
            node_id=f"burst-{k}-{uuid.uuid4().hex[:4]}",
            poll_interval=POLL,
            history=HISTORY,
        )
        for k in range(3)
    ]
    yield built
    for node in built:
        node.close()


def check(report: BurstReport) -> None:
    print(report.describe())
    report.assert_kept()


def test_no_form_starts_on_a_confirm_sent_after_its_successor_returned(
    nodes: list[PostgresScheduler], monkeypatch: pytest.MonkeyPatch
) -> None:
    burst = SeamBurst(nodes, seed=37)
    report_confirms(monkeypatch, burst)
    check(burst.run(operations=900))


def test_the_async_face_starts_no_form_on_a_confirm_sent_after_its_successor_returned(
    postgres_url: str, fresh_table: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    table = fresh_table()

    async def run() -> BurstReport:
        nodes = [
            AsyncPostgresScheduler(
                postgres_url,
                table=table,
                node_id=f"burst-{k}-{uuid.uuid4().hex[:4]}",
                poll_interval=POLL,
                history=HISTORY,
            )
            for k in range(3)
        ]
        burst = AsyncSeamBurst(nodes, seed=38)
        report_confirms(monkeypatch, burst)
        try:
            return await burst.run(operations=900)
        finally:
            for node in nodes:
                await node.aclose(5)

    check(asyncio.run(run()))
