"""Durable timeouts for python-statemachine 3.x (extra ``flowsched[statemachine]``).

:func:`durable_timeout` is a drop-in for ``statemachine.contrib.timeout.timeout``: same
arguments, same events (``done.invoke.<state>``, or the event named by ``on``), but the wait
is a flowsched timer, not a thread blocked on an ``Event``. :class:`StatechartTimers` binds
it to a scheduler; each machine gets its listener::

    from flowsched.integrations.statemachine import StatechartTimers, durable_timeout

    class Request(StateChart):
        requesting = State(initial=True, invoke=durable_timeout(30, on="request_timeout"))
        timed_out = State(final=True)
        request_timeout = requesting.to(timed_out)

    timers = StatechartTimers(scheduler, name="Request", config=config,
                              load_machine=requests.get)
    machine = Request(listeners=[timers.listener("req-1")])

Entering a state with a ``durable_timeout`` arms timer ``"<name>:<machine id>:<state id>"``
(addressed to the handler ``<name>``; ``<name>.<state id>.Any.timeout-duration`` in
``config`` overrides the duration, with ``Any`` precedence); leaving the state cancels it. A
timer that fires for a machine no longer in that entry of that state sends nothing. A timer
for a machine neither seen by this process nor found by ``load_machine`` (``None`` or
``LookupError``) is a dead letter saying so. With an async scheduler the listener is async,
so the machine runs on python-statemachine's async engine.

The sync engine still starts its invoke thread for a ``durable_timeout`` state, as for any
invoke; that thread returns at once (it marks the invocation done without an event), so no
thread waits for the timeout.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

try:
    import statemachine as _statemachine  # noqa: F401  (the extra this module is for)
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "flowsched.integrations.statemachine needs python-statemachine 3.x: "
        "pip install 'flowsched[statemachine]'"
    ) from exc

from flowsched import ScheduleItem, SchedulingConfig, Undeliverable
from flowsched.integrations._binding import FIRING
from flowsched.integrations._timers import (
    EntryTokens,
    TimerAddress,
    check_scheduler_face,
    configured_timeout,
    is_async_scheduler,
    missing,
    timeout_delta,
)

__all__ = ["DurableTimeoutInvoke", "StatechartTimers", "durable_timeout"]

log = logging.getLogger("flowsched.integrations.statemachine")


class DurableTimeoutInvoke:
    """The invoke handler :func:`durable_timeout` returns; armed by a
    :class:`StatechartTimers` listener, not by its own thread."""

    def __init__(self, duration: float | str | timedelta, on: str | None = None) -> None:
        delta = timeout_delta(duration, "durable_timeout")
        if delta is None:
            raise ValueError(f"timeout duration must be positive, got {duration}")
        if on is not None and (not isinstance(on, str) or not on):
            raise ValueError(f"durable_timeout on= must be an event name (got {on!r})")
        self.duration = duration
        self.delta = delta
        self.on = on

    def event(self, state_id: str) -> str:
        """The event sent when the timeout expires."""
        return self.on if self.on is not None else f"done.invoke.{state_id}"

    def run(self, ctx: Any) -> None:
        """Mark the invocation finished without a ``done.invoke`` event: the flowsched timer
        sends the event when the time comes. Refused (an ``error.execution``) when no
        :class:`StatechartTimers` listener observes the machine."""
        if not any(isinstance(x, _Listener) for x in getattr(ctx.machine, "active_listeners", ())):
            raise TypeError(
                f"state {ctx.state_id!r} has a durable_timeout but machine "
                f"{type(ctx.machine).__name__} has no StatechartTimers listener: build it with "
                "listeners=[timers.listener(machine_id)]"
            )
        ctx.cancelled.set()

    def __repr__(self) -> str:
        args = f"{self.duration!r}" if isinstance(self.duration, str) else f"{self.duration}"
        if self.on is not None:
            args += f", on={self.on!r}"
        return f"durable_timeout({args})"


def durable_timeout(
    duration: float | str | timedelta, *, on: str | None = None
) -> DurableTimeoutInvoke:
    """A durable ``timeout(duration, on=None)`` for ``State(invoke=...)``.

    ``duration``: seconds (a number, as upstream), or a HOCON duration string (``"30s"``).
    ``on``: the event to send when it expires (default ``done.invoke.<state>``).
    ``ValueError`` if the duration is not positive."""
    return DurableTimeoutInvoke(duration, on)


def _timeout_of(state: Any) -> DurableTimeoutInvoke | None:
    for spec in getattr(state, "invoke", ()):
        handler = getattr(getattr(spec, "func", None), "_invoke_handler", None)
        if isinstance(handler, DurableTimeoutInvoke):
            return handler
    return None


class StatechartTimers:
    """Durable timeouts for the machines of one kind, on one scheduler.

    ``name`` is the handler name of the timers and the flow part of their config keys;
    ``config`` a ``SchedulingConfig``; ``load_machine`` a callable (or ``async def``) from a
    machine id to the machine, for timers that fire in a process that has not seen it. The
    handler is registered on ``scheduler`` here: one ``StatechartTimers`` per name and
    scheduler. A synchronous scheduler gives synchronous listeners; an async one (CONTRACT
    section 11) gives async listeners."""

    def __init__(
        self,
        scheduler: Any,
        *,
        name: str,
        config: SchedulingConfig | None = None,
        load_machine: Callable[[str], Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string (got {name!r})")
        if config is not None and not isinstance(config, SchedulingConfig):
            raise TypeError(f"config must be a SchedulingConfig (got {type(config).__name__})")
        if load_machine is not None and not callable(load_machine):
            raise TypeError(f"load_machine must be a callable (got {load_machine!r})")
        self.is_async = is_async_scheduler(scheduler)
        check_scheduler_face(scheduler, self.is_async, "StatechartTimers", "StatechartTimers")
        self.scheduler = scheduler
        self.name = name
        self.config = config
        self.load_machine = load_machine
        self._address = TimerAddress(name)
        self._tokens = EntryTokens()
        self._machines: dict[str, Any] = {}
        self._entries: dict[str, dict[str, str]] = {}
        handler = self._on_timer_async if self.is_async else self._on_timer
        try:
            scheduler.register(name, handler)
        except ValueError as exc:
            raise ValueError(f"StatechartTimers name {name!r}: {exc}") from None

    def listener(self, machine_id: str) -> Any:
        """The listener for the machine ``machine_id``: ``listeners=[timers.listener(id)]``."""
        if not isinstance(machine_id, str) or not machine_id:
            raise ValueError(f"machine_id must be a non-empty string (got {machine_id!r})")
        cls = _AsyncListener if self.is_async else _SyncListener
        return cls(self, machine_id)

    # -- entering and leaving (called by the listeners) --------------------------------

    def delay(self, state: Any) -> timedelta | None:
        """A state's timeout: its config key if set, else its ``durable_timeout``'s."""
        declared = _timeout_of(state)
        if declared is None:
            return None
        configured = configured_timeout(self.config, self.name, state.id)
        return declared.delta if configured is None else configured

    def arm(self, machine_id: str, machine: Any, state: Any) -> tuple[str, timedelta, Any] | None:
        """``(timer id, delay, payload)`` entering ``state`` schedules, or ``None``."""
        self._machines[machine_id] = machine
        delay = self.delay(state)
        if delay is None:
            return None
        token = self._tokens.next()
        self._entries.setdefault(state.id, {})[machine_id] = token
        payload = self._address.payload(machine_id, state.id, token)
        return self._address.timer_id(machine_id, state.id), delay, payload

    def leave(self, machine_id: str, state: Any) -> str | None:
        """The timer id leaving ``state`` cancels, or ``None``."""
        waiting = self._entries.get(state.id)
        if waiting is not None:
            waiting.pop(machine_id, None)
        if FIRING.get() == (id(self), machine_id, state.id) or _timeout_of(state) is None:
            return None
        return self._address.timer_id(machine_id, state.id)

    # -- firing --------------------------------------------------------------------------

    def _found(self, machine_id: str, machine: Any) -> Any:
        if machine is None:
            how = "load_machine returned None" if self.load_machine else "no load_machine"
            raise missing(machine_id, self.name, how)
        return machine

    def _state(self, machine: Any, state_id: str, item: ScheduleItem) -> Any:
        for state in machine.states:
            if state.id == state_id:
                return state
        raise Undeliverable(
            f"machine {self.name!r} ({type(machine).__name__}) has no state {state_id!r} "
            f"(timer {item.id!r})"
        )

    def _current(self, machine: Any, machine_id: str, state_id: str, token: str) -> bool | None:
        """``False``: the machine is not in that state, or in another entry of it; ``True``:
        in the entry this process armed; ``None``: in the state, entry armed elsewhere (the
        scheduler's stored timer tells)."""
        if not any(state.id == state_id for state in machine.configuration):
            return False
        waiting = self._entries.get(state_id)
        known = None if waiting is None else waiting.get(machine_id)
        return None if known is None else known == token

    def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        machine_id, state_id, token = self._address.read(item.payload, item.id)
        machine = self._machines.get(machine_id)
        if machine is None:
            machine = self._found(machine_id, self._load(machine_id))
        state = self._state(machine, state_id, item)
        current = self._current(machine, machine_id, state_id, token)
        if current is None:
            stored = self.scheduler.get(item.id)
            current = stored is not None and (stored.payload or {}).get("entry") == token
        if not current:
            return
        reset = FIRING.set((id(self), machine_id, state_id))
        try:
            machine.send(self._event(state))
        finally:
            FIRING.reset(reset)
        self._fired(machine_id, state_id)

    async def _on_timer_async(self, item: ScheduleItem, attempt: int) -> None:
        machine_id, state_id, token = self._address.read(item.payload, item.id)
        machine = self._machines.get(machine_id)
        if machine is None:
            machine = self._found(machine_id, await self._load_async(machine_id))
        state = self._state(machine, state_id, item)
        current = self._current(machine, machine_id, state_id, token)
        if current is None:
            stored = await self.scheduler.get(item.id)
            current = stored is not None and (stored.payload or {}).get("entry") == token
        if not current:
            return
        reset = FIRING.set((id(self), machine_id, state_id))
        try:
            sent = machine.send(self._event(state))
            if inspect.isawaitable(sent):
                await sent
        finally:
            FIRING.reset(reset)
        self._fired(machine_id, state_id)

    def _load(self, machine_id: str) -> Any:
        if self.load_machine is None:
            return None
        try:
            return self.load_machine(machine_id)
        except LookupError as exc:
            how = f"load_machine raised {type(exc).__name__}: {exc}"
            raise missing(machine_id, self.name, how) from exc

    async def _load_async(self, machine_id: str) -> Any:
        """As :meth:`_load`, awaiting an ``async def`` ``load_machine`` (a ``LookupError`` it
        raises when awaited is a missing machine too)."""
        try:
            loaded = self._load(machine_id)
            if inspect.isawaitable(loaded):
                loaded = await loaded
        except LookupError as exc:
            how = f"load_machine raised {type(exc).__name__}: {exc}"
            raise missing(machine_id, self.name, how) from exc
        return loaded

    @staticmethod
    def _event(state: Any) -> str:
        handler = _timeout_of(state)
        assert handler is not None  # a timer is only armed for such a state
        return handler.event(state.id)

    def _fired(self, machine_id: str, state_id: str) -> None:
        waiting = self._entries.get(state_id)
        if waiting is not None:
            waiting.pop(machine_id, None)

    def as_flow(self, machine_class: type) -> Any:
        """``machine_class``'s states as a ``flowsched.Flow`` named ``name`` (no actions),
        for ``flowsched check CONF --flows MODULE:ATTR``."""
        from flowsched.integrations._flows import machine_flow

        return machine_flow(self.name, [s.id for s in machine_class.states])  # type: ignore[attr-defined]


class _Listener:
    """A machine's listener: arms and cancels its durable timeouts."""

    def __init__(self, timers: StatechartTimers, machine_id: str) -> None:
        self.timers = timers
        self.machine_id = machine_id

    def __repr__(self) -> str:
        return f"StatechartTimers({self.timers.name!r}).listener({self.machine_id!r})"


class _SyncListener(_Listener):
    def on_enter_state(self, target: Any, machine: Any) -> None:
        arm = self.timers.arm(self.machine_id, machine, target)
        if arm is not None:
            timer_id, delay, payload = arm
            self.timers.scheduler.create_single_timer(timer_id, delay, self.timers.name, payload)

    def on_exit_state(self, source: Any) -> None:
        timer_id = self.timers.leave(self.machine_id, source)
        if timer_id is not None:
            self.timers.scheduler.cancel(timer_id)


class _AsyncListener(_Listener):
    async def on_enter_state(self, target: Any, machine: Any) -> None:
        arm = self.timers.arm(self.machine_id, machine, target)
        if arm is not None:
            timer_id, delay, payload = arm
            await self.timers.scheduler.create_single_timer(
                timer_id, delay, self.timers.name, payload
            )

    async def on_exit_state(self, source: Any) -> None:
        timer_id = self.timers.leave(self.machine_id, source)
        if timer_id is not None:
            await self.timers.scheduler.cancel(timer_id)
