"""Internal: the decisions of a durable ``transitions`` machine, written once for the sync and
the async machine (they differ only in how they call the scheduler and the callbacks).

A :class:`Binding` belongs to one machine. It knows the scheduler, the handler name, the
config override, how to find a model (its id attribute, the machine's own models, then
``load_model``) and which entry of which state each in-process model is in. It does no I/O:
the machines call the scheduler with what it returns.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from flowsched import ScheduleItem, SchedulingConfig, Undeliverable
from flowsched.integrations._timers import (
    EntryTokens,
    TimerAddress,
    configured_timeout,
    missing,
)

if TYPE_CHECKING:
    from flowsched.integrations.transitions import DurableTimeout

__all__ = ["Arm", "Binding", "FIRING", "Steps", "run_steps", "run_steps_async"]

Steps = Generator[tuple[str, tuple[Any, ...]], Any, None]
"""A timer's delivery, written once for both faces: it yields ``(call, args)`` - ``"load"``
(``load_model``/``load_machine``), ``"get"`` (the scheduler's stored timer), ``"fire"`` (run
the timeout) - and gets each call's result back (:func:`run_steps`, :func:`run_steps_async`)."""


def run_steps(steps: Steps, calls: Mapping[str, Callable[..., Any]]) -> None:
    """Run ``steps`` with synchronous ``calls``; an error closes the steps (their ``finally``
    blocks run) and propagates."""
    reply: Any = None
    while (call := _next_call(steps, reply)) is not None:
        with _closed_on_error(steps):
            reply = calls[call[0]](*call[1])


async def run_steps_async(steps: Steps, calls: Mapping[str, Callable[..., Any]]) -> None:
    """:func:`run_steps`, awaiting a call that returns an awaitable."""
    reply: Any = None
    while (call := _next_call(steps, reply)) is not None:
        with _closed_on_error(steps):
            reply = calls[call[0]](*call[1])
            if inspect.isawaitable(reply):
                reply = await reply


def _next_call(steps: Steps, reply: Any) -> tuple[str, tuple[Any, ...]] | None:
    """The next ``(call, args)`` of ``steps`` given ``reply`` to the last, or ``None``."""
    try:
        return steps.send(reply)
    except StopIteration:
        return None


@contextmanager
def _closed_on_error(steps: Steps) -> Iterator[None]:
    try:
        yield
    except BaseException:
        steps.close()  # the steps' finally blocks run
        raise


FIRING: ContextVar[tuple[int, str, str] | None] = ContextVar("flowsched_firing", default=None)
"""``(binding id, model id, state)`` while that timeout's callbacks run: leaving the state
from inside them needs no cancel (the delivery completes the timer itself)."""


class Arm:
    """What entering a timed state schedules: ``timer_id`` due after ``delay``."""

    __slots__ = ("delay", "payload", "timer_id")

    def __init__(self, timer_id: str, delay: timedelta, payload: dict[str, Any]) -> None:
        self.timer_id = timer_id
        self.delay = delay
        self.payload = payload


class Binding:
    """One machine's timers: see the module docstring."""

    def __init__(
        self,
        machine: Any,
        *,
        scheduler: Any,
        name: str,
        config: SchedulingConfig | None,
        load_model: Callable[[str], Any] | None,
        model_id: str,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string (got {name!r})")
        if config is not None and not isinstance(config, SchedulingConfig):
            raise TypeError(f"config must be a SchedulingConfig (got {type(config).__name__})")
        if load_model is not None and not callable(load_model):
            raise TypeError(f"load_model must be a callable (got {load_model!r})")
        if not isinstance(model_id, str) or not model_id.isidentifier():
            raise ValueError(f"model_id must be an attribute name (got {model_id!r})")
        self.machine = machine
        self.scheduler = scheduler
        self.name = name
        self.address = TimerAddress(name)
        self.config = config
        self.load_model = load_model
        self.model_id = model_id
        self.tokens = EntryTokens()
        self.models: dict[str, Any] = {}
        # state name -> {model id -> entry token}: the entries armed in this process.
        self.entries: dict[str, dict[str, str]] = {}

    # -- models ------------------------------------------------------------------------

    def owner(self, model: Any) -> str:
        """The model's id: its ``model_id`` attribute (the machine itself, when it is its
        own model and has none, is named by the machine's ``name``)."""
        value = getattr(model, self.model_id, None)
        if value is None and model is self.machine:
            return self.name
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            raise ValueError(
                f"machine {self.name!r}: model {model!r} has no usable {self.model_id!r} "
                f"attribute (got {value!r}); a durable timeout needs a stable id per model "
                "(a non-empty string or an int): set it, or name another attribute with "
                "model_id="
            )
        return str(value)

    def check_free(self, models: list[Any]) -> None:
        """``ValueError`` before anything is added if a model has no usable id, or an id that
        another model of the machine (or of ``models``) has."""
        seen: dict[str, Any] = {}
        for model in models:
            owner = self.owner(model)
            known = self.models.get(owner, seen.get(owner))
            if known is not None and known is not model:
                raise ValueError(
                    f"machine {self.name!r} already has a model with id {owner!r}; model ids "
                    "must be unique within a machine"
                )
            seen[owner] = model

    def adopt(self, model: Any) -> None:
        """Index a model the machine now manages (``ValueError`` if its id is taken)."""
        self.check_free([model])
        self.models[self.owner(model)] = model

    def drop(self, model: Any) -> None:
        """Forget a model removed from the machine."""
        owner = self.owner(model)
        if self.models.get(owner) is model:
            del self.models[owner]
            for waiting in self.entries.values():
                waiting.pop(owner, None)

    # -- entering and leaving ------------------------------------------------------------

    def delay(self, state: DurableTimeout) -> timedelta | None:
        """The state's timeout: the config key if one sets it (for a state that has a timeout
        or ``on_timeout`` callbacks; ``0s`` there means none, as ``timeout: 0`` does), else
        the code's ``timeout``."""
        declared = state.timeout_delta
        if declared is None and not state.on_timeout:
            return None
        configured = configured_timeout(self.config, self.name, state.name)
        if configured is None:
            return declared
        return configured if configured > timedelta(0) else None  # 0: no timeout, as in code

    def arm(self, state: DurableTimeout, model: Any) -> Arm | None:
        """The timer entering ``state`` schedules (``None``: the state has no timeout)."""
        delay = self.delay(state)
        if delay is None:
            return None
        owner = self.owner(model)
        token = self.tokens.next()
        self.entries.setdefault(state.name, {})[owner] = token
        payload = self.address.payload(owner, state.name, token)
        return Arm(self.address.timer_id(owner, state.name), delay, payload)

    def leave(self, state: DurableTimeout, model: Any) -> str | None:
        """The timer id leaving ``state`` cancels (``None``: nothing to cancel)."""
        owner = self.owner(model)
        waiting = self.entries.get(state.name)
        if waiting is not None:
            waiting.pop(owner, None)
        if FIRING.get() == (id(self), owner, state.name):
            return None  # leaving from its own on_timeout: the delivery completes the timer
        if self.delay(state) is None:
            return None
        return self.address.timer_id(owner, state.name)

    # -- firing --------------------------------------------------------------------------

    def target(self, item: ScheduleItem) -> tuple[str, str, str, DurableTimeout]:
        """``(model id, state, entry token, state object)`` of a fired timer;
        :class:`Undeliverable` for a state this machine does not have."""
        owner, state_name, token = self.address.read(item.payload, item.id)
        state = self.machine.states.get(state_name)
        if state is None:
            raise Undeliverable(
                f"machine {self.name!r} has no state {state_name!r} (timer {item.id!r})"
            )
        return owner, state_name, token, state

    def missing(self, owner: str, error: BaseException | None = None) -> Undeliverable:
        """Why a timer for a model neither here nor loadable is a dead letter (``error``:
        the ``LookupError`` ``load_model`` raised, if it did)."""
        if error is not None:
            how = f"load_model raised {type(error).__name__}: {error}"
        elif self.load_model is not None:
            how = "load_model returned None"
        else:
            how = "no load_model was given"
        return missing(owner, self.name, how)

    def timeout_steps(self, item: ScheduleItem, base: Any) -> Steps:
        """A fired timer, as :data:`Steps`: find the model (the machine's own copy, else
        ``load_model``), check that it is still in that entry of that state, run the timeout.
        ``base`` is the machine's transitions class (``Machine`` or ``AsyncMachine``), whose
        ``add_model`` borrows a loaded model beside the copy the machine holds under its id."""
        machine = self.machine
        owner, state_name, token, state = self.target(item)
        model, borrowed, indexed = self.models.get(owner), False, True
        if model is None:
            model = check_loaded(self, owner, (yield ("load", (owner, False))))
            borrowed = not any(known is model for known in machine.models)
        elif self.load_model is not None and not (
            yield from self._current_steps(item, model, owner, state_name, token, True)
        ):
            # This copy disagrees with the timer the scheduler delivered (the current one:
            # leaving cancels it, entering again replaces it): another process may have
            # moved the model on, and the stored model tells.
            fresh = yield ("load", (owner, True))
            if fresh is not None and fresh is not model:
                model, borrowed, indexed = fresh, True, False
        if borrowed:
            initial = self.borrow_state(model, owner)
            if indexed:
                add_by_identity(machine, model, lambda: machine.add_model(model, initial=initial))
            else:  # beside the copy this machine holds under that id, for this delivery
                add_by_identity(machine, model, lambda: base.add_model(machine, model, initial))
        try:
            if (
                yield from self._current_steps(item, model, owner, state_name, token, not borrowed)
            ):
                yield ("fire", (state, model, owner))
        finally:
            if borrowed and indexed:
                remove_by_identity(machine, model, lambda: machine.remove_model(model))
            elif borrowed:
                remove_by_identity(machine, model, lambda: base.remove_model(machine, model))

    def _current_steps(
        self, item: ScheduleItem, model: Any, owner: str, state: str, token: str, local: bool
    ) -> Generator[tuple[str, tuple[Any, ...]], Any, bool]:
        """Whether ``model`` is in the entry of ``state`` that armed the timer: the entry this
        process armed (``local``), else the scheduler's stored timer tells - entered in
        another process (or before a restart), or entered again since this process armed it
        (here: a delivery that raced the new entry, stale; elsewhere: current)."""
        if not self.in_state(model, state):
            return False
        if local and self.known_entry(owner, state) == token:
            return True
        stored = yield ("get", (item.id,))
        return stored is not None and (stored.payload or {}).get("entry") == token

    def in_state(self, model: Any, state_name: str) -> bool:
        """Whether ``model`` is in ``state_name`` now."""
        try:
            current = self.machine.get_model_state(model)
        except (AttributeError, ValueError):
            return False
        return bool(current.name == state_name)

    def known_entry(self, owner: str, state_name: str) -> str | None:
        """The entry token this process armed for the model in that state, if any."""
        waiting = self.entries.get(state_name)
        return None if waiting is None else waiting.get(owner)

    def fired(self, owner: str, state_name: str) -> None:
        """The timeout's callbacks ran: this entry has no live timer any more."""
        waiting = self.entries.get(state_name)
        if waiting is not None:
            waiting.pop(owner, None)

    def borrow_state(self, model: Any, owner: str) -> Any:
        """The state to add a loaded model in (its state attribute);
        :class:`Undeliverable` if it has none."""
        attribute = self.machine.model_attribute
        current = getattr(model, attribute, None)
        if current is None:
            raise Undeliverable(
                f"machine {self.name!r}: load_model({owner!r}) returned {model!r}, which has "
                f"no {attribute!r} attribute (the state to restore it in)"
            )
        return current


def add_by_identity(machine: Any, model: Any, add: Callable[[], None]) -> None:
    """Run ``add`` (a transitions ``add_model`` of ``model``) so that it binds ``model`` even
    when the machine holds a model that compares *equal* to it (transitions checks ``model
    not in machine.models``, by ``==``: a dataclass or a model equal by primary key - a
    loaded copy beside the one held - was left unbound). The models held stay as they were,
    ``model`` after them."""
    models = machine.models
    held = list(models)
    models[:] = []
    try:
        add()
    finally:
        models[:] = held + [m for m in models if m is model]


def remove_by_identity(machine: Any, model: Any, remove: Callable[[], None]) -> None:
    """Run ``remove`` (a transitions ``remove_model`` of ``model``) so that it removes this
    very object (``list.remove`` compares by ``==``: it took the equal model the machine
    holds, the user's own, instead of a borrowed copy)."""
    models = machine.models
    rest = [m for m in models if m is not model]
    models[:] = [model]
    try:
        remove()
    finally:
        models[:] = rest


def check_loaded(binding: Binding, owner: str, model: Any) -> Any:
    """``model`` as ``load_model`` returned it, if it is the model asked for."""
    if model is None:
        raise binding.missing(owner)
    return model


def is_lookup_miss(exc: BaseException) -> bool:
    """Whether ``load_model`` raising ``exc`` means "no such model" (a ``KeyError`` or
    ``LookupError``): then the timer is a dead letter; anything else is redelivered."""
    return isinstance(exc, LookupError)
