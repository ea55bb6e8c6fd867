"""Internal: ``AsyncDurableMachine``, the ``AsyncMachine`` face of
:mod:`flowsched.integrations.transitions` (import it from there).

It runs on the async schedulers (``AsyncInMemoryScheduler``, ``AsyncMongoScheduler``):
``await scheduler.create_single_timer(...)`` on entering a timed state, ``await
scheduler.cancel(...)`` on leaving it, and an ``async def`` handler, registered with the
plain ``register`` call, that awaits the ``on_timeout`` callbacks as transitions'
``AsyncTimeout`` does (a new ``AsyncEventData``, no trigger arguments, outside any running
transition's context).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from transitions.extensions.asyncio import AsyncEventData, AsyncMachine
from transitions.extensions.states import add_state_features

from flowsched import ScheduleItem
from flowsched.integrations._binding import FIRING, run_steps_async
from flowsched.integrations._transitions_core import (
    DurableTimeout,
    MachineFace,
)

__all__ = ["AsyncDurableMachine"]

log = logging.getLogger("flowsched.integrations.transitions")


@add_state_features(DurableTimeout)
class AsyncDurableMachine(MachineFace, AsyncMachine):
    """A ``transitions.extensions.asyncio.AsyncMachine`` with durable ``timeout`` states, on
    an async flowsched scheduler. Same arguments as
    :class:`~flowsched.integrations.transitions.DurableMachine`; ``load_model`` may be an
    ``async def``. Triggers are awaited as usual (``await model.to_waiting()``)."""

    _async = True

    async def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        calls = {"load": self._load, "get": self._flowsched.scheduler.get}
        calls["fire"] = self._process_timeout
        await run_steps_async(self._flowsched.timeout_steps(item, AsyncMachine), calls)

    async def _load(self, owner: str, found_only: bool) -> Any:
        """As ``DurableMachine._load``; ``load_model`` may be an ``async def``."""
        load = self._flowsched.load_model
        if load is None:
            raise self._flowsched.missing(owner)
        try:
            found = load(owner)
            return await found if inspect.isawaitable(found) else found
        except Exception as exc:
            return self._missed(owner, exc, found_only)

    async def _process_timeout(self, state: DurableTimeout, model: Any, owner: str) -> None:
        binding = self._flowsched
        event_data = AsyncEventData(
            state, self._create_event("timeout", self), self, model, args=(), kwargs={}
        )
        context = AsyncMachine.current_context.set(None)
        reset = FIRING.set((id(binding), owner, state.name))
        try:
            await self.callbacks(state.on_timeout, event_data)
        except Exception as err:
            if not self.on_exception:
                raise  # redelivered with the scheduler's backoff
            event_data.error = err
            try:
                await self.callbacks(self.on_exception, event_data)
            except BaseException as err2:
                # As transitions' AsyncTimeout: the error handler failed too, so the
                # model's running transitions are cancelled (and the timer is done).
                log.error(
                    "%shandling timeout exception %r caused another exception: %r; cancelling "
                    "running transitions",
                    self.name,
                    err,
                    err2,
                )
                await self.cancel_running_transitions(model)
        finally:
            FIRING.reset(reset)
            AsyncMachine.current_context.reset(context)
        binding.fired(owner, state.name)
        log.debug("%stimeout of %s in state %s processed", self.name, owner, state.name)
