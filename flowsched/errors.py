"""Internal: every error flowsched raises on purpose, in one place (import them from ``flowsched``).

The tree::

    FlowschedError                      base of them all
    ├── ConfigError (ValueError)        the scheduling configuration is invalid; ``problems``
    │   └── FlowConfigError             config keys name no registered flow, state or action
    ├── SchedulerUnavailable (RuntimeError)
    │   │                               the store could not be reached in time; nothing happened
    │   └── OutcomeUnknown              a write was sent but its reply never came: it may or
    │                                   may not have taken effect
    ├── MalformedDocument (ValueError)  a stored timer document is not a valid item
    ├── FlowDefinitionError (ValueError)
    │                                   a flow definition is inconsistent
    ├── UnknownFlowError (KeyError)     no flow definition or instance by that name/id
    ├── FlowAlreadyExistsError (ValueError)
    │                                   an instance with this flow id is already stored
    ├── ConcurrentUpdateError (RuntimeError)
    │                                   the instance changed since it was loaded; reload
    └── TimerAheadOfInstanceError (RuntimeError)
                                        a timer arrived before its instance's state entry

:class:`ConfigProblem` (one thing wrong with a configuration) lives here too.

Every class that reports a bad argument also derives from ``ValueError``/``TypeError`` (or
``KeyError``, ``RuntimeError``) as Python users expect, so ``except ValueError`` keeps
working. No input - a config file, a duration, a payload, an id, a stored document - makes
flowsched raise anything else (``RecursionError``, ``OverflowError``, ``UnicodeDecodeError``,
a driver error); a plain bad argument to a call is a ``ValueError``/``TypeError`` naming it.

Kept free of imports of our own so that every module (:mod:`flowsched.durations`, the
records, the adapters, the flow domain) can raise these without an import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ConcurrentUpdateError",
    "ConfigError",
    "ConfigProblem",
    "FlowAlreadyExistsError",
    "FlowConfigError",
    "FlowDefinitionError",
    "FlowschedError",
    "MalformedDocument",
    "OutcomeUnknown",
    "SchedulerUnavailable",
    "TimerAheadOfInstanceError",
    "Undeliverable",
    "UnknownFlowError",
]


class FlowschedError(Exception):
    """Base of every error flowsched raises on purpose.

    >>> from flowsched import ConfigError, FlowschedError, parse_duration
    >>> try:
    ...     parse_duration("2 fortnights")
    ... except FlowschedError as exc:
    ...     isinstance(exc, ConfigError) and isinstance(exc, ValueError)
    True
    """


class Undeliverable(FlowschedError):
    """Raised by a handler: this item can never be handled (what it names is gone), so set
    it aside as a dead letter now, with this message as its reason, instead of redelivering
    it with backoff. ``on_failed`` and the observer are told as for any dead letter, and
    ``requeue`` brings it back.

    >>> from flowsched import Undeliverable
    >>> def on_timer(item, attempt):
    ...     raise Undeliverable(f"order {item.payload['order']!r} no longer exists")
    """


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with a configuration.

    ``key`` is the full key as written in the file (``None`` when the problem is not about one
    key, e.g. a syntax error); ``value`` is the offending value rendered as HOCON text (``None``
    when there is none); ``message`` says what is wrong and what would be valid.
    ``suggestion`` is the key the author probably meant, for near-miss keys. ``source`` and
    ``line`` say where the key is written, when the configuration was read from a file
    (``line`` is ``None`` where it cannot be told).
    """

    key: str | None
    value: str | None
    message: str
    suggestion: str | None = None
    source: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = self.key or ""
        if self.value is not None:
            where = f"{where} = {self.value}" if where else self.value
        text = f"{where}: {self.message}" if where else self.message
        if self.source is None:
            return text
        place = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{place}: {text}"


class ConfigError(FlowschedError, ValueError):
    """The configuration is invalid. ``problems`` lists everything found, not just the first.

    The message names each key and value::

        2 problems in the scheduling configuration:
          - OBCreditTransfer.Any.Any.max-retries = -1: must be a whole number >= 0
          - Any.Any.Any.timeout-duraton = 2s: unknown type; did you mean timeout-duration?
    """

    problems: tuple[ConfigProblem, ...]

    def __init__(self, problems: Iterable[ConfigProblem]) -> None:
        self.problems = tuple(problems)
        if not self.problems:
            raise ValueError("ConfigError needs at least one problem")
        super().__init__(self._render())

    @classmethod
    def single(
        cls, message: str, *, key: str | None = None, value: str | None = None
    ) -> ConfigError:
        """A ConfigError with one problem."""
        return cls([ConfigProblem(key, value, message)])

    def _render(self) -> str:
        if len(self.problems) == 1:
            return str(self.problems[0])
        lines = [f"{len(self.problems)} problems in the scheduling configuration:"]
        lines.extend(f"  - {problem}" for problem in self.problems)
        return "\n".join(lines)


class FlowConfigError(ConfigError):
    """Configuration keys name flows, states or actions that no registered flow has.

    A :class:`ConfigError`: ``problems`` has one entry per key, with the key, what matches
    nothing, the nearest names and (``suggestion``) the key probably meant."""

    def _render(self) -> str:
        head = (
            f"{len(self.problems)} configuration key(s) name no registered flow, state or action:"
        )
        return "\n  - ".join([head, *(str(p) for p in self.problems)])


class SchedulerUnavailable(FlowschedError, RuntimeError):
    """The scheduler's store could not be reached in time; the call did not take effect."""


class OutcomeUnknown(SchedulerUnavailable):
    """A write was sent to the store but no reply came in time: it may or may not have taken
    effect. A write that reaches the store after its caller gave up applies nothing (it is
    fenced by the store's time), so calling again (``exists``, ``get``, or the same call) tells
    where things stand; ``SchedulerUnavailable`` alone means that nothing was sent or nothing
    applied."""


class MalformedDocument(FlowschedError, ValueError):
    """A stored document that is not a valid item; ``reason`` says which field and why."""

    def __init__(self, item_id: object, reason: str) -> None:
        super().__init__(f"malformed schedule document {item_id!r}: {reason}")
        self.item_id = item_id
        self.reason = reason


class FlowDefinitionError(FlowschedError, ValueError):
    """A flow definition is inconsistent; the message names the flow and what is wrong."""


class UnknownFlowError(FlowschedError, KeyError):
    """No flow definition or no instance by that name/id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class FlowAlreadyExistsError(FlowschedError, ValueError):
    """An instance with this flow id is already stored."""


class ConcurrentUpdateError(FlowschedError, RuntimeError):
    """The instance changed since it was loaded; reload and decide again."""


class TimerAheadOfInstanceError(FlowschedError, RuntimeError):
    """A timer fired for a state entry the stored instance has not reached yet: another node
    scheduled it and has not stored its decision yet. Raised so the scheduler redelivers it
    (at most ``flowsched.flow.domain.EARLY_TIMER_REDELIVERIES`` times)."""
