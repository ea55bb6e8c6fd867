"""Scheduling configuration: HOCON keys, precedence resolution, processing times, explain.

Pure policy: imports nothing of flowsched but durations, backoff and errors.

The modules, in the order a file meets them:

* ``hocon`` - reads HOCON (pyhocon), flattens it to keys; ``locations`` - the line of each key.
* ``ownership`` - which keys of a file are ours; ``keys`` - the names of our key types;
  ``suggest`` - "did you mean" for near misses.
* ``compiler`` - the parsed tree to validated, indexed keys and the problems found.
* ``resolution`` - per-type resolution over the eight precedence levels; ``explain`` - which
  key won and which were shadowed; ``policies`` - ``ActionPolicy``, ``ProcessingTimePolicy``.
* ``scheduler_settings`` - the schedulers' own ``ipf-scheduler`` block and its bounds.
* ``scheduling_config`` - ``SchedulingConfig``, which ties them together.
"""

from typing import TYPE_CHECKING, Any

from flowsched.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from flowsched.config.compiler import ProcessingTimeKey
    from flowsched.config.explain import Explanation, TypeExplanation
    from flowsched.config.hocon import load_hocon, parse_hocon
    from flowsched.config.keys import ANY, ActionType, KeyForm, ProcessingType
    from flowsched.config.ownership import RootProblem
    from flowsched.config.policies import ActionPolicy, ProcessingTimePolicy
    from flowsched.config.resolution import DEFAULTS, ActionKey, precedence
    from flowsched.config.scheduler_settings import SchedulerSettings
    from flowsched.config.scheduling_config import SchedulingConfig

# Loaded when first asked for (PEP 562): the schedulers read their limits from
# ``scheduler_settings`` without pulling in pyhocon and pydantic through this package.
_LAZY = {
    "ProcessingTimeKey": "compiler",
    "Explanation": "explain",
    "TypeExplanation": "explain",
    "load_hocon": "hocon",
    "parse_hocon": "hocon",
    "ANY": "keys",
    "ActionType": "keys",
    "KeyForm": "keys",
    "ProcessingType": "keys",
    "ActionPolicy": "policies",
    "ProcessingTimePolicy": "policies",
    "DEFAULTS": "resolution",
    "ActionKey": "resolution",
    "precedence": "resolution",
    "SchedulerSettings": "scheduler_settings",
    "SchedulingConfig": "scheduling_config",
    "RootProblem": "ownership",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flowsched.config' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"flowsched.config.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ANY",
    "DEFAULTS",
    "ActionKey",
    "ActionPolicy",
    "ActionType",
    "ConfigError",
    "ConfigProblem",
    "Explanation",
    "KeyForm",
    "ProcessingTimeKey",
    "ProcessingTimePolicy",
    "ProcessingType",
    "RootProblem",
    "SchedulerSettings",
    "SchedulingConfig",
    "TypeExplanation",
    "load_hocon",
    "parse_hocon",
    "precedence",
]
