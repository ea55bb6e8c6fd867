"""Internal: what the state-machine integrations share - timer ids, payloads, entry tokens,
durations and the ``application.conf`` override.

A machine's timeout is one flowsched ``TIMER`` per (machine name, model id, state): id
``"<name>:<model id>:<state>"`` (each part with ``%``, ``:`` and ``#`` escaped), addressed to
the handler ``<name>``, its payload naming the model, the state and the *entry token* of the
state entry that armed it. Entering the state again replaces the timer (same id, new token);
leaving it cancels it. When a timer fires, the machine acts only if the model is still in
that state *and* in that entry (the token matches): a late or stale timer does nothing.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flowsched import (
    AsyncSchedulerPort,
    SchedulerPort,
    SchedulingConfig,
    Undeliverable,
    parse_duration,
)

__all__ = [
    "ANY_ACTION",
    "MAX_TIMEOUT",
    "EntryTokens",
    "TimerAddress",
    "check_scheduler_face",
    "is_async_scheduler",
    "configured_timeout",
    "id_part",
    "missing",
    "timeout_delta",
]

ANY_ACTION = "Any"
"""The action part of a machine's config keys: ``<name>.<State>.Any.timeout-duration``."""


MAX_TIMEOUT = timedelta(days=365_250)
"""The longest state timeout: 1,000 years. A longer one (up to ``timedelta``'s 2.7 million
years) could never be scheduled, and would fail in the middle of the transition that enters
its state rather than when the state is built."""
_MAX_TEXT = "the longest a state timeout can be (1,000 years)"


_SHORTEST = timedelta(microseconds=1)


def timeout_delta(value: object, what: str) -> timedelta | None:
    """A state's ``timeout`` as a ``timedelta`` (``None`` or zero: no timeout).

    A number is **seconds**, as in transitions' ``Timeout`` and python-statemachine's
    ``timeout``; a string is a HOCON duration (``"30s"``, ``"5 minutes"``; a string of digits
    is milliseconds, as everywhere in HOCON); a ``timedelta`` passes through."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{what}: a boolean is not a timeout (got {value!r})")
    if isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{what}: timeout must be a finite number of seconds (got {value!r})")
        if value < 0:
            raise ValueError(f"{what}: timeout cannot be negative (got {value!r})")
        if value > MAX_TIMEOUT.total_seconds():
            raise ValueError(f"{what}: timeout of {value!r} s is over {_MAX_TEXT}")
        # A positive timeout under timedelta's microsecond is the shortest one, not none.
        delta = max(timedelta(seconds=value), _SHORTEST) if value > 0 else timedelta(0)
    elif isinstance(value, str | timedelta):
        delta = parse_duration(value, what)
    else:
        raise TypeError(
            f"{what}: timeout must be seconds (a number), a HOCON duration string or a "
            f"timedelta (got {type(value).__name__}: {value!r})"
        )
    if delta > MAX_TIMEOUT:
        raise ValueError(f"{what}: timeout of {delta} is over {_MAX_TEXT}")
    return delta if delta > timedelta(0) else None


def configured_timeout(config: SchedulingConfig | None, name: str, state: str) -> timedelta | None:
    """``<name>.<state>.Any.timeout-duration`` resolved with the usual ``Any`` precedence
    (``Any.<state>.Any``, ``<name>.Any.Any``, ``Any.Any.Any``), or ``None`` if no key sets it."""
    if config is None:
        return None
    return config.action(name, state, ANY_ACTION).timeout


_ESCAPES = str.maketrans({"%": "%25", ":": "%3A", "#": "%23"})


def id_part(text: str) -> str:
    """``text`` as one part of a timer id: ``%``, ``:`` (the parts' separator) and ``#`` (the
    separator of a state's further timeouts) escaped as in a URL."""
    return text.translate(_ESCAPES)


@dataclass(frozen=True, slots=True)
class TimerAddress:
    """Where one machine's timers go: the handler ``name`` and the ids built from it."""

    name: str

    def timer_id(self, owner: str, state: str) -> str:
        """``"<name>:<model id>:<state>"``: one timer per model and state. Each part has its
        ``%``, ``:`` and ``#`` written as ``%25``, ``%3A`` and ``%23`` (:func:`id_part`), so
        two (name, model, state) triples never share an id (``"A:x" + "1"`` and ``"A" +
        "x:1"`` did); a part without them reads as it is."""
        return f"{id_part(self.name)}:{id_part(owner)}:{id_part(state)}"

    @staticmethod
    def payload(owner: str, state: str, entry: str) -> dict[str, Any]:
        """The timer's payload: ids and the entry token only (never model data)."""
        return {"model": owner, "state": state, "entry": entry}

    @staticmethod
    def read(payload: Mapping[str, Any] | None, item_id: str) -> tuple[str, str, str]:
        """``(model id, state, entry token)`` from a payload; :class:`Undeliverable` if it is
        not one of ours (retrying would not change it)."""
        try:
            assert payload is not None
            owner, state, entry = payload["model"], payload["state"], payload["entry"]
        except (AssertionError, KeyError, TypeError):
            raise Undeliverable(
                f"timer {item_id!r}: payload {payload!r} is not a state-machine timeout "
                "(expected model, state and entry)"
            ) from None
        if not all(isinstance(part, str) for part in (owner, state, entry)):
            raise Undeliverable(f"timer {item_id!r}: payload {payload!r} has non-text parts")
        return owner, state, entry


class EntryTokens:
    """Entry tokens unique across processes and restarts: a random prefix drawn once per
    machine, then a counter (cheap: no randomness per entry)."""

    def __init__(self) -> None:
        self._prefix = os.urandom(6).hex()
        self._counter = itertools.count(1)

    def next(self) -> str:
        """A token no other entry of any machine has."""
        return f"{self._prefix}.{next(self._counter)}"


def missing(owner: str, name: str, how: str) -> Undeliverable:
    """The dead-letter reason for a timer whose model cannot be found."""
    return Undeliverable(f"machine {name!r}: model {owner!r} not found ({how})")


def is_async_scheduler(scheduler: Any) -> bool:
    """Whether ``scheduler`` has the async face: an :class:`~flowsched.AsyncSchedulerPort`
    (CONTRACT section 11: ``AsyncInMemoryScheduler``, ``AsyncMongoScheduler``)."""
    return isinstance(scheduler, AsyncSchedulerPort)


def check_scheduler_face(scheduler: Any, want_async: bool, cls: str, other: str) -> None:
    """``TypeError`` unless ``scheduler`` is a scheduler of the right face: an
    ``AsyncSchedulerPort`` for the async machines, a ``SchedulerPort`` for the others."""
    is_async = is_async_scheduler(scheduler)
    if not is_async and not isinstance(scheduler, SchedulerPort):
        raise TypeError(
            f"{cls}: scheduler must be a flowsched SchedulerPort or AsyncSchedulerPort "
            f"(got {type(scheduler).__name__}: {scheduler!r})"
        )
    if is_async != want_async:
        face = "an async" if is_async else "a synchronous"
        raise TypeError(
            f"{cls}: {type(scheduler).__name__} is {face} scheduler; use {other} with it"
        )
