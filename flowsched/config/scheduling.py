"""Internal: ``SchedulingConfig``, the scheduling settings of an ``application.conf``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from pyhocon import ConfigTree

from flowsched.backoff import BackoffType, RetryPolicy
from flowsched.config.compiler import Compiled, ProcessingTimeKey, compile_tree
from flowsched.config.explain import Explanation, explain
from flowsched.config.hocon import load_hocon, parse_hocon
from flowsched.config.keys import ActionType
from flowsched.config.policies import ActionPolicy, ProcessingTimePolicy
from flowsched.config.resolution import DEFAULTS, ActionKey, Triple
from flowsched.errors import ConfigError, ConfigProblem

__all__ = ["SchedulingConfig"]

_CACHE_LIMIT = 100_000  # distinct (flow, state, action) look-ups kept; past it, resolve anew
_FIELDS = {
    ActionType.MAX_RETRIES: "max_retries",
    ActionType.INITIAL_RETRY_INTERVAL: "initial_interval",
    ActionType.BACKOFF_TYPE: "backoff_type",
    ActionType.CUSTOM_BACKOFFS: "custom_backoffs",
    ActionType.JITTER_ENABLED: "jitter_enabled",
    ActionType.JITTER_FACTOR: "jitter_factor",
}
"""The RetryPolicy field each retry type sets."""


class SchedulingConfig:
    """Action timeouts, retries and processing times, resolved by per-type precedence.

    Build it with :meth:`from_file`, :meth:`from_string` or :meth:`from_tree`. Loading
    validates everything and raises one :class:`ConfigError` listing every problem (wrong
    types, negative values, unknown backoff types, USER_DEFINED without custom-backoffs,
    near-miss keys such as ``timeout-duraton``). With ``strict=False`` near-miss keys are
    kept in :attr:`warnings` instead; invalid values still raise.

    Look-ups never scan the keys: they are indexed on load, and resolved policies are cached.
    Instances are immutable and safe to share between threads.

    >>> config = SchedulingConfig.from_string("Any.Any.Any.max-retries = 2")
    >>> config.action("Payments", "Validating", "Validate").retry.max_retries
    2
    """

    def __init__(self, compiled: Compiled, *, strict: bool = True) -> None:
        """Prefer the ``from_*`` constructors; this one takes an already compiled tree."""
        fatal = compiled.errors + (compiled.key_problems if strict else ())
        if fatal:
            # Report everything found, near-misses included, even when not strict.
            raise ConfigError(compiled.errors + compiled.key_problems)
        self._compiled = compiled
        self._cache: dict[Triple, ActionPolicy] = {}
        self._by_matches: dict[tuple[Triple, ...], tuple[timedelta | None, RetryPolicy]] = {}
        self._retry_policies: dict[tuple[Any, ...], RetryPolicy] = {}
        self.warnings: tuple[ConfigProblem, ...] = () if strict else compiled.key_problems
        """Near-miss keys found when loaded with ``strict=False`` (empty otherwise)."""
        by_source: dict[tuple[str, str], dict[str, ProcessingTimePolicy]] = {}
        for (flow, source, destination), policy in compiled.processing.items():
            by_source.setdefault((flow, source), {})[destination] = policy
        self._by_source = {k: MappingProxyType(v) for k, v in by_source.items()}

    @classmethod
    def from_string(
        cls, text: str, *, strict: bool = True, basedir: str | None = None
    ) -> SchedulingConfig:
        """Load from HOCON text (``include`` paths are relative to ``basedir``)."""
        return cls(compile_tree(parse_hocon(text, basedir=basedir)), strict=strict)

    @classmethod
    def from_file(cls, path: str | Path, *, strict: bool = True) -> SchedulingConfig:
        """Load from a HOCON file; ``OSError`` if it cannot be read."""
        return cls(compile_tree(load_hocon(path)), strict=strict)

    @classmethod
    def from_tree(cls, tree: ConfigTree, *, strict: bool = True) -> SchedulingConfig:
        """Load from a tree pyhocon has already parsed (e.g. your whole ``application.conf``).

        pyhocon truncates nanosecond literals while parsing (``5ns`` arrives as 0): parse with
        :func:`flowsched.config.parse_hocon` to keep them.
        """
        return cls(compile_tree(tree), strict=strict)

    @classmethod
    def empty(cls) -> SchedulingConfig:
        """No keys at all: every action gets the defaults, no processing times."""
        return cls.from_string("")

    def action(self, flow: str, state: str, action: str) -> ActionPolicy:
        """The timeout and retry policy for ``action`` in ``state`` of ``flow``.

        Each type comes from the most specific key that sets it (see :meth:`explain`),
        else its default: no timeout, no retries, EXPONENTIAL from 1 s, jitter 0.2.
        """
        triple = (flow, state, action)
        policy = self._cache.get(triple)
        if policy is None:
            policy = self._resolve(flow, state, action)
            if len(self._cache) < _CACHE_LIMIT:
                self._cache[triple] = policy
        return policy

    def processing_time(
        self, flow: str, source: str, destination: str
    ) -> ProcessingTimePolicy | None:
        """The processing-time limit from ``source`` to ``destination``, if configured."""
        return self._compiled.processing.get((flow, source, destination))

    def processing_times_from(self, flow: str, source: str) -> Mapping[str, ProcessingTimePolicy]:
        """Every processing-time limit that starts at ``source``, keyed by destination."""
        return self._by_source.get((flow, source), MappingProxyType({}))

    def explain(self, flow: str, state: str, action: str) -> Explanation:
        """For each type: its value, the key that won (or ``default``), the shadowed keys."""
        return explain(self._compiled.actions, flow, state, action)

    def action_keys(self) -> tuple[ActionKey, ...]:
        """Every configured action key (``Any`` included), in file order."""
        return self._compiled.action_keys

    def processing_time_keys(self) -> tuple[ProcessingTimeKey, ...]:
        """Every configured processing-time key, in file order."""
        return self._compiled.processing_keys

    def _resolve(self, flow: str, state: str, action: str) -> ActionPolicy:
        index = self._compiled.actions
        matches = index.matches(flow, state, action)
        # Actions matched by the same configured triples resolve alike: build that once.
        resolved = self._by_matches.get(matches)
        if resolved is None:
            resolved = self._settings(index.winners_of(matches))
            if len(self._by_matches) < _CACHE_LIMIT:
                self._by_matches[matches] = resolved
        return ActionPolicy.resolved(flow, state, action, *resolved)

    def _settings(self, won: dict[ActionType, ActionKey]) -> tuple[timedelta | None, RetryPolicy]:
        found = won.get(ActionType.TIMEOUT_DURATION)
        timeout = cast(timedelta, found.value) if found else None
        fields: dict[str, Any] = {
            _FIELDS[kind]: won[kind].value if kind in won else DEFAULTS[kind] for kind in _FIELDS
        }
        # A file has few distinct retry settings: actions that resolve to equal values share
        # one RetryPolicy (the first look-up of an action is on the flow's hot path).
        values = tuple(fields.values())
        policy = self._retry_policies.get(values)
        if policy is None:
            # Every value was parsed and validated when the file was loaded; only the
            # combination is new, so check that alone and skip per-field validation.
            if fields["backoff_type"] is BackoffType.USER_DEFINED and not fields["custom_backoffs"]:
                RetryPolicy(**fields)  # raises, naming what is missing
            policy = RetryPolicy.model_construct(**fields)
            if len(self._retry_policies) < _CACHE_LIMIT:
                self._retry_policies[values] = policy
        return timeout, policy
