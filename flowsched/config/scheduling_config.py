"""Internal: ``SchedulingConfig``, the scheduling settings of an ``application.conf``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from pyhocon import ConfigTree

from flowsched.backoff import BackoffType, RetryPolicy
from flowsched.config.compiler import Compiled, ProcessingTimeKey, compile_tree
from flowsched.config.explain import Explanation, explain
from flowsched.config.hocon import parse_hocon, parse_key, read_text
from flowsched.config.keys import ANY, ActionType
from flowsched.config.locations import KeyLines, scan
from flowsched.config.ownership import RootProblem
from flowsched.config.policies import ActionPolicy, ProcessingTimePolicy
from flowsched.config.resolution import DEFAULTS, ActionKey, Triple
from flowsched.config.scheduler_settings import SchedulerSettings
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

    def __init__(
        self,
        compiled: Compiled,
        *,
        strict: bool = True,
        source: str | None = None,
        text: str | None = None,
    ) -> None:
        """Prefer the ``from_*`` constructors; this one takes an already compiled tree.

        ``source`` (a file name) and ``text`` (its content) let problems name the file and
        the line of each key."""
        self.source = source
        """The file this configuration was read from (``None``: a string or a tree)."""
        self._lines: KeyLines | None = scan(text) if source is not None and text else None
        fatal = compiled.errors + (compiled.key_problems if strict else ())
        if fatal:
            # Report everything found, near-misses included, even when not strict - and the
            # root keys `flowsched check` would report (else a bad value hid them there).
            flow_like = tuple(f.problem for f in compiled.root_problems if f.named_like_a_flow)
            raise ConfigError(self.locate(compiled.errors + compiled.key_problems + flow_like))
        self._compiled = compiled
        self._cache: dict[Triple, ActionPolicy] = {}
        self._by_matches: dict[tuple[Triple, ...], tuple[timedelta | None, RetryPolicy]] = {}
        self._retry_policies: dict[tuple[Any, ...], RetryPolicy] = {}
        self.warnings: tuple[ConfigProblem, ...] = (
            () if strict else self.locate(compiled.key_problems)
        )
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
        """Load from a HOCON file; ``OSError`` if it cannot be read. Problems name the file
        and the line of the key (a file that is not UTF-8 is a :class:`ConfigError` too)."""
        source = str(path)
        text = read_text(path)
        tree = parse_hocon(text, basedir=str(Path(path).parent), source=source)
        return cls(compile_tree(tree), strict=strict, source=source, text=text)

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

    def scheduler_settings(self) -> SchedulerSettings:
        """The ``ipf-scheduler`` settings (validated on load, defaults filled in): what
        ``InMemoryScheduler.from_config`` and ``MongoScheduler.from_config`` read."""
        return self._compiled.scheduler

    def root_problems(self) -> tuple[RootProblem, ...]:
        """Root keys that do not fit the flow key forms but may be another library's (their
        last part looks like a type). ``build()`` raises those whose first part is a
        registered flow (or close to one); ``flowsched check`` without flows reports those
        :attr:`~RootProblem.named_like_a_flow`. Each names its file and line when known."""
        return tuple(
            RootProblem(found.flow, self.locate((found.problem,))[0])
            for found in self._compiled.root_problems
        )

    def flow_shaped_keys(self) -> int:
        """How many keys are, or look like, flow keys (valid or not)."""
        return self._compiled.flow_shaped

    def mentions(self, flow: str, state: str, action: str) -> dict[str, bool]:
        """Whether some configured key names ``flow``, ``state``, ``action`` (not as ``Any``):
        ``{"flow": ..., "state": ..., "action": ...}``. A name no key mentions gets only
        wildcard and default settings, which is what a misspelt name gets too."""
        keys = self._compiled.action_keys
        found = {
            "flow": any(k.flow == flow for k in keys)
            or any(k.flow == flow for k in self._compiled.processing_keys),
            "state": any(k.state == state for k in keys)
            or any(state in (k.source, k.destination) for k in self._compiled.processing_keys),
            "action": any(k.action == action for k in keys),
        }
        for part, name in (("flow", flow), ("state", state), ("action", action)):
            found[part] = found[part] or name == ANY
        return found

    def locate(self, problems: tuple[ConfigProblem, ...]) -> tuple[ConfigProblem, ...]:
        """``problems`` with the file and, where its key can be found, the line filled in
        (unchanged when this configuration was not read from a file)."""
        if self.source is None:
            return problems
        return tuple(self._located(problem) for problem in problems)

    def _located(self, problem: ConfigProblem) -> ConfigProblem:
        if problem.source is not None:
            return problem
        line = None
        if problem.key is not None and self._lines is not None:
            line = self._lines.line_of(parse_key(problem.key))
        return replace(problem, source=self.source, line=line)

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
