"""The asyncio heartbeat (:class:`flowsched.node.heartbeats.AsyncBeats`) stops whenever it is
told to, even when its wait for the next beat ends in the same turn of the loop.

Python 3.11's ``asyncio.wait_for`` drops a cancel that arrives as the awaited thing
completes (cpython gh-86296): a heartbeat stopped right after a poke went on beating, and
``aclose()`` of an ``AsyncMongoScheduler`` waited for it forever (seen in CI on the wire
server; a loop of start and close hung at its 3rd close)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from flowsched.node.heartbeats import AsyncBeats

pytestmark = pytest.mark.asyncio


class Store:
    def __init__(self) -> None:
        self.beats = 0
        self.left: list[str] = []

    async def heartbeat(self, node: str, routes: frozenset[str], ttl: timedelta) -> None:
        self.beats += 1

    async def leave(self, node: str) -> None:
        self.left.append(node)


async def stops(beats: AsyncBeats, seconds: float = 5.0) -> bool:
    """Whether ``beats.stop()`` returns within ``seconds`` (a plain wait: a hung stop is
    left hanging and cancelled, not given a cancel it could swallow and so return)."""
    stopping = asyncio.ensure_future(beats.stop())
    await asyncio.wait({stopping}, timeout=seconds)
    if not stopping.done():
        stopping.cancel()
        return False
    stopping.result()
    return True


def started(store: Store) -> AsyncBeats:
    beats = AsyncBeats(store, "n1", lambda: frozenset({"h:a"}), timedelta(seconds=30))
    beats.start()
    return beats


async def test_a_heartbeat_poked_then_stopped_at_once_stops_and_leaves() -> None:
    store = Store()
    beats = started(store)
    for _ in range(3):
        await asyncio.sleep(0)
    assert store.beats == 1  # beat at start, now waiting for the next beat (or a poke)
    beats.poke()  # that wait ends in the loop's next turn, with the stop's cancel
    assert await stops(beats)
    assert store.left == ["n1"]


async def test_a_heartbeat_stopped_before_its_first_beat_stops_and_leaves() -> None:
    store = Store()
    beats = started(store)
    await beats.stop()
    assert store.left == ["n1"] and store.beats == 0


async def test_a_cancelled_stop_is_cancelled() -> None:
    store = Store()
    beats = started(store)
    await asyncio.sleep(0)
    stopping = asyncio.ensure_future(beats.stop())
    await asyncio.sleep(0)  # stop() waits for the beat task's end
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping


async def test_an_error_the_heartbeat_died_of_is_raised_by_stop() -> None:
    class Broken(Store):
        async def heartbeat(self, node: str, routes: frozenset[str], ttl: timedelta) -> None:
            raise RuntimeError("a bug in the store")

    beats = started(Broken())
    await asyncio.sleep(0.01)
    with pytest.raises(RuntimeError, match="a bug in the store"):  # not lost at the close
        await beats.stop()
