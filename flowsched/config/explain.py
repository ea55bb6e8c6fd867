"""Internal: why an action got its policy — per type, the winning key and the shadowed ones."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from flowsched.config.keys import ActionType
from flowsched.config.resolution import DEFAULTS, ActionIndex
from flowsched.durations import hocon_text

__all__ = ["Explanation", "TypeExplanation", "explain"]

DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class TypeExplanation:
    """How one type was resolved.

    ``text`` is ``value`` as HOCON text (``none`` for no value). ``key`` is the full key that
    won (``None`` when no key sets the type and the default applies); ``shadowed`` lists the
    other keys that set it for this action, in precedence order (a root key shadowed by the
    same ``ipf.flow.`` key is among them).
    """

    type: ActionType
    value: object
    text: str
    key: str | None
    shadowed: tuple[str, ...]

    @property
    def source(self) -> str:
        """The winning key, or ``"default"``."""
        return self.key if self.key is not None else DEFAULT


@dataclass(frozen=True, slots=True)
class Explanation:
    """The resolution of every type for ``flow.state.action``; ``str()`` prints a table."""

    flow: str
    state: str
    action: str
    types: tuple[TypeExplanation, ...]

    def __getitem__(self, kind: str) -> TypeExplanation:
        """The explanation of one type, by name: ``explanation["max-retries"]``."""
        for row in self.types:
            if row.type == kind:
                return row
        raise KeyError(kind)

    def __str__(self) -> str:
        header = ("type", "value", "from", "shadowed")
        rows = [header] + [
            (row.type.value, row.text, row.source, ", ".join(row.shadowed) or "-")
            for row in self.types
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [f"{self.flow}.{self.state}.{self.action}"]
        for row_ in rows:
            cells = [cell.ljust(width) for cell, width in zip(row_, widths, strict=False)]
            lines.append("  " + "  ".join([*cells, row_[3]]).rstrip())
        return "\n".join(lines)


def explain(index: ActionIndex, flow: str, state: str, action: str) -> Explanation:
    """Explain every type for ``flow.state.action`` from the keys in ``index``."""
    rows = []
    for kind in ActionType:
        found = index.candidates(flow, state, action, kind)
        if found:
            winner, *rest = found
            shadowed = tuple(k.key for k in rest)
            rows.append(
                TypeExplanation(kind, winner.value, _show(winner.value), winner.key, shadowed)
            )
        else:
            default = DEFAULTS[kind]
            rows.append(TypeExplanation(kind, default, _show(default), None, ()))
    return Explanation(flow, state, action, tuple(rows))


def _show(value: object) -> str:
    # The parsed value, so that "1000" shows as the 1s it means.
    if value is None:
        return "none"
    if isinstance(value, Enum):
        return str(value.value)
    return hocon_text(value)
