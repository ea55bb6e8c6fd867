"""Internal: one running flow — its state, since when, its offsets and the timers it waits on.

A :class:`FlowInstance` is an immutable value; every change makes a new one. Stores keep it as
a JSON document (:meth:`FlowInstance.to_document`); datetimes are ISO-8601 strings so that
microseconds survive any store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from flowsched.clock import ensure_utc

__all__ = ["ActionRun", "FlowInstance", "Offsets", "PendingDeadline", "json_object"]

_NO_DATA: Mapping[str, Any] = MappingProxyType({})


class Offsets(Mapping[str, datetime]):
    """A read-only ``{name: time}`` map kept in one flat tuple ``(name, time, name, time,
    ...)``: an instance has a handful of offsets, and a dict behind a read-only proxy costs
    twice the memory (224 bytes for one offset, against 112), on every waiting instance.

    >>> from datetime import UTC, datetime
    >>> offsets = Offsets([("Accepted", datetime(2026, 1, 1, tzinfo=UTC))])
    >>> offsets.with_time("Checking", datetime(2026, 1, 2, tzinfo=UTC))["Checking"].day
    2
    """

    __slots__ = ("_flat",)

    def __init__(self, items: Iterable[tuple[str, datetime]] = ()) -> None:
        self._flat: tuple[str | datetime, ...] = tuple(x for pair in items for x in pair)

    def with_time(self, name: str, when: datetime) -> Offsets:
        """A copy with ``name`` at ``when`` (in place if present, else added last)."""
        flat = self._flat
        for i in range(0, len(flat), 2):
            if flat[i] == name:
                changed = (*flat[: i + 1], when, *flat[i + 2 :])
                break
        else:
            changed = (*flat, name, when)
        copy: Offsets = object.__new__(Offsets)
        copy._flat = changed
        return copy

    def __getitem__(self, name: str) -> datetime:
        flat = self._flat
        for i in range(0, len(flat), 2):
            if flat[i] == name:
                when = flat[i + 1]
                assert isinstance(when, datetime)
                return when
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._flat[::2])  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._flat) // 2

    def __repr__(self) -> str:
        return f"Offsets({dict(self)!r})"


@dataclass(frozen=True, slots=True)
class ActionRun:
    """An action invoked on entering the current state: ``attempts`` invocations so far,
    ``deadline`` its timeout (``None``: no timeout configured)."""

    action: str
    attempts: int
    first_at: datetime
    deadline: datetime | None = None
    completed: bool = False
    timed_out: bool = False

    @property
    def waiting(self) -> bool:
        """Still waiting for a completing response (retries and timeout apply)."""
        return not (self.completed or self.timed_out)


@dataclass(frozen=True, slots=True)
class PendingDeadline:
    """A processing-time deadline from ``source`` to ``destination``, due at ``due``."""

    item_id: str
    source: str
    destination: str
    due: datetime
    entry: int


@dataclass(frozen=True, slots=True)
class FlowInstance:
    """The persisted state of one flow instance.

    ``entry`` counts state entries (1 for the initial state); timers carry it, so a timer
    set in an earlier visit of a state is recognised as stale. ``version`` is the store's
    optimistic-concurrency counter (0 until first stored).
    """

    flow_id: str
    flow: str
    state: str
    entry: int
    entered_at: datetime
    offsets: Mapping[str, datetime]
    data: Mapping[str, Any] = field(default_factory=dict)
    actions: tuple[ActionRun, ...] = ()
    deadlines: tuple[PendingDeadline, ...] = ()
    finished: bool = False
    version: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", Offsets(self.offsets.items()))
        # Most instances carry no data: they share one empty read-only mapping.
        object.__setattr__(
            self, "data", MappingProxyType(dict(self.data)) if self.data else _NO_DATA
        )

    def run(self, action: str) -> ActionRun | None:
        """The current state's run of ``action``, if it invoked one."""
        return next((r for r in self.actions if r.action == action), None)

    def with_run(self, run: ActionRun) -> FlowInstance:
        """A copy with ``run`` replacing the run of the same action."""
        return self.evolve(actions=self.runs_with(run))

    def runs_with(self, run: ActionRun) -> tuple[ActionRun, ...]:
        """The actions with ``run`` replacing the run of the same action."""
        return tuple(run if r.action == run.action else r for r in self.actions)

    def evolve(self, **changes: Any) -> FlowInstance:
        """A copy with ``changes`` (field names), not validated again: for the domain, whose
        values are already checked (``offsets`` and ``data`` must be read-only mappings).
        ``dataclasses.replace`` validates and copies the mappings again, five times slower."""
        copy: FlowInstance = _new_object(FlowInstance)
        get = changes.get
        _set_flow_id(copy, get("flow_id", self.flow_id))
        _set_flow(copy, get("flow", self.flow))
        _set_state(copy, get("state", self.state))
        _set_entry(copy, get("entry", self.entry))
        _set_entered_at(copy, get("entered_at", self.entered_at))
        _set_offsets(copy, get("offsets", self.offsets))
        _set_data(copy, get("data", self.data))
        _set_actions(copy, get("actions", self.actions))
        _set_deadlines(copy, get("deadlines", self.deadlines))
        _set_finished(copy, get("finished", self.finished))
        _set_version(copy, get("version", self.version))
        return copy

    def to_document(self) -> dict[str, Any]:
        """A JSON-compatible dict (the store adds its own id and version fields)."""
        return {
            "flow_id": self.flow_id,
            "flow": self.flow,
            "state": self.state,
            "entry": self.entry,
            "entered_at": self.entered_at.isoformat(),
            "offsets": {k: v.isoformat() for k, v in self.offsets.items()},
            "data": json.loads(json.dumps(dict(self.data))),
            "actions": [_run_doc(r) for r in self.actions],
            "deadlines": [_deadline_doc(d) for d in self.deadlines],
            "finished": self.finished,
            "version": self.version,
        }

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> FlowInstance:
        """The inverse of :meth:`to_document` (extra keys, such as ``_id``, are ignored)."""
        return cls(
            flow_id=doc["flow_id"],
            flow=doc["flow"],
            state=doc["state"],
            entry=int(doc["entry"]),
            entered_at=_time(doc["entered_at"]),
            offsets={k: _time(v) for k, v in doc["offsets"].items()},
            data=doc.get("data") or {},
            actions=tuple(_run(r) for r in doc.get("actions", ())),
            deadlines=tuple(_deadline(d) for d in doc.get("deadlines", ())),
            finished=bool(doc.get("finished", False)),
            version=int(doc.get("version", 0)),
        )


_new_object = object.__new__
_SETTERS = {name: FlowInstance.__dict__[name].__set__ for name in FlowInstance.__dataclass_fields__}
(
    _set_flow_id,
    _set_flow,
    _set_state,
    _set_entry,
    _set_entered_at,
    _set_offsets,
    _set_data,
    _set_actions,
    _set_deadlines,
    _set_finished,
    _set_version,
) = (
    _SETTERS[name]
    for name in (
        "flow_id",
        "flow",
        "state",
        "entry",
        "entered_at",
        "offsets",
        "data",
        "actions",
        "deadlines",
        "finished",
        "version",
    )
)


def json_object(data: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """A private copy of ``data`` if it is a JSON object; ``ValueError`` naming ``what``."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} must be a JSON object (dict), got {type(data).__name__}")
    try:
        copied: dict[str, Any] = json.loads(json.dumps(dict(data), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be JSON-serialisable (ids, not objects): {exc}") from None
    return copied


def _time(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return ensure_utc(value)
    return ensure_utc(datetime.fromisoformat(value))


def _opt_time(value: str | None) -> datetime | None:
    return None if value is None else _time(value)


def _run_doc(run: ActionRun) -> dict[str, Any]:
    return {
        "action": run.action,
        "attempts": run.attempts,
        "first_at": run.first_at.isoformat(),
        "deadline": None if run.deadline is None else run.deadline.isoformat(),
        "completed": run.completed,
        "timed_out": run.timed_out,
    }


def _run(doc: Mapping[str, Any]) -> ActionRun:
    return ActionRun(
        action=doc["action"],
        attempts=int(doc["attempts"]),
        first_at=_time(doc["first_at"]),
        deadline=_opt_time(doc.get("deadline")),
        completed=bool(doc.get("completed", False)),
        timed_out=bool(doc.get("timed_out", False)),
    )


def _deadline_doc(deadline: PendingDeadline) -> dict[str, Any]:
    return {
        "item_id": deadline.item_id,
        "source": deadline.source,
        "destination": deadline.destination,
        "due": deadline.due.isoformat(),
        "entry": deadline.entry,
    }


def _deadline(doc: Mapping[str, Any]) -> PendingDeadline:
    return PendingDeadline(
        item_id=doc["item_id"],
        source=doc["source"],
        destination=doc["destination"],
        due=_time(doc["due"]),
        entry=int(doc["entry"]),
    )


def change_in_place(instance: FlowInstance, changes: Mapping[str, Any]) -> None:
    """Set fields of an instance nobody else holds yet (a decision's private working copy, see
    :meth:`~flowsched.flow.decision.Decision.change`): one copy per decision, not one per field."""
    for name, value in changes.items():
        _SETTERS[name](instance, value)
