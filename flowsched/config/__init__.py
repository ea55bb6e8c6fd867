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

from flowsched.config.compiler import ProcessingTimeKey
from flowsched.config.explain import Explanation, TypeExplanation
from flowsched.config.hocon import load_hocon, parse_hocon
from flowsched.config.keys import ANY, ActionType, KeyForm, ProcessingType
from flowsched.config.ownership import RootProblem
from flowsched.config.policies import ActionPolicy, ProcessingTimePolicy
from flowsched.config.resolution import DEFAULTS, ActionKey, precedence
from flowsched.config.scheduler_settings import SchedulerSettings
from flowsched.config.scheduling_config import SchedulingConfig
from flowsched.errors import ConfigError, ConfigProblem

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
