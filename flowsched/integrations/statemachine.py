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
(``%``, ``:`` and ``#`` in a part escaped as ``%25``, ``%3A``, ``%23``; ``"…#2"``, ``"…#3"``
for a state's further timeouts; addressed to the handler ``<name>``;
``<name>.<state id>.Any.timeout-duration`` in ``config`` overrides the duration of each, with
``Any`` precedence); leaving the state cancels them. States nested in compound and parallel
states count alike. A timer that fires for a machine no longer in that entry of that state
sends nothing; when the copy of the machine this process holds says so and ``load_machine``
is given, the stored machine decides (another process may have moved it on). A timer for a
machine neither armed in this process nor found by ``load_machine`` (``None`` or
``LookupError``) is a dead letter saying so. A machine is held here only while one of its
timeouts is armed. With an async scheduler the listener is async,
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
from flowsched.integrations._binding import FIRING, Steps, run_steps, run_steps_async
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
        # Zero and negative durations say what upstream's timeout() says ("must be
        # positive"), so its ported tests pass on the text.
        negative = (
            isinstance(duration, int | float) and not isinstance(duration, bool) and duration < 0
        ) or (isinstance(duration, timedelta) and duration < timedelta(0))
        delta = None if negative else timeout_delta(duration, "durable_timeout")
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


def _timeouts_of(state: Any) -> list[DurableTimeoutInvoke]:
    """The state's durable timeouts, in the order given (``invoke=[...]`` may hold several:
    a warning, then a failure)."""
    found: list[DurableTimeoutInvoke] = []
    for spec in getattr(state, "invoke", ()):
        handler = getattr(getattr(spec, "func", None), "_invoke_handler", None)
        if isinstance(handler, DurableTimeoutInvoke):
            found.append(handler)
    return found


def _states(machine: Any) -> list[Any]:
    """Every state of a machine (or machine class), nested ones included (``states`` lists
    only the top level of a statechart)."""
    states_map = getattr(machine, "states_map", None)
    return list(states_map.values()) if states_map else list(machine.states)


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
        # The machines with a timeout armed in this process, and per machine the entry token
        # of each armed timer: kept only while armed (a finished machine is not held), so a
        # timer still waiting keeps its machine alive, as the upstream timeout's thread does.
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

    def delays(self, state: Any) -> list[timedelta]:
        """A state's timeouts: each its ``durable_timeout``'s duration, or the state's config
        key if set (``Any`` action: it sets every timeout of the state)."""
        declared = _timeouts_of(state)
        if not declared:
            return []
        configured = configured_timeout(self.config, self.name, state.id)
        if configured is not None and configured <= timedelta(0):
            return []  # 0s in the config: no timeout (as timeout: 0 in transitions)
        return [d.delta if configured is None else configured for d in declared]

    def delay(self, state: Any) -> timedelta | None:
        """A state's (first) timeout: its config key if set, else its ``durable_timeout``'s."""
        delays = self.delays(state)
        return delays[0] if delays else None

    def timer_id(self, machine_id: str, state_id: str, index: int) -> str:
        """``"<name>:<machine id>:<state id>"``, and ``"…#<n>"`` for the n-th (from 2)
        ``durable_timeout`` of one state."""
        base = self._address.timer_id(machine_id, state_id)
        return base if index == 0 else f"{base}#{index + 1}"

    def arm(self, machine_id: str, machine: Any, state: Any) -> list[tuple[str, timedelta, Any]]:
        """``(timer id, delay, payload)`` of each timer entering ``state`` schedules. An
        internal transition enters without leaving: as upstream, a timeout still waiting goes
        on (not re-armed), one that has fired (the one firing now) starts again. Only the copy
        of the machine that armed it keeps a waiting timeout so: another copy of the same
        machine id entering the state (built again from storage, in this process or after
        another process moved it on) arms it anew and becomes the copy held here."""
        armed = []
        # The entries of another copy say nothing of this one's state.
        held = self._machines.get(machine_id) is machine
        entries = self._entries.get(machine_id, {}) if held else {}
        firing = FIRING.get()
        for index, delay in enumerate(self.delays(state)):
            timer_id = self.timer_id(machine_id, state.id, index)
            if timer_id in entries and firing != (id(self), machine_id, timer_id):
                continue
            token = self._tokens.next()
            self._entries.setdefault(machine_id, {})[timer_id] = token
            payload = self._address.payload(machine_id, state.id, token)
            if index:
                payload["timeout"] = index
            armed.append((timer_id, delay, payload))
        if armed:
            self._machines[machine_id] = machine
        return armed

    def leave(self, machine_id: str, state: Any) -> list[str]:
        """The timer ids leaving ``state`` cancels (not the one whose delivery is leaving it:
        that delivery completes it)."""
        firing = FIRING.get()
        cancel = []
        for index in range(len(_timeouts_of(state))):
            timer_id = self.timer_id(machine_id, state.id, index)
            self._forget(machine_id, timer_id)
            if firing != (id(self), machine_id, timer_id):
                cancel.append(timer_id)
        return cancel

    def _forget(self, machine_id: str, timer_id: str, token: str | None = None) -> None:
        """Drop the entry of ``timer_id`` (only if it is still ``token``'s, when given: the
        delivery of a timeout whose event entered the state again leaves the new entry)."""
        entries = self._entries.get(machine_id)
        if entries is not None and (token is None or entries.get(timer_id) == token):
            entries.pop(timer_id, None)
            if not entries:
                del self._entries[machine_id]
                self._machines.pop(machine_id, None)

    # -- firing --------------------------------------------------------------------------

    def _state(self, machine: Any, state_id: str, item: ScheduleItem) -> Any:
        for state in _states(machine):
            if state.id == state_id:
                return state
        raise Undeliverable(
            f"machine {self.name!r} ({type(machine).__name__}) has no state {state_id!r} "
            f"(timer {item.id!r})"
        )

    def _current(
        self, machine: Any, machine_id: str, state_id: str, item: ScheduleItem, token: str
    ) -> bool | None:
        """``False``: the machine is not in that state; ``True``: in the entry this process
        armed; ``None``: in the state, entry armed elsewhere or entered again since (the
        scheduler's stored timer tells: a delivery that raced a new entry here is stale, one
        whose entry another process made is current)."""
        if not any(state.id == state_id for state in machine.configuration):
            return False
        if self._machines.get(machine_id) is not machine:
            return None  # not the copy this process armed: its entries are not this one's
        known = self._entries.get(machine_id, {}).get(item.id)
        return True if known == token else None

    @staticmethod
    def _stored_entry(stored: ScheduleItem | None, token: str) -> bool:
        return stored is not None and (stored.payload or {}).get("entry") == token

    def _target(self, item: ScheduleItem) -> tuple[str, str, str, int]:
        """``(machine id, state id, entry token, which timeout of the state)`` of a timer."""
        machine_id, state_id, token = self._address.read(item.payload, item.id)
        index = (item.payload or {}).get("timeout", 0)
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise Undeliverable(f"timer {item.id!r}: payload {item.payload!r} has a bad index")
        return machine_id, state_id, token, index

    def _fire_steps(self, item: ScheduleItem) -> Steps:
        """A fired timer, as :data:`~flowsched.integrations._binding.Steps` (both faces):
        find the machine, check that it is in that entry of that state, send the event."""
        machine_id, state_id, token, index = self._target(item)
        local = self._machines.get(machine_id)
        machine, current = local, None
        if local is not None:
            current = self._current(local, machine_id, state_id, item, token)
        if local is None or (current is False and self.load_machine is not None):
            # Not armed here, or this copy disagrees with the timer the scheduler delivered
            # (the current one: leaving cancels it, entering again replaces it) - another
            # process moved the machine on: the stored machine tells.
            loaded = yield ("load", (machine_id, local is not None))
            if local is None:
                machine = self._found(machine_id, loaded)
            if loaded is not None and loaded is not local:
                machine = loaded
                current = self._current(loaded, machine_id, state_id, item, token)
        assert machine is not None  # the local copy, or one load_machine found
        state = self._state(machine, state_id, item)
        if current is None:
            current = self._stored_entry((yield ("get", (item.id,))), token)
        if not current:
            return
        event, arguments = self._event(state, index)
        reset = FIRING.set((id(self), machine_id, item.id))
        try:
            yield ("fire", (machine, event, arguments))
        finally:
            FIRING.reset(reset)
        self._forget(machine_id, item.id, token)

    def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        calls = {"load": self._load, "get": self.scheduler.get, "fire": _send}
        run_steps(self._fire_steps(item), calls)

    async def _on_timer_async(self, item: ScheduleItem, attempt: int) -> None:
        calls = {"load": self._load_async, "get": self.scheduler.get, "fire": _send}
        await run_steps_async(self._fire_steps(item), calls)

    def _found(self, machine_id: str, machine: Any) -> Any:
        if machine is None:
            how = "load_machine returned None" if self.load_machine else "no load_machine"
            raise missing(machine_id, self.name, how)
        return machine

    def _load(self, machine_id: str, found_only: bool = False) -> Any:
        """``load_machine(machine_id)``; ``None`` without one. A ``LookupError`` is a missing
        machine (a dead letter), or ``None`` with ``found_only`` (a second opinion only)."""
        if self.load_machine is None:
            return None
        try:
            return self.load_machine(machine_id)
        except LookupError as exc:
            if found_only:
                return None
            how = f"load_machine raised {type(exc).__name__}: {exc}"
            raise missing(machine_id, self.name, how) from exc

    async def _load_async(self, machine_id: str, found_only: bool = False) -> Any:
        """As :meth:`_load`, awaiting an ``async def`` ``load_machine`` (a ``LookupError`` it
        raises when awaited is a missing machine too)."""
        try:
            loaded = self._load(machine_id, found_only=found_only)
            if inspect.isawaitable(loaded):
                loaded = await loaded
        except LookupError as exc:
            if found_only:
                return None
            how = f"load_machine raised {type(exc).__name__}: {exc}"
            raise missing(machine_id, self.name, how) from exc
        return loaded

    @staticmethod
    def _event(state: Any, index: int) -> tuple[str, dict[str, Any]]:
        """The event (and its arguments) the ``index``-th timeout of ``state`` sends: as
        upstream, ``done.invoke.<state>`` carries ``data=None``; an ``on=`` event nothing."""
        handlers = _timeouts_of(state)
        if index >= len(handlers):
            raise Undeliverable(f"state {state.id!r} has no durable_timeout #{index + 1}")
        handler = handlers[index]
        if handler.on is None:
            return handler.event(state.id), {"data": None}
        return handler.event(state.id), {}

    def as_flow(self, machine_class: type) -> Any:
        """``machine_class``'s states as a ``flowsched.Flow`` named ``name`` (no actions),
        for ``flowsched check CONF --flows MODULE:ATTR``."""
        from flowsched.integrations._flows import machine_flow

        return machine_flow(self.name, [s.id for s in _states(machine_class)])


def _send(machine: Any, event: str, arguments: dict[str, Any]) -> Any:
    """Send a timeout's event (awaited by the async driver when the engine is async)."""
    return machine.send(event, **arguments)


class _Listener:
    """A machine's listener: arms and cancels its durable timeouts."""

    def __init__(self, timers: StatechartTimers, machine_id: str) -> None:
        self.timers = timers
        self.machine_id = machine_id

    def __repr__(self) -> str:
        return f"StatechartTimers({self.timers.name!r}).listener({self.machine_id!r})"


class _SyncListener(_Listener):
    def on_enter_state(self, target: Any, machine: Any) -> None:
        for timer_id, delay, payload in self.timers.arm(self.machine_id, machine, target):
            self.timers.scheduler.create_single_timer(timer_id, delay, self.timers.name, payload)

    def on_exit_state(self, source: Any) -> None:
        for timer_id in self.timers.leave(self.machine_id, source):
            self.timers.scheduler.cancel(timer_id)


class _AsyncListener(_Listener):
    async def on_enter_state(self, target: Any, machine: Any) -> None:
        for timer_id, delay, payload in self.timers.arm(self.machine_id, machine, target):
            await self.timers.scheduler.create_single_timer(
                timer_id, delay, self.timers.name, payload
            )

    async def on_exit_state(self, source: Any) -> None:
        for timer_id in self.timers.leave(self.machine_id, source):
            await self.timers.scheduler.cancel(timer_id)
