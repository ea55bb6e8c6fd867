"""Internal: the ``DurableTimeout`` state feature and what both durable ``transitions``
machines share (binding, handler registration, the model index); import them from
:mod:`flowsched.integrations.transitions`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from transitions import State
from transitions.core import listify

from flowsched import ScheduleItem, SchedulingConfig
from flowsched.integrations._binding import Binding, is_lookup_miss
from flowsched.integrations._timers import check_scheduler_face, timeout_delta

__all__ = ["DurableTimeout", "MachineFace", "register_handler"]


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
        # Named in a bad timeout's error: State.__init__ (which sets the name) comes later.
        self._named = str(kwargs.get("name", args[0] if args else "state"))
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
        name = getattr(self, "name", None) or getattr(self, "_named", "state")
        self.timeout_delta = timeout_delta(value, f"state {name!r} timeout")
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
        if self.timeout_delta is None and not self._on_timeout:
            return super().enter(event_data)  # no timeout here: nothing to arm
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
        if self.timeout_delta is None and not self._on_timeout:
            return super().exit(event_data)
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


def register_handler(binding: Binding, handler: Callable[[ScheduleItem, int], Any]) -> None:
    try:
        binding.scheduler.register(binding.name, handler)
    except ValueError as exc:
        raise ValueError(
            f"machine name {binding.name!r}: {exc} (one machine per name and scheduler)"
        ) from None


class MachineFace:
    """What both durable machines share: built on a scheduler of their face (``_async``,
    their handler registered last), the binding's id -> model index kept in step with
    ``add_model``/``remove_model``, and :meth:`as_flow`."""

    _flowsched: Binding
    _async = False
    _on_timer: Callable[[ScheduleItem, int], Any]

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
        _refuse_nested(type(self))
        names = ("DurableMachine", "AsyncDurableMachine")
        cls, other = names[::-1] if self._async else names
        check_scheduler_face(scheduler, self._async, cls, other)
        self._flowsched = Binding(
            self, scheduler=scheduler, name=name, config=config, load_model=load_model,
            model_id=model_id,
        )  # fmt: skip
        kwargs["name"] = name  # also transitions' own name (its log prefix)
        super().__init__(*args, **kwargs)
        register_handler(self._flowsched, self._on_timer)

    def _missed(self, owner: str, exc: Exception, found_only: bool) -> None:
        """``load_model(owner)`` raised ``exc``: a lookup miss is no model (the dead
        letter's error; with ``found_only``, a second opinion, ``None``); else ``exc``."""
        if not is_lookup_miss(exc):
            raise exc
        if not found_only:
            raise self._flowsched.missing(owner, exc) from exc

    def as_flow(self) -> Any:
        """This machine's states as a ``flowsched.Flow`` named ``name`` (no actions): what
        ``flowsched check CONF --flows MODULE:ATTR`` checks config keys against."""
        from flowsched.integrations._flows import machine_flow

        return machine_flow(self._flowsched.name, list(self.states))  # type: ignore[attr-defined]

    def add_model(self, model: Any, initial: Any = None) -> None:
        binding = self._flowsched
        self_literal = getattr(self, "self_literal", "self")
        models = [self if m is self_literal else m for m in listify(model)]
        binding.check_free(models)  # ValueError before anything is added
        super().add_model(model, initial)  # type: ignore[misc]
        for mod in models:
            binding.adopt(mod)

    def remove_model(self, model: Any) -> None:
        super().remove_model(model)  # type: ignore[misc]
        for mod in listify(model):
            self._flowsched.drop(mod)
