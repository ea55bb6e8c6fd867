"""Internal: per-type resolution of action keys over the eight precedence levels.

For flow ``F``, state ``S``, action ``A`` the candidates, most specific first, are::

    1. F.S.A      2. Any.S.A    3. F.Any.A    4. Any.Any.A
    5. F.S.Any    6. Any.S.Any  7. F.Any.Any  8. Any.Any.Any

(the more specific state beats the more specific flow; the action matters most). Each type is
resolved on its own: the first level that sets *that type* wins it. At one level a key under
``ipf.flow.`` wins over the same key at the root.

Keys are indexed by ``(flow, state, action)`` when the configuration is loaded, so resolving
is eight dictionary look-ups whatever the size of the file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from flowsched.backoff import BackoffType
from flowsched.config.keys import ANY, ActionType, KeyForm

__all__ = ["DEFAULTS", "ActionIndex", "ActionKey", "Triple", "precedence"]

Triple = tuple[str, str, str]

DEFAULTS: Final[dict[ActionType, object]] = {
    ActionType.TIMEOUT_DURATION: None,
    ActionType.INITIAL_RETRY_INTERVAL: timedelta(seconds=1),
    ActionType.MAX_RETRIES: 0,
    ActionType.BACKOFF_TYPE: BackoffType.EXPONENTIAL,
    ActionType.CUSTOM_BACKOFFS: None,
    ActionType.JITTER_ENABLED: True,
    ActionType.JITTER_FACTOR: 0.2,
}
"""The value of each type when no key sets it."""


@dataclass(frozen=True, slots=True)
class ActionKey:
    """One configured, validated action key: ``<flow>.<state>.<action>.<type> = value``.

    ``flow``, ``state`` and ``action`` may be ``Any``. ``key`` is the full key as written
    (with ``ipf.flow.`` for that form), ``value`` the parsed value, ``text`` its HOCON text.
    """

    flow: str
    state: str
    action: str
    type: ActionType
    form: KeyForm
    key: str
    value: object
    text: str

    @property
    def triple(self) -> Triple:
        """``(flow, state, action)``."""
        return (self.flow, self.state, self.action)


def levels(flow: str, state: str, action: str) -> tuple[Triple, ...]:
    """The eight precedence levels for an action, most specific first (the one place they
    are written down): a more specific state beats a more specific flow."""
    return (
        (flow, state, action),
        (ANY, state, action),
        (flow, ANY, action),
        (ANY, ANY, action),
        (flow, state, ANY),
        (ANY, state, ANY),
        (flow, ANY, ANY),
        (ANY, ANY, ANY),
    )


def precedence(flow: str, state: str, action: str) -> list[Triple]:
    """The candidate triples for an action, most specific first, without repeats.

    Repeats happen when a name is itself ``Any`` (explaining ``Any.S.A``).
    """
    return list(dict.fromkeys(levels(flow, state, action)))


class ActionIndex:
    """Action keys indexed by triple and type; answers "which key wins each type"."""

    def __init__(self, keys: Iterable[ActionKey]) -> None:
        by_triple: dict[Triple, dict[ActionType, list[ActionKey]]] = {}
        for key in keys:
            by_triple.setdefault(key.triple, {}).setdefault(key.type, []).append(key)
        # At one level the ipf.flow form comes first: it wins, the root key is shadowed.
        self._keys: dict[Triple, dict[ActionType, tuple[ActionKey, ...]]] = {
            triple: {
                kind: tuple(sorted(found, key=lambda k: k.form is not KeyForm.IPF_FLOW))
                for kind, found in types.items()
            }
            for triple, types in by_triple.items()
        }
        self._winners: dict[Triple, dict[ActionType, ActionKey]] = {
            triple: {kind: found[0] for kind, found in types.items()}
            for triple, types in self._keys.items()
        }

    def triples(self) -> list[Triple]:
        """Every configured ``(flow, state, action)``, wildcards included."""
        return list(self._keys)

    def matches(self, flow: str, state: str, action: str) -> tuple[Triple, ...]:
        """The configured triples that apply to this action, most specific first.

        They alone decide the resolution, so actions with the same matches share it.
        """
        keys = self._keys
        return tuple([triple for triple in levels(flow, state, action) if triple in keys])

    def winners_of(self, matches: tuple[Triple, ...]) -> dict[ActionType, ActionKey]:
        """For each type set by one of ``matches``, the key that wins it."""
        won: dict[ActionType, ActionKey] = {}
        for triple in matches:
            for kind, key in self._winners[triple].items():
                won.setdefault(kind, key)
        return won

    def winners(self, flow: str, state: str, action: str) -> dict[ActionType, ActionKey]:
        """For each type some key sets for this action, the key that wins it."""
        return self.winners_of(self.matches(flow, state, action))

    def candidates(self, flow: str, state: str, action: str, kind: ActionType) -> list[ActionKey]:
        """Every key that sets ``kind`` for this action, the winner first."""
        found: list[ActionKey] = []
        for triple in precedence(flow, state, action):
            found.extend(self._keys.get(triple, {}).get(kind, ()))
        return found
