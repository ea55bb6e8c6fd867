"""python-statemachine's own ``timeout`` tests, ported to :func:`durable_timeout`.

Ported from fgmacedo/python-statemachine ``tests/test_contrib_timeout.py`` at commit
471fe175fd0b8387c7f8c2a65ecf486c730ab8a4. Changes, and only these: ``durable_timeout`` in
place of ``timeout`` (and its class and repr); every machine gets a ``StatechartTimers``
listener; the runner advances virtual time in place of sleeping (then waits for the invoke
threads or tasks the engine started, as upstream's sleep lets them run), on both engines: sync
on ``InMemoryScheduler``, async on ``AsyncInMemoryScheduler`` (the test kit's
``async_memory_scheduler``, ``await manual_clock.advance_async(...)``), both on the test kit's
``manual_clock``; the ``async def`` tests are marked ``@pytest.mark.asyncio`` (pytest-asyncio's
strict mode).
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from inspect import isawaitable
from typing import Any

import pytest

pytest.importorskip("statemachine")

from statemachine import State, StateChart

from flowsched import AsyncInMemoryScheduler, InMemoryScheduler, ManualClock
from flowsched.integrations.statemachine import (
    DurableTimeoutInvoke,
    StatechartTimers,
    durable_timeout,
)

timeout = durable_timeout
_Timeout = DurableTimeoutInvoke


class SMRunner:
    """Upstream's ``sm_runner``, with a scheduler and virtual time."""

    def __init__(self, scheduler: InMemoryScheduler | AsyncInMemoryScheduler, clock: ManualClock):
        self.is_async = isinstance(scheduler, AsyncInMemoryScheduler)
        self.clock = clock
        self.scheduler: Any = scheduler
        self.timers = StatechartTimers(self.scheduler, name="ported")
        self.count = 0

    async def start(self, cls: type, **kwargs: Any) -> Any:
        self.count += 1
        listeners = [*kwargs.pop("listeners", []), self.timers.listener(f"sm-{self.count}")]
        sm = cls(listeners=listeners, **kwargs)
        if self.is_async:
            result = sm.activate_initial_state()
            if isawaitable(result):
                await result
        return sm

    async def send(self, sm: Any, event: str, **kwargs: Any) -> Any:
        result = sm.send(event, **kwargs)
        if isawaitable(result):
            return await result
        return result

    async def processing_loop(self, sm: Any) -> Any:
        result = sm._processing_loop()
        if isawaitable(result):
            return await result
        return result

    async def sleep(self, seconds: float) -> None:
        delta = timedelta(seconds=seconds)
        if self.is_async:
            await asyncio.sleep(0)  # as a real sleep does, let the invoke tasks start first
            await self.clock.advance_async(delta)
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if others:
                await asyncio.wait(others, timeout=2)
        else:
            self.clock.advance(delta)
            for thread in threading.enumerate():
                if "_run_sync_handler" in thread.name:
                    thread.join(timeout=2)


@pytest.fixture(params=["sync", "async"])
def sm_runner(request: pytest.FixtureRequest, manual_clock: ManualClock) -> SMRunner:
    if request.param == "async":
        return SMRunner(request.getfixturevalue("async_memory_scheduler"), manual_clock)
    return SMRunner(request.getfixturevalue("memory_scheduler"), manual_clock)


class TestTimeoutValidation:
    def test_positive_duration(self) -> None:
        t = timeout(5)
        assert isinstance(t, _Timeout)
        assert t.duration == 5

    def test_zero_duration_raises(self) -> None:
        with pytest.raises(ValueError, match="must be positive"):
            timeout(0)

    def test_negative_duration_raises(self) -> None:
        with pytest.raises(ValueError, match="must be positive"):  # upstream's text
            timeout(-1)
        with pytest.raises(ValueError, match="must be positive"):
            timeout(timedelta(seconds=-1))

    def test_repr_without_on(self) -> None:
        assert repr(timeout(5)) == "durable_timeout(5)"

    def test_repr_with_on(self) -> None:
        assert repr(timeout(3.5, on="expired")) == "durable_timeout(3.5, on='expired')"


class TestTimeoutBasic:
    """Timeout fires done.invoke.<state> when no custom event is specified."""

    @pytest.mark.asyncio
    async def test_timeout_fires_done_invoke(self, sm_runner: SMRunner) -> None:
        class SM(StateChart):
            waiting = State(initial=True, invoke=timeout(0.05))
            done = State(final=True)
            done_invoke_waiting = waiting.to(done)

        sm = await sm_runner.start(SM)
        await sm_runner.sleep(0.15)
        await sm_runner.processing_loop(sm)
        assert "done" in sm.configuration_values

    @pytest.mark.asyncio
    async def test_timeout_cancelled_on_early_exit(self, sm_runner: SMRunner) -> None:
        """If the machine transitions out before the timeout, nothing fires."""

        class SM(StateChart):
            waiting = State(initial=True, invoke=timeout(10))
            other = State(final=True)
            go = waiting.to(other)
            # No done_invoke_waiting — would fail if timeout fired unexpectedly
            done_invoke_waiting = waiting.to(waiting)

        sm = await sm_runner.start(SM)
        await sm_runner.send(sm, "go")
        assert "other" in sm.configuration_values
        await sm_runner.sleep(20)  # added: the cancelled timer never fires
        assert "other" in sm.configuration_values


class TestTimeoutCustomEvent:
    """Timeout fires a custom event via the `on` parameter."""

    @pytest.mark.asyncio
    async def test_custom_event_fires(self, sm_runner: SMRunner) -> None:
        class SM(StateChart):
            waiting = State(initial=True, invoke=timeout(0.05, on="expired"))
            timed_out = State(final=True)
            expired = waiting.to(timed_out)

        sm = await sm_runner.start(SM)
        await sm_runner.sleep(0.15)
        await sm_runner.processing_loop(sm)
        assert "timed_out" in sm.configuration_values

    @pytest.mark.asyncio
    async def test_custom_event_cancelled_on_early_exit(self, sm_runner: SMRunner) -> None:
        class SM(StateChart):
            waiting = State(initial=True, invoke=timeout(10, on="expired"))
            other = State(final=True)
            go = waiting.to(other)
            expired = waiting.to(waiting)

        sm = await sm_runner.start(SM)
        await sm_runner.send(sm, "go")
        assert "other" in sm.configuration_values


class TestTimeoutComposition:
    """Timeout combined with other invoke handlers — first to complete wins."""

    @pytest.mark.asyncio
    async def test_invoke_completes_before_timeout(self, sm_runner: SMRunner) -> None:
        """A fast invoke handler transitions out, cancelling the timeout."""

        def fast_handler() -> str:
            return "fast_result"

        class SM(StateChart):
            loading = State(initial=True, invoke=[fast_handler, timeout(10, on="too_slow")])
            ready = State(final=True)
            stuck = State(final=True)
            done_invoke_loading = loading.to(ready)
            too_slow = loading.to(stuck)

        sm = await sm_runner.start(SM)
        await sm_runner.sleep(0.15)
        await sm_runner.processing_loop(sm)
        assert "ready" in sm.configuration_values

    @pytest.mark.asyncio
    async def test_timeout_fires_before_slow_invoke(self, sm_runner: SMRunner) -> None:
        """Timeout fires while a slow invoke handler is still running."""
        handler_cancelled = threading.Event()

        class SlowHandler:
            def run(self, ctx: Any) -> None:
                # Wait until cancelled (state exit) — simulates long-running work
                ctx.cancelled.wait()
                handler_cancelled.set()

        class SM(StateChart):
            loading = State(initial=True, invoke=[SlowHandler(), timeout(0.05, on="too_slow")])
            ready = State(final=True)
            stuck = State(final=True)
            done_invoke_loading = loading.to(ready)
            too_slow = loading.to(stuck)

        sm = await sm_runner.start(SM)
        await sm_runner.sleep(0.15)
        await sm_runner.processing_loop(sm)
        assert "stuck" in sm.configuration_values
        # The slow handler should have been cancelled when the state exited
        handler_cancelled.wait(timeout=2)
        assert handler_cancelled.is_set()
