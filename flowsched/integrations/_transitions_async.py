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
from collections.abc import Callable
from typing import Any

from transitions.extensions.asyncio import AsyncEventData, AsyncMachine
from transitions.extensions.states import add_state_features

from flowsched import ScheduleItem, SchedulingConfig
from flowsched.integrations._binding import FIRING, check_loaded, is_lookup_miss
from flowsched.integrations._transitions_core import (
    DurableTimeout,
    ModelIndex,
    bind,
    register_handler,
)

__all__ = ["AsyncDurableMachine"]

log = logging.getLogger("flowsched.integrations.transitions")


@add_state_features(DurableTimeout)
class AsyncDurableMachine(ModelIndex, AsyncMachine):
    """A ``transitions.extensions.asyncio.AsyncMachine`` with durable ``timeout`` states, on
    an async flowsched scheduler. Same arguments as
    :class:`~flowsched.integrations.transitions.DurableMachine`; ``load_model`` may be an
    ``async def``. Triggers are awaited as usual (``await model.to_waiting()``)."""

    def __init__(
        self,
        *args: Any,
        scheduler: Any,
        name: str,
        config: SchedulingConfig | None = None,
        load_model: Callable[[str], Any] | None = None,
        model_id: str = "id",
        **kwargs: Any,
    ) -> None:
        self._flowsched = bind(self, scheduler, name, config, load_model, model_id, True)
        kwargs["name"] = name
        super().__init__(*args, **kwargs)
        register_handler(self._flowsched, self._on_timer)

    async def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        binding = self._flowsched
        owner, state_name, token, state = binding.target(item)
        model, borrowed, indexed = binding.models.get(owner), False, True
        if model is None:
            model = await self._load(owner)
            borrowed = model not in self.models
        elif binding.load_model is not None and not await self._current(
            item, model, owner, state_name, token
        ):
            # As DurableMachine: the stored model tells when this copy disagrees.
            fresh = await self._load(owner, found_only=True)
            if fresh is not None and fresh is not model:
                model, borrowed, indexed = fresh, True, False
        if borrowed:
            initial = binding.borrow_state(model, owner)
            if indexed:
                self.add_model(model, initial=initial)
            else:
                AsyncMachine.add_model(self, model, initial=initial)
        try:
            if await self._current(item, model, owner, state_name, token, local=not borrowed):
                await self._process_timeout(state, model, owner)
        finally:
            if borrowed:
                if indexed:
                    self.remove_model(model)
                else:
                    AsyncMachine.remove_model(self, model)

    async def _load(self, owner: str, *, found_only: bool = False) -> Any:
        binding = self._flowsched
        if binding.load_model is None:
            raise binding.missing(owner)
        try:
            found = binding.load_model(owner)
            if inspect.isawaitable(found):
                found = await found
        except Exception as exc:
            if is_lookup_miss(exc):
                if found_only:
                    return None
                raise binding.missing(owner, exc) from exc
            raise
        return found if found_only else check_loaded(binding, owner, found)

    async def _current(
        self,
        item: ScheduleItem,
        model: Any,
        owner: str,
        state: str,
        token: str,
        *,
        local: bool = True,
    ) -> bool:
        binding = self._flowsched
        if not binding.in_state(model, state):
            return False
        known = binding.known_entry(owner, state) if local else None
        if known == token:
            return True
        # Entered in another process (or before a restart), or entered again since this
        # process armed it - here (a delivery that raced the new entry: stale) or in another
        # process (current): the scheduler's stored timer tells.
        current = await binding.scheduler.get(item.id)
        return current is not None and (current.payload or {}).get("entry") == token

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

    def as_flow(self) -> Any:
        """This machine's states as a ``flowsched.Flow`` (see ``DurableMachine.as_flow``)."""
        from flowsched.integrations._flows import machine_flow

        return machine_flow(self._flowsched.name, list(self.states))
