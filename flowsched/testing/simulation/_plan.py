"""Internal: which faults a simulation may meet (:class:`Faults`) and the plan of events one
seed draws from them (:func:`draw_plan`): schedules, replaces and cancels from clients,
kills, pauses, outages, lost replies, clock skews and steps, duplicate wake-ups.

A plan is a list of frozen events in time order; shrinking a failing seed drops events from
it, and ``--keep`` replays a subset. Handler behaviour (latency, failure, a race from inside
the handler) is not in the plan: it is drawn per run from its own RNG, keyed by the seed and
the run, so that dropping an event does not reshuffle every later decision.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields, replace
from typing import ClassVar

__all__ = [
    "Cancel",
    "Event",
    "Faults",
    "Kill",
    "Lossy",
    "Outage",
    "Pause",
    "Schedule",
    "Settings",
    "Skew",
    "Slow",
    "Wakeup",
    "draw_plan",
    "fault_end",
]


@dataclass(frozen=True, slots=True)
class Faults:
    """The kinds of fault a simulation may inject (all on by default).

    * ``kill``: a node stops for good, mid-handler, without closing (its claims lapse);
    * ``pause``: a node stops mid-handler for longer than the lease, then resumes;
    * ``outage``: every database operation fails (a transient error) for a while;
    * ``lost_replies``: writes apply but their reply is lost (a transient error after it);
    * ``slow_replies``: replies that arrive up to 2 s after the operation applied (other
      nodes run meanwhile);
    * ``duplicate_wakeups``: a node is woken again for nothing (what a duplicate
      change-stream event does: one more sweep);
    * ``races``: ``schedule``/``cancel`` of an item from another node, or from inside a
      handler (on the handler's node or another), replacing or cancelling claimed items;
    * ``skew``: a node's clock is off from the database's by up to two leases;
    * ``clock_steps``: a node's clock jumps (forwards or backwards) while it runs;
    * ``slow_handlers``: handlers that outlive their lease (renewed while they run);
    * ``starved_renewals``: such a handler holds the GIL: no lease renewal while it runs;
    * ``handler_failures``: handlers that raise (redelivered with backoff);
    * ``recurring``: some timers are recurring (``Recurrence.every``).

    >>> Faults.parse("all,-skew,-clock_steps").skew
    False
    """

    kill: bool = True
    pause: bool = True
    outage: bool = True
    lost_replies: bool = True
    slow_replies: bool = True
    duplicate_wakeups: bool = True
    races: bool = True
    skew: bool = True
    clock_steps: bool = True
    slow_handlers: bool = True
    starved_renewals: bool = True
    handler_failures: bool = True
    recurring: bool = True

    NAMES: ClassVar[tuple[str, ...]] = (
        "kill",
        "pause",
        "outage",
        "lost_replies",
        "slow_replies",
        "duplicate_wakeups",
        "races",
        "skew",
        "clock_steps",
        "slow_handlers",
        "starved_renewals",
        "handler_failures",
        "recurring",
    )

    @classmethod
    def none(cls) -> Faults:
        """No faults at all: nodes, timers and clean handlers only."""
        return cls(**dict.fromkeys(cls.NAMES, False))

    @classmethod
    def parse(cls, text: str) -> Faults:
        """Faults from a comma-separated list: names, ``all``, ``none``, ``-name`` to turn one
        off (``"all,-skew"``; ``"kill,outage"`` is only those two). ``ValueError`` names an
        unknown word."""
        faults = cls.none()
        for word in (w.strip() for w in text.split(",")):
            if not word:
                raise ValueError(f"faults {text!r}: an empty name between commas")
            if word in ("all", "none"):
                faults = cls() if word == "all" else cls.none()
                continue
            name = word.lstrip("+-").replace("-", "_")
            if name not in cls.NAMES:
                raise ValueError(
                    f"unknown fault {word!r}: expected all, none or some of "
                    f"{', '.join(cls.NAMES)} (a leading '-' turns one off)"
                )
            faults = replace(faults, **{name: not word.startswith("-")})
        return faults

    def names(self) -> list[str]:
        """The faults turned on, in :attr:`NAMES` order."""
        return [f.name for f in fields(self) if getattr(self, f.name)]

    def spec(self) -> str:
        """The text :meth:`parse` reads back into these faults."""
        on = self.names()
        if len(on) == len(self.NAMES):
            return "all"
        return ",".join(on) if on else "none"


@dataclass(frozen=True, slots=True)
class Settings:
    """The simulated cluster's settings, in seconds of virtual time."""

    nodes: int = 3
    timers: int = 12
    lease: float = 9.0
    poll: float = 3.0
    batch: int = 5
    horizon: float = 24.0
    """Client operations and faults happen before this; then the quiet phase drains."""
    drain: float = 90.0
    """The longest the quiet phase runs before 'every item delivered' is judged."""


@dataclass(frozen=True, slots=True)
class Event:
    """One planned event at ``at`` seconds of virtual time."""

    at: float

    def describe(self) -> str:
        return type(self).__name__.lower()


@dataclass(frozen=True, slots=True)
class Schedule(Event):
    """A client schedules (or replaces) ``item`` on node ``via``, due ``due_in`` s later."""

    via: int
    item: str
    due_in: float
    every: float | None = None

    def describe(self) -> str:
        every = f" every {self.every:g}s" if self.every else ""
        return f"schedule {self.item} via n{self.via} due +{self.due_in:g}s{every}"


@dataclass(frozen=True, slots=True)
class Cancel(Event):
    """A client cancels ``item`` on node ``via``."""

    via: int
    item: str

    def describe(self) -> str:
        return f"cancel {self.item} via n{self.via}"


@dataclass(frozen=True, slots=True)
class Kill(Event):
    """Node ``node`` dies at its next handler start (mid-handler), or idle 5 s after ``at``."""

    node: int

    def describe(self) -> str:
        return f"kill n{self.node}"


@dataclass(frozen=True, slots=True)
class Pause(Event):
    """Node ``node`` stops for ``seconds`` at its next handler start (or idle at ``at + 5``)."""

    node: int
    seconds: float

    def describe(self) -> str:
        return f"pause n{self.node} for {self.seconds:g}s"


@dataclass(frozen=True, slots=True)
class Outage(Event):
    """Every database operation fails for ``seconds``."""

    seconds: float

    def describe(self) -> str:
        return f"outage for {self.seconds:g}s"


@dataclass(frozen=True, slots=True)
class Lossy(Event):
    """For ``seconds``, about half the writes apply but lose their reply."""

    seconds: float

    def describe(self) -> str:
        return f"lost replies for {self.seconds:g}s"


@dataclass(frozen=True, slots=True)
class Slow(Event):
    """For ``seconds``, a third of the replies arrive late (0.1 to 2 s after applying)."""

    seconds: float

    def describe(self) -> str:
        return f"slow replies for {self.seconds:g}s"


@dataclass(frozen=True, slots=True)
class Skew(Event):
    """Node ``node``'s clock is set ``seconds`` off the database's (at 0: from the start)."""

    node: int
    seconds: float

    def describe(self) -> str:
        return f"clock of n{self.node} at {self.seconds:+g}s"


@dataclass(frozen=True, slots=True)
class Wakeup(Event):
    """Node ``node`` is woken for nothing (a duplicate change-stream event): one more sweep."""

    node: int

    def describe(self) -> str:
        return f"duplicate wake-up of n{self.node}"


def _ms(seconds: float) -> float:
    """Whole milliseconds (BSON dates are): so no truncation makes a lease end early."""
    return round(seconds, 3)


def draw_plan(rng: random.Random, settings: Settings, faults: Faults) -> list[Event]:
    """The events of one seed, in time order (ties keep the order they were drawn in)."""
    nodes, horizon, lease = settings.nodes, settings.horizon, settings.lease
    plan: list[Event] = []

    def at(low: float = 0.0, high: float = horizon) -> float:
        return _ms(rng.uniform(low, high))

    # Timers in bursts, due close together, so that batches hold several items (a pause or
    # a race then meets claims queued behind a running handler).
    bursts = [rng.uniform(0, horizon / 2) for _ in range(2)]
    for n in range(settings.timers):
        every = None
        if faults.recurring and rng.random() < 0.2:
            every = _ms(rng.uniform(2, 2 * settings.lease))
        due = _ms(rng.choice((0.0, rng.uniform(0, 3), rng.uniform(0, 12))))
        start = rng.choice(bursts) + rng.uniform(0, 1)
        plan.append(Schedule(_ms(start), rng.randrange(nodes), f"t{n}", due, every))
    if faults.races:
        for _ in range(max(1, settings.timers // 3)):
            item = f"t{rng.randrange(settings.timers)}"
            if rng.random() < 0.5:
                plan.append(Cancel(at(), rng.randrange(nodes), item))
            else:
                plan.append(Schedule(at(), rng.randrange(nodes), item, _ms(rng.uniform(0, 6))))
    if faults.kill and nodes > 1 and rng.random() < 0.5:
        plan.append(Kill(at(1, 0.7 * horizon), rng.randrange(nodes)))
    if faults.pause:
        for _ in range(rng.choice((0, 1, 1, 2))):
            pause = _ms(rng.uniform(1.2, 3) * lease)
            plan.append(Pause(at(0, 0.7 * horizon), rng.randrange(nodes), pause))
    if faults.outage and rng.random() < 0.5:
        plan.append(Outage(at(), _ms(rng.uniform(0.5, 2 * lease))))
    if faults.lost_replies and rng.random() < 0.5:
        plan.append(Lossy(at(), _ms(rng.uniform(1, 8))))
    if faults.slow_replies and rng.random() < 0.5:
        plan.append(Slow(at(), _ms(rng.uniform(2, 10))))
    if faults.skew and rng.random() < 0.6:
        plan.append(Skew(0.0, rng.randrange(nodes), _ms(rng.uniform(-2, 2) * lease)))
    if faults.clock_steps and rng.random() < 0.4:
        plan.append(Skew(at(2), rng.randrange(nodes), _ms(rng.uniform(-2, 2) * lease)))
    if faults.duplicate_wakeups:
        for _ in range(rng.randrange(4)):
            plan.append(Wakeup(at(), rng.randrange(nodes)))
    plan.sort(key=lambda event: event.at)
    return plan


def fault_end(event: Event) -> float:
    """When an event's fault is over (its start for the others)."""
    if isinstance(event, Outage | Lossy | Slow):
        return event.at + event.seconds
    if isinstance(event, Pause):
        return event.at + 5 + event.seconds
    if isinstance(event, Kill):
        return event.at + 5
    return event.at
