"""Durable timeouts for ``transitions`` machines (extra ``flowsched[transitions]``).

transitions' own ``Timeout`` state starts a ``threading.Timer`` per entry; it is gone when
the process stops and exists only where the state was entered. :class:`DurableTimeout` takes
the same state keys - ``timeout`` and ``on_timeout`` - and keeps the timer in a flowsched
scheduler instead: no thread per waiting model, and with ``MongoScheduler`` the timeout
survives a restart and fires once in a cluster::

    from flowsched.integrations.transitions import DurableMachine

    machine = DurableMachine(
        model=order,                      # order.id names its timers
        states=["new", {"name": "awaiting_payment", "timeout": "30m",
                        "on_timeout": "expire"}, "expired", "paid"],
        initial="new",
        scheduler=scheduler,              # any flowsched scheduler
        name="Orders",                    # handler name, and config keys Orders.<State>.Any.*
        config=config,                    # optional: Orders.awaiting_payment.Any.timeout-duration
        load_model=orders.get,            # optional: model id -> model, in another process
    )

Semantics:

* ``timeout``: seconds as a number (as in transitions) or a HOCON duration string (``"30m"``).
  ``<name>.<State>.Any.timeout-duration`` in ``config`` (with ``Any`` precedence) overrides it.
* Entering the state arms timer ``"<name>:<model id>:<state>"`` addressed to the handler
  ``<name>``; its payload names the model, the state and the entry. Leaving the state cancels
  it. A timer that fires for a model no longer in that entry of that state does nothing.
* ``on_timeout`` callbacks are called as transitions' async ``Timeout`` calls them: without
  the trigger's arguments (none survive a restart), or with one ``EventData`` (event
  ``"timeout"``) when ``send_event=True``. A callback that raises is handled by the machine's
  ``on_exception`` if it has one; otherwise the timer is redelivered with the scheduler's
  backoff (delivery is at least once).
* A timer whose model is neither in this machine nor found by ``load_model`` (it returns
  ``None`` or raises ``LookupError``) becomes a dead letter saying so (see
  :class:`flowsched.Undeliverable`), not a redelivery loop.
* Nested states (``HierarchicalMachine``) are refused with a ``TypeError``: not supported yet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

try:
    from transitions import Machine, State
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "flowsched.integrations.transitions needs transitions 0.9: "
        "pip install 'flowsched[transitions]'"
    ) from exc
from transitions.core import EventData, listify
from transitions.extensions.states import add_state_features

from flowsched import ScheduleItem, SchedulingConfig
from flowsched.integrations._binding import FIRING, Binding, check_loaded, is_lookup_miss
from flowsched.integrations._timers import check_scheduler_face, timeout_delta

__all__ = ["AsyncDurableMachine", "DurableMachine", "DurableTimeout"]

log = logging.getLogger("flowsched.integrations.transitions")


def _binding(event_data: Any, state: DurableTimeout) -> Binding | None:
    binding: Binding | None = getattr(event_data.machine, "_flowsched", None)
    if binding is None and state.timeout_delta is not None:
        raise TypeError(
            f"state {state.name!r} has a DurableTimeout but machine "
            f"{type(event_data.machine).__name__} is not bound to a scheduler: build it as a "
            "DurableMachine (or AsyncDurableMachine) with scheduler= and name="
        )
    return binding


def _refuse_nested(cls: type) -> None:
    try:
        from transitions.extensions.nesting import HierarchicalMachine, NestedState
    except ImportError:  # pragma: no cover - part of transitions
        return
    if issubclass(cls, NestedState | HierarchicalMachine):
        raise TypeError(
            f"{cls.__name__}: DurableTimeout does not support nested states "
            "(HierarchicalMachine) yet; use a flat DurableMachine, or transitions' own "
            "Timeout in a HierarchicalMachine"
        )


class DurableTimeout(State):
    """A state feature for ``add_state_features``: transitions' ``Timeout``, durable.

    State keys: ``timeout`` (seconds, or a HOCON duration string; 0 or absent: none) and
    ``on_timeout`` (names or callables; required when ``timeout`` is set, as in
    transitions). Works on ``Machine`` and ``AsyncMachine`` subclasses bound to a scheduler -
    :class:`DurableMachine` and :class:`AsyncDurableMachine` are.
    """

    dynamic_methods = ["on_timeout"]  # noqa: RUF012  (as transitions declares it)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse_nested(type(self))
        self._timeout: object = 0
        self.timeout_delta: timedelta | None = None
        self.timeout = kwargs.pop("timeout", 0)
        self._on_timeout: list[Any] = []
        if self.timeout_delta is not None:
            try:
                self.on_timeout = kwargs.pop("on_timeout")
            except KeyError:
                raise AttributeError(
                    "Timeout state requires 'on_timeout' when timeout is set."
                ) from None
        else:
            self.on_timeout = kwargs.pop("on_timeout", [])
        super().__init__(*args, **kwargs)
        from transitions.extensions.asyncio import AsyncState

        self._async = isinstance(self, AsyncState)

    @property
    def timeout(self) -> object:
        """The state's timeout as given (seconds, or a duration string)."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: object) -> None:
        name = getattr(self, "name", None) or "state"
        self.timeout_delta = timeout_delta(value, f"{name} timeout")
        self._timeout = value

    @property
    def on_timeout(self) -> list[Any]:
        """List of names and callables called when the state times out."""
        return self._on_timeout

    @on_timeout.setter
    def on_timeout(self, value: Any) -> None:
        self._on_timeout = list(listify(value))

    def enter(self, event_data: Any) -> Any:
        """Arm the timer (before the state's own ``on_enter`` callbacks, as transitions
        does), then enter."""
        if self._async:
            return self._enter_async(event_data)
        binding = _binding(event_data, self)
        if binding is not None:
            arm = binding.arm(self, event_data.model)
            if arm is not None:
                binding.scheduler.create_single_timer(
                    arm.timer_id, arm.delay, binding.name, arm.payload
                )
        return super().enter(event_data)

    def exit(self, event_data: Any) -> Any:
        """Cancel the timer, then exit."""
        if self._async:
            return self._exit_async(event_data)
        binding = _binding(event_data, self)
        if binding is not None:
            timer_id = binding.leave(self, event_data.model)
            if timer_id is not None:
                binding.scheduler.cancel(timer_id)
        return super().exit(event_data)

    async def _enter_async(self, event_data: Any) -> None:
        binding = _binding(event_data, self)
        if binding is not None:
            arm = binding.arm(self, event_data.model)
            if arm is not None:
                await binding.scheduler.create_single_timer(
                    arm.timer_id, arm.delay, binding.name, arm.payload
                )
        parent: Any = super()  # AsyncState: its enter is a coroutine function
        await parent.enter(event_data)

    async def _exit_async(self, event_data: Any) -> None:
        binding = _binding(event_data, self)
        if binding is not None:
            timer_id = binding.leave(self, event_data.model)
            if timer_id is not None:
                await binding.scheduler.cancel(timer_id)
        parent: Any = super()
        await parent.exit(event_data)


def _bind(
    machine: Any,
    scheduler: Any,
    name: str,
    config: SchedulingConfig | None,
    load_model: Callable[[str], Any] | None,
    model_id: str,
    want_async: bool,
) -> Binding:
    _refuse_nested(type(machine))
    cls = "AsyncDurableMachine" if want_async else "DurableMachine"
    other = "DurableMachine" if want_async else "AsyncDurableMachine"
    check_scheduler_face(scheduler, want_async, cls, other)
    return Binding(
        machine,
        scheduler=scheduler,
        name=name,
        config=config,
        load_model=load_model,
        model_id=model_id,
    )


def _register(binding: Binding, handler: Callable[[ScheduleItem, int], Any]) -> None:
    try:
        binding.scheduler.register(binding.name, handler)
    except ValueError as exc:
        raise ValueError(
            f"machine name {binding.name!r}: {exc} (one machine per name and scheduler)"
        ) from None


class _ModelIndex:
    """Keeps the binding's id -> model index in step with ``add_model``/``remove_model``."""

    _flowsched: Binding

    def add_model(self, model: Any, initial: Any = None) -> None:
        binding = self._flowsched
        self_literal = getattr(self, "self_literal", "self")
        models = [self if m is self_literal else m for m in listify(model)]
        for mod in models:
            binding.owner(mod)  # ValueError before anything is added
        super().add_model(model, initial)  # type: ignore[misc]
        for mod in models:
            binding.adopt(mod)

    def remove_model(self, model: Any) -> None:
        super().remove_model(model)  # type: ignore[misc]
        for mod in listify(model):
            self._flowsched.drop(mod)


@add_state_features(DurableTimeout)
class DurableMachine(_ModelIndex, Machine):
    """A ``transitions.Machine`` whose states take ``timeout``/``on_timeout`` (see
    :class:`DurableTimeout`), kept as flowsched timers.

    Keyword arguments besides ``Machine``'s: ``scheduler`` (any synchronous flowsched
    scheduler), ``name`` (the handler name of its timers and the flow part of its config
    keys; also passed to ``Machine`` as its name), ``config`` (a ``SchedulingConfig``),
    ``load_model`` (model id -> model, or ``None``/``LookupError`` when there is none) and
    ``model_id`` (the attribute naming a model, default ``"id"``). Its handler is registered
    on the scheduler when it is built: one machine per name and scheduler.
    """

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
        self._flowsched = _bind(self, scheduler, name, config, load_model, model_id, False)
        kwargs["name"] = name  # also transitions' own name (its log prefix)
        super().__init__(*args, **kwargs)
        _register(self._flowsched, self._on_timer)

    def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        binding = self._flowsched
        owner, state_name, token, state = binding.target(item)
        model, borrowed = binding.models.get(owner), False
        if model is None:
            model = self._load(owner)
            if model not in self.models:
                self.add_model(model, initial=binding.borrow_state(model, owner))
                borrowed = True
        try:
            if self._current(item, model, owner, state_name, token):
                self._process_timeout(state, model, owner)
        finally:
            if borrowed:
                self.remove_model(model)

    def _load(self, owner: str) -> Any:
        binding = self._flowsched
        if binding.load_model is None:
            raise binding.missing(owner)
        try:
            found = binding.load_model(owner)
        except Exception as exc:
            if is_lookup_miss(exc):
                raise binding.missing(owner) from exc
            raise
        return check_loaded(binding, owner, found)

    def _current(self, item: ScheduleItem, model: Any, owner: str, state: str, token: str) -> bool:
        binding = self._flowsched
        if not binding.in_state(model, state):
            return False
        known = binding.known_entry(owner, state)
        if known is not None:
            return known == token
        # Entered in another process (or before a restart): the scheduler knows the entry.
        current = binding.scheduler.get(item.id)
        return current is not None and (current.payload or {}).get("entry") == token

    def _process_timeout(self, state: DurableTimeout, model: Any, owner: str) -> None:
        binding = self._flowsched
        event_data = EventData(
            state, self._create_event("timeout", self), self, model, args=(), kwargs={}
        )
        reset = FIRING.set((id(binding), owner, state.name))
        try:
            self.callbacks(state.on_timeout, event_data)
        except Exception as err:
            if not self.on_exception:
                raise
            event_data.error = err
            self.callbacks(self.on_exception, event_data)
        finally:
            FIRING.reset(reset)
        binding.fired(owner, state.name)
        log.debug("%stimeout of %s in state %s processed", self.name, owner, state.name)

    def as_flow(self) -> Any:
        """This machine's states as a ``flowsched.Flow`` named ``name`` (no actions): what
        ``flowsched check CONF --flows MODULE:ATTR`` checks config keys against."""
        from flowsched.integrations._flows import machine_flow

        return machine_flow(self._flowsched.name, list(self.states))


from flowsched.integrations._transitions_async import AsyncDurableMachine  # noqa: E402
