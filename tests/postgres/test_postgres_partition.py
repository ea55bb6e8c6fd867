"""The partition case of CONTRACT section 15 on PostgreSQL, through a TCP fault proxy: a
cancel is held past its caller's ``op_timeout`` (the caller is told ``OutcomeUnknown``),
another instance schedules the timer again, and the held cancel reaches the server at the
heal. It must apply nothing: the new form stays and fires.

Instance ``a`` reaches the server through the proxy, ``b`` directly; ``b`` starts firing
only once the server has read everything the partition held
(:meth:`~flowsched.testing.fault_proxy.FaultProxy.wait_delivered`). Each test records what
happened - how the cancel ended, whether the new form was still stored after the heal, what
fired - and compares it with the promise in one assertion."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched import (
    AsyncPostgresScheduler,
    OutcomeUnknown,
    PostgresScheduler,
    ScheduleItem,
    ScheduleKind,
)
from flowsched.testing.fault_proxy import FaultProxy, upstream_of

QUICK = timedelta(seconds=1)  # a's op_timeout
GRACE = 5.0  # seconds past op_timeout a call may take to give up (a liveness bound only)
TIMER = ScheduleKind.TIMER
PROMISE = {
    "cancel gave up": True,
    "cancel": "OutcomeUnknown",
    "new form after the heal": True,
    "fired": [{"form": "new"}],
}


def item(form: str, due_in: timedelta) -> ScheduleItem:
    return ScheduleItem("t", TIMER, datetime.now(UTC) + due_in, payload={"form": form})


def ending(call: Callable[[], object]) -> str:
    """How ``call`` ended: the error's name, or ``returned <value>``."""
    try:
        return f"returned {call()!r}"
    except Exception as exc:
        return type(exc).__name__


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[FaultProxy]:
    with FaultProxy(*upstream_of(postgres_url, 5432)) as running:
        yield running


def heal_and_deliver(proxy: FaultProxy) -> None:
    proxy.heal()
    assert proxy.wait_delivered(timeout=30), "the server did not read what the partition held"


def test_a_held_cancel_spares_the_form_scheduled_again_which_fires(
    postgres_url: str, fresh_table: Callable[[], str], proxy: FaultProxy
) -> None:
    table = fresh_table()
    a = PostgresScheduler(proxy.via(postgres_url), table=table, op_timeout=QUICK, listen=False)
    b = PostgresScheduler(postgres_url, table=table, poll_interval=timedelta(milliseconds=200))
    fired: list[Any] = []
    b.subscribe(TIMER, lambda got, attempt: fired.append(got.payload))
    seen: dict[str, Any] = {}
    cancel = lambda: a.cancel("t")  # noqa: E731
    try:
        a.schedule(item("old", timedelta(hours=1)))
        proxy.partition()
        cancelling = threading.Thread(target=lambda: seen.update(cancel=ending(cancel)))
        cancelling.start()
        cancelling.join(QUICK.total_seconds() + GRACE)  # held past op_timeout
        seen["cancel gave up"] = not cancelling.is_alive()
        newer = b.schedule(item("new", timedelta(milliseconds=500)))
        heal_and_deliver(proxy)
        cancelling.join(30)
        seen["new form after the heal"] = b.get("t") == newer
        b.start()
        deadline = time.monotonic() + (30 if seen["new form after the heal"] else 2)
        while not fired and time.monotonic() < deadline:
            time.sleep(0.05)
        seen["fired"] = fired
    finally:
        proxy.heal()  # a call still held ends now
        a.close()
        b.close()

    assert seen == PROMISE


def test_the_async_face_a_held_cancel_spares_the_form_scheduled_again_which_fires(
    postgres_url: str, fresh_table: Callable[[], str], proxy: FaultProxy
) -> None:
    table = fresh_table()

    async def run() -> dict[str, Any]:
        a = AsyncPostgresScheduler(
            proxy.via(postgres_url), table=table, op_timeout=QUICK, listen=False
        )
        b = AsyncPostgresScheduler(
            postgres_url, table=table, poll_interval=timedelta(milliseconds=200)
        )
        fired: list[Any] = []
        b.subscribe(TIMER, lambda got, attempt: fired.append(got.payload))
        seen: dict[str, Any] = {}

        async def cancel() -> None:
            try:
                seen["cancel"] = f"returned {await a.cancel('t')!r}"
            except Exception as exc:
                seen["cancel"] = type(exc).__name__

        try:
            await a.schedule(item("old", timedelta(hours=1)))
            proxy.partition()
            cancelling = asyncio.ensure_future(cancel())
            await asyncio.wait([cancelling], timeout=QUICK.total_seconds() + GRACE)
            seen["cancel gave up"] = cancelling.done()
            newer = await b.schedule(item("new", timedelta(milliseconds=500)))
            await asyncio.to_thread(heal_and_deliver, proxy)
            await asyncio.wait([cancelling], timeout=30)
            seen["new form after the heal"] = await b.get("t") == newer
            await b.start()
            deadline = time.monotonic() + (30 if seen["new form after the heal"] else 2)
            while not fired and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            seen["fired"] = fired
        finally:
            proxy.heal()
            await a.aclose(5)
            await b.aclose(5)
        return seen

    assert asyncio.run(run()) == PROMISE


def test_outcome_unknown_is_what_a_write_cut_after_sending_raises(
    postgres_url: str, fresh_table: Callable[[], str], proxy: FaultProxy
) -> None:
    # The error the partition case expects exists on PostgreSQL: a write whose reply is
    # lost (the proxy eats it and cuts the connection) says its outcome is unknown.
    with PostgresScheduler(
        proxy.via(postgres_url), table=fresh_table(), op_timeout=QUICK, listen=False
    ) as a:
        a.schedule(item("old", timedelta(hours=1)))
        proxy.lose()
        with pytest.raises(OutcomeUnknown, match="may or may not have taken effect"):
            a.cancel("t")
        proxy.lose(False)
        assert not a.exists("t")  # it had applied
