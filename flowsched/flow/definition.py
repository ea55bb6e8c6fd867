"""Internal: flow definitions — states, the actions they invoke, responses and transitions.

A flow is declared with :class:`Flow` and frozen into a :class:`FlowDefinition` by
:meth:`Flow.build`, which checks that it is consistent::

    credit_transfer = (
        Flow("OBCreditTransfer")
        .initial("ValidatingSchemeRules", invokes="ValidateAgainstSchemeRules")
        .state("CheckingFraud", invokes="CheckFraud")
        .terminal("Complete", "FraudTimedOut")
        .response(SchemeRulesValidated, to="ValidateAgainstSchemeRules")
        .response(FraudChecked, to="CheckFraud")
        .on(SchemeRulesValidated, in_state="ValidatingSchemeRules", go_to="CheckingFraud")
        .on(FraudChecked, in_state="CheckingFraud", go_to="Complete")
        .on(ActionTimeoutEvent, in_state="CheckingFraud", action="CheckFraud",
            go_to="FraudTimedOut")
        .build()
    )

Events are instances of any class; a transition matches by ``isinstance``. A *response* is an
event declared as the answer to an action: a completing one (the default) cancels that
action's timeout and retries; a non-completing one (an acknowledgement) leaves them running.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Self, TypeVar

from flowsched.errors import FlowDefinitionError
from flowsched.flow.timers import flow_handler
from flowsched.limits import check_handler_name

__all__ = [
    "ANY_STATE",
    "Flow",
    "FlowDefinition",
    "FlowDefinitionError",
    "ResponseSpec",
    "StateSpec",
    "Transition",
]

_Event = TypeVar("_Event")

ANY_STATE = "*"
"""Use as ``in_state`` for a transition that applies in every non-terminal state."""


@dataclass(frozen=True, slots=True)
class StateSpec:
    """A state: ``actions`` are invoked, in order, each time the state is entered."""

    name: str
    actions: tuple[str, ...] = ()
    initial: bool = False
    terminal: bool = False


@dataclass(frozen=True, slots=True)
class ResponseSpec:
    """Events of ``event_type`` answer ``action``; ``completing`` ones stop its timers."""

    event_type: type
    action: str
    completing: bool = True


@dataclass(frozen=True, slots=True)
class Transition:
    """In ``source`` (or any state, for :data:`ANY_STATE`), ``event_type`` leads to ``target``.

    ``action`` / ``destination`` narrow the match to events whose attribute of that name has
    that value (``ActionTimeoutEvent.action``, ``ProcessingTimeElapsedEvent.destination``);
    ``when`` is an optional guard on the event.
    """

    source: str
    event_type: type
    target: str
    action: str | None = None
    destination: str | None = None
    when: Callable[[Any], bool] | None = None

    def matches(self, state: str, event: object) -> bool:
        """Whether this transition applies to ``event`` while the flow is in ``state``."""
        if self.source not in (state, ANY_STATE) or not isinstance(event, self.event_type):
            return False
        if self.action is not None and getattr(event, "action", None) != self.action:
            return False
        if self.destination is not None and getattr(event, "destination", None) != (
            self.destination
        ):
            return False
        return self.when is None or bool(self.when(event))


@dataclass(frozen=True, slots=True)
class FlowDefinition:
    """A validated flow: build one with :class:`Flow`. Immutable and safe to share."""

    name: str
    states: Mapping[str, StateSpec]
    transitions: tuple[Transition, ...]
    responses: tuple[ResponseSpec, ...]
    initial: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "states", MappingProxyType(dict(self.states)))
        initial = [s.name for s in self.states.values() if s.initial]
        object.__setattr__(self, "initial", initial[0] if initial else "")

    def state(self, name: str) -> StateSpec:
        """The state called ``name``; ``KeyError`` naming the valid states otherwise."""
        try:
            return self.states[name]
        except KeyError:
            raise KeyError(
                f"flow {self.name!r} has no state {name!r} (states: {', '.join(self.states)})"
            ) from None

    @property
    def actions(self) -> frozenset[str]:
        """Every action some state of this flow invokes."""
        return frozenset(a for s in self.states.values() for a in s.actions)

    def transition_for(self, state: str, event: object) -> Transition | None:
        """The first declared transition that matches, or ``None`` (the event is ignored)."""
        return next((t for t in self.transitions if t.matches(state, event)), None)

    def response_for(self, event: object) -> ResponseSpec | None:
        """The response declaration ``event`` is an instance of, if any (first declared)."""
        return next((r for r in self.responses if isinstance(event, r.event_type)), None)


class Flow:
    """Declare a flow step by step; every method returns the same builder.

    Nothing is checked until :meth:`build`, which raises :class:`FlowDefinitionError` for
    the first inconsistency it finds (with the flow's name and what would be valid).
    """

    def __init__(self, name: str) -> None:
        if not name or "." in name:
            raise FlowDefinitionError(
                f"flow name {name!r} must be non-empty and without '.' (it is a config key part)"
            )
        try:  # every timer of the flow is addressed to the handler named after it
            check_handler_name(flow_handler(name))
        except ValueError as exc:
            raise FlowDefinitionError(
                f"flow name {name!r} cannot name its timers' handler: {exc}"
            ) from None
        self.name = name
        self._states: dict[str, StateSpec] = {}
        self._transitions: list[Transition] = []
        self._responses: list[ResponseSpec] = []

    def initial(self, name: str, *, invokes: str | Iterable[str] = ()) -> Self:
        """The state a new instance starts in (exactly one per flow)."""
        return self._add(StateSpec(name, _names(invokes), initial=True))

    def state(self, name: str, *, invokes: str | Iterable[str] = ()) -> Self:
        """A state that invokes ``invokes`` (action names, in order) each time it is entered."""
        return self._add(StateSpec(name, _names(invokes)))

    def terminal(self, *names: str) -> Self:
        """States that finish the flow: entering one cancels every timer of the instance."""
        for name in names:
            self._add(StateSpec(name, terminal=True))
        return self

    def response(self, event_type: type, *, to: str, completing: bool = True) -> Self:
        """Declare ``event_type`` as the response to action ``to``.

        A completing response cancels the action's timeout and pending retries; a
        non-completing one (e.g. an acknowledgement) leaves them running. Either kind still
        triggers the transitions declared for it with :meth:`on`."""
        self._responses.append(ResponseSpec(event_type, to, completing))
        return self

    def on(
        self,
        event_type: type[_Event],
        *,
        in_state: str | Iterable[str],
        go_to: str,
        action: str | None = None,
        destination: str | None = None,
        when: Callable[[_Event], bool] | None = None,
    ) -> Self:
        """In ``in_state`` (a name, several, or :data:`ANY_STATE`), ``event_type`` leads to
        ``go_to``. The first matching declaration wins. Going to the current state re-enters
        it (its actions are invoked again, its timers start again)."""
        for source in _names(in_state):
            self._transitions.append(
                Transition(source, event_type, go_to, action, destination, when)
            )
        return self

    def build(self) -> FlowDefinition:
        """Check the declaration and freeze it."""
        _check(self.name, self._states, self._transitions, self._responses)
        return FlowDefinition(
            self.name, self._states, tuple(self._transitions), tuple(self._responses)
        )

    def _add(self, spec: StateSpec) -> Self:
        if not spec.name or "." in spec.name or spec.name == ANY_STATE:
            raise FlowDefinitionError(
                f"flow {self.name!r}: state name {spec.name!r} must be non-empty, without '.'"
                f" and not {ANY_STATE!r}"
            )
        if spec.name in self._states:
            raise FlowDefinitionError(f"flow {self.name!r}: state {spec.name!r} declared twice")
        self._states[spec.name] = spec
        return self


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _check(
    flow: str,
    states: Mapping[str, StateSpec],
    transitions: list[Transition],
    responses: list[ResponseSpec],
) -> None:
    def fail(problem: str) -> FlowDefinitionError:
        return FlowDefinitionError(f"flow {flow!r}: {problem}")

    known = ", ".join(states) or "none declared"
    initial = [s.name for s in states.values() if s.initial]
    if len(initial) != 1:
        raise fail(f"needs exactly one initial state (found {initial or 'none'})")
    actions = {a for s in states.values() for a in s.actions}
    for spec in states.values():
        if len(set(spec.actions)) != len(spec.actions):
            raise fail(f"state {spec.name!r} invokes an action twice: {list(spec.actions)}")
        if any(not a or "." in a for a in spec.actions):
            raise fail(f"state {spec.name!r}: action names must be non-empty, without '.'")
    for t in transitions:
        if t.source != ANY_STATE and t.source not in states:
            raise fail(f"transition from unknown state {t.source!r} (states: {known})")
        if t.target not in states:
            raise fail(f"transition to unknown state {t.target!r} (states: {known})")
        if t.source in states and states[t.source].terminal:
            raise fail(f"terminal state {t.source!r} cannot have transitions")
        if t.action is not None and t.action not in actions:
            raise fail(f"transition names unknown action {t.action!r} (actions: {sorted(actions)})")
        if not isinstance(t.event_type, type):
            raise fail(f"transition event must be a class, got {t.event_type!r}")
    for r in responses:
        if r.action not in actions:
            raise fail(
                f"response {r.event_type.__name__} answers unknown action {r.action!r} "
                f"(actions: {sorted(actions)})"
            )
