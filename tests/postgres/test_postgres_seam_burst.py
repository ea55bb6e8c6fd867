"""Bursts of replaces and cancels 10-30 ms apart on 3 ``PostgresScheduler`` nodes with idle
workers (CONTRACT section 15; :mod:`flowsched.testing.seam_burst`): every start follows a
confirm of its claim (``confirm_start``, which records the start and is serialised with a
cancel or replace by the row's lock), and no form starts on a confirm sent after its
successor - a replace, or a cancel that answered ``True`` - had returned. A form whose
handler was called after its successor returned (the confirm's answer was on its way) is
listed in ``history``: its start was recorded before the successor applied.
``bench/seam_burst.py`` runs larger bursts and prints the counts."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta

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
    """Tell ``burst`` of every confirm the nodes send (both faces)."""
    confirm_start = PostgresTimerStore.confirm_start
    confirm_start_async = AsyncPostgresTimerStore.confirm_start

    def reported(self: PostgresTimerStore, claims: Sequence[Claim]) -> list[Claim]:
        for claim in claims:
            burst.checked(claim.item.id, claim.item.generation)
        return confirm_start(self, claims)

    async def reported_async(self: AsyncPostgresTimerStore, claims: Sequence[Claim]) -> list[Claim]:
        for claim in claims:
            burst.checked(claim.item.id, claim.item.generation)
        return await confirm_start_async(self, claims)

    monkeypatch.setattr(PostgresTimerStore, "confirm_start", reported)
    monkeypatch.setattr(AsyncPostgresTimerStore, "confirm_start", reported_async)


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
    assert report.errors == [], report.describe()
    assert report.starts > 0 and report.checks > 0, report.describe()
    assert report.uncheck_started == [], report.describe()
    assert report.unchecked == [], report.describe()
    # A form that started after its successor returned had its start recorded first: its
    # confirm opened its attempt, and the successor's write waited for that row.
    assert report.unrecorded == [], report.describe()
    assert report.unfired == [], report.describe()  # and no last form was lost


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
