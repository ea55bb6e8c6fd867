"""transitions' asyncio ``Timeout`` tests, ported to :class:`AsyncDurableMachine`.

Ported from pytransitions/transitions ``tests/test_async.py`` at commit
bd42b38f3627e6bca7274fb4d9af2e105f75da7c (``test_async_timeout``, ``test_timeout_cancel``,
``test_queued_timeout_cancel``). Changes, and only these: ``DurableTimeout`` (through
``AsyncDurableMachine``, with ``scheduler=`` and ``name=``) in place of ``AsyncTimeout``;
virtual time in place of the test's own sleeps (``await manual_clock.advance_async(...)``);
where upstream relies on the timeout firing *while* a trigger is awaited, the trigger runs as
a task and an ``asyncio.Event`` says when its callback has started waiting, then time is
advanced; the test's ``run()`` is awaited on pytest-asyncio's loop (the scheduler's) instead
of ``asyncio.run``.

The scheduler is the real ``AsyncInMemoryScheduler`` (the test kit's
``async_memory_scheduler``, on its ``manual_clock``).
"""

from __future__ import annotations

import asyncio
from asyncio import CancelledError
from datetime import timedelta
from typing import Any
from unittest.mock import MagicMock

import pytest
from transitions.extensions.states import add_state_features

from flowsched import AsyncInMemoryScheduler, ManualClock
from flowsched.integrations.transitions import AsyncDurableMachine, DurableTimeout


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


@pytest.mark.asyncio
async def test_async_timeout(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    timeout_called = MagicMock()

    @add_state_features(DurableTimeout)
    class TimeoutMachine(AsyncDurableMachine):
        pass

    states = [
        "A",
        {"name": "B", "timeout": 0.2, "on_timeout": ["to_C", timeout_called]},
        {"name": "C", "timeout": 0, "on_timeout": "to_D"},
        "D",
    ]
    m: Any = TimeoutMachine(
        states=states, initial="A", scheduler=async_memory_scheduler, name="async"
    )
    with pytest.raises(AttributeError):
        m.add_state("Fail", timeout=1)

    async def run() -> None:
        await m.to_B()
        await manual_clock.advance_async(seconds(0.1))
        assert m.is_B()  # timeout shouldn't be triggered
        await m.to_A()  # cancel timeout
        assert m.is_A()
        await m.to_B()
        await manual_clock.advance_async(seconds(0.3))
        assert m.is_C()  # now timeout should have been processed
        assert timeout_called.called
        m.get_state("C").timeout = 0.05
        await m.to_B()
        await manual_clock.advance_async(seconds(0.3))
        assert m.is_D()
        assert timeout_called.call_count == 2

    await run()


@pytest.mark.asyncio
async def test_timeout_cancel(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    error_mock = MagicMock()
    timout_mock = MagicMock()
    long_op_mock = MagicMock()
    waiting = asyncio.Event()

    @add_state_features(DurableTimeout)
    class TimeoutMachine(AsyncDurableMachine):
        async def on_enter_B(self) -> None:
            waiting.set()
            await asyncio.sleep(0.2)
            long_op_mock()  # should never be called

        async def handle_timeout(self) -> None:
            timout_mock()
            await self.to_A()

    machine: Any = TimeoutMachine(
        states=["A", {"name": "B", "timeout": 0.1, "on_timeout": "handle_timeout"}],
        initial="A",
        on_exception=error_mock,
        scheduler=async_memory_scheduler,
        name="cancel",
    )

    async def run() -> None:
        trigger = asyncio.create_task(machine.to_B())
        await waiting.wait()
        await manual_clock.advance_async(seconds(0.1))
        await trigger
        assert timout_mock.called
        assert error_mock.call_count == 1  # should only be one CancelledError
        assert not long_op_mock.called
        assert machine.is_A()

    await run()


@pytest.mark.asyncio
async def test_queued_timeout_cancel(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    error_mock = MagicMock()
    timout_mock = MagicMock()
    long_op_mock = MagicMock()
    waiting = asyncio.Event()

    @add_state_features(DurableTimeout)
    class TimeoutMachine(AsyncDurableMachine):
        async def long_op(self, event_data: Any) -> None:
            await self.to_C()
            await self.to_D()
            await self.to_E()
            waiting.set()
            await asyncio.sleep(1)
            long_op_mock()

        async def handle_timeout(self, event_data: Any) -> None:
            timout_mock()
            raise TimeoutError()

        async def handle_error(self, event_data: Any) -> None:
            if isinstance(event_data.error, CancelledError):
                if error_mock.called:
                    raise RuntimeError()
                error_mock()
            raise event_data.error

    machine: Any = TimeoutMachine(
        states=[
            "A",
            "C",
            "D",
            "E",
            {"name": "B", "timeout": 0.1, "on_timeout": "handle_timeout", "on_enter": "long_op"},
        ],
        initial="A",
        queued=True,
        send_event=True,
        on_exception="handle_error",
        scheduler=async_memory_scheduler,
        name="queued",
    )

    async def to_b_while_time_passes() -> None:
        waiting.clear()
        trigger = asyncio.create_task(machine.to_B())
        await waiting.wait()
        await manual_clock.advance_async(seconds(0.1))
        await trigger

    async def run() -> None:
        await to_b_while_time_passes()
        assert timout_mock.called
        assert error_mock.called
        assert not long_op_mock.called
        assert machine.is_B()
        with pytest.raises(RuntimeError):
            await to_b_while_time_passes()

    await run()
