"""Internal: the schedulers' own settings, from the ``ipf-scheduler`` block of a config.

::

    ipf-scheduler {
      mongodb {                      # IPF's persistent-scheduler settings
        uri = "mongodb://localhost/ipf"
        database-name = "scheduled"
        collection = "timers"        # ours; default "timers"
      }
      postgres {                     # or PostgreSQL (not both)
        url = "postgresql://app@db/app"
        table = "flowsched_timers"   # default "flowsched_timers"
      }
      flowsched {                    # ours: how our schedulers run
        poll-interval = 1s
        lease = 30s
        batch-size = 100
        workers = 8
        op-timeout = 10s
        max-clock-skew = 1s          # a node clock further from the database's is logged
        shutdown-timeout = 30s       # close() waits this long at most for handlers in flight
        redelivery { initial = 3s, maximum = 30s, factor = 2 }
        max-attempts = null          # a whole number >= 1 moves an item to the dead letters
        node-id = null               # default: <host>:<pid>:<random>
        history-limit = 20           # attempts kept per item (history(item_id))
        history-retention = 7d       # how long they are kept after the last one
      }
      calendars {                    # named business calendars (flowsched.config.calendars)
        target2 { timezone = "Europe/Berlin", weekdays-off = [SAT, SUN], holidays = [ECB] }
      }
    }

Every key is validated like a flow key: an unknown or misspelt name, a wrong type or a
negative value is a :class:`~flowsched.ConfigError` naming the key (with the name probably
meant). The adapters' ``from_config`` read the resulting :class:`SchedulerSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from flowsched.config import setting_values
from flowsched.config.hocon import format_key
from flowsched.config.setting_values import (
    DB_NAME,
    LONGEST_OP_TIMEOUT,
    LONGEST_SETTING,
    MAX_BATCH_SIZE,
    MAX_BUCKETS,
    MAX_WORKERS,
    Parse,
)
from flowsched.config.suggest import closest, is_near
from flowsched.durations import hocon_text
from flowsched.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from pyhocon import ConfigTree

    from flowsched.calendar import Calendar

# pyhocon and pydantic (through flowsched.backoff) are imported where a configuration is
# read, not here: the schedulers import the limits below without reading any configuration.

__all__ = [
    "BLOCK",
    "LONGEST_OP_TIMEOUT",
    "LONGEST_SETTING",
    "MAX_BATCH_SIZE",
    "MAX_BUCKETS",
    "MAX_WORKERS",
    "SchedulerSettings",
    "read_scheduler_settings",
]

BLOCK = "ipf-scheduler"
"""The root block the scheduler settings live in (IPF's name)."""

_MONGODB = "mongodb"
_POSTGRES = "postgres"
_OURS = "flowsched"
_REDELIVERY = "redelivery"


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    """The validated ``ipf-scheduler`` settings, defaults filled in.

    ``uri`` / ``database_name`` are ``None`` when not configured (``database_name`` falls
    back on the database named in ``uri``).
    """

    uri: str | None = None
    database_name: str | None = None
    collection: str = "timers"
    poll_interval: timedelta = timedelta(seconds=1)
    lease: timedelta = timedelta(seconds=30)
    batch_size: int = 100
    buckets: int = 1
    workers: int = 8
    op_timeout: timedelta = timedelta(seconds=10)
    max_clock_skew: timedelta = timedelta(seconds=1)
    shutdown_timeout: timedelta = timedelta(seconds=30)
    redelivery_initial: timedelta = timedelta(seconds=3)
    redelivery_maximum: timedelta = timedelta(seconds=30)
    redelivery_factor: float = 2.0
    max_attempts: int | None = None
    node_id: str | None = None
    calendars: Mapping[str, Calendar] = field(default_factory=dict, hash=False)
    """Named calendars (``ipf-scheduler.calendars``), by name."""
    history_limit: int = 20
    history_retention: timedelta = timedelta(days=7)
    postgres_url: str | None = None
    postgres_table: str = "flowsched_timers"

    def database(self) -> str:
        """The database to use: ``database-name``, else the one named in ``uri``.

        :class:`ConfigError` naming the keys when neither says."""
        if self.database_name:
            return self.database_name
        if self.uri:
            path = unquote(urlsplit(self.uri).path.lstrip("/"))
            if path and not DB_NAME.fullmatch(path):
                raise ConfigError.single(
                    f"names the database {path!r}, which is no MongoDB database name "
                    '(no / \\ . " $ or spaces): fix it, or set '
                    f"{BLOCK}.{_MONGODB}.database-name",
                    key=f"{BLOCK}.{_MONGODB}.uri",
                )
            if path:
                return path
        raise ConfigError.single(
            f"no database for the MongoDB scheduler: set {BLOCK}.{_MONGODB}.database-name "
            f'(e.g. "scheduled") or name one in {BLOCK}.{_MONGODB}.uri',
            key=f"{BLOCK}.{_MONGODB}.database-name",
        )

    def with_values(self, values: Mapping[str, object]) -> SchedulerSettings:
        """A copy with ``values`` (by key under ``ipf-scheduler``: ``mongodb.uri``,
        ``flowsched.op-timeout`` ...) read and checked as in a configuration file; ``None``
        values are skipped. :class:`ConfigError` naming the full key when one is wrong.

        The command line overlays its options on a file's settings this way, so that an option
        and its key accept the same values.

        >>> SchedulerSettings().with_values({"mongodb.collection": "jobs"}).collection
        'jobs'
        """
        found: dict[str, object] = {}
        problems: list[ConfigProblem] = []
        for name, value in values.items():
            if value is None:
                continue
            section, _, key = name.partition(".")
            keys = _MONGODB_KEYS if section == _MONGODB else _OUR_KEYS
            if key not in keys:
                raise ValueError(f"no scheduler setting {BLOCK}.{name}")
            _set((BLOCK, section, key), keys[key], value, found, problems)
        if problems:
            raise ConfigError(problems)
        return replace(self, **found)  # type: ignore[arg-type]

    def mongo_uri(self) -> str:
        """``uri``, or :class:`ConfigError` naming the key when it is not set."""
        if not self.uri:
            raise ConfigError.single(
                f'not set: the MongoDB scheduler needs {BLOCK}.{_MONGODB}.uri = "mongodb://host/db"',
                key=f"{BLOCK}.{_MONGODB}.uri",
            )
        return self.uri

    def postgres(self) -> str:
        """``postgres.url``, or :class:`ConfigError` naming the key when it is not set."""
        if not self.postgres_url:
            raise ConfigError.single(
                f"not set: the PostgreSQL scheduler needs {BLOCK}.{_POSTGRES}.url = "
                '"postgresql://user@host/database"',
                key=f"{BLOCK}.{_POSTGRES}.url",
            )
        return self.postgres_url


_MONGODB_KEYS: Mapping[str, tuple[str, Parse]] = {
    "uri": ("uri", setting_values.uri),
    "database-name": ("database_name", setting_values.database),
    "collection": ("collection", setting_values.collection),
}


_POSTGRES_KEYS: Mapping[str, tuple[str, Parse]] = {
    "url": ("postgres_url", setting_values.postgres_url),
    "table": ("postgres_table", setting_values.table),
}
_OUR_KEYS: Mapping[str, tuple[str, Parse]] = {
    "poll-interval": ("poll_interval", setting_values.duration_above_zero),
    "lease": ("lease", setting_values.duration_above_zero),
    "batch-size": ("batch_size", setting_values.count_up_to(MAX_BATCH_SIZE)),
    "buckets": ("buckets", setting_values.count_up_to(MAX_BUCKETS)),
    "workers": ("workers", setting_values.count_up_to(MAX_WORKERS)),
    "op-timeout": ("op_timeout", setting_values.op_timeout),
    "max-clock-skew": ("max_clock_skew", setting_values.duration_above_zero),
    "shutdown-timeout": ("shutdown_timeout", setting_values.duration_above_zero),
    "max-attempts": ("max_attempts", setting_values.optional_count),
    "node-id": ("node_id", setting_values.optional_text),
    "history-limit": ("history_limit", setting_values.count_up_to(1000)),
    "history-retention": ("history_retention", setting_values.duration_above_zero),
}
_REDELIVERY_KEYS: Mapping[str, tuple[str, Parse]] = {
    "initial": ("redelivery_initial", setting_values.duration_above_zero),
    "maximum": ("redelivery_maximum", setting_values.duration_above_zero),
    "factor": ("redelivery_factor", setting_values.factor),
}
_CALENDARS = "calendars"
_SECTIONS: Mapping[str, Mapping[str, tuple[str, Parse]] | None] = {
    _MONGODB: _MONGODB_KEYS,
    _POSTGRES: _POSTGRES_KEYS,
    _OURS: None,  # holds _OUR_KEYS and the redelivery block
    _CALENDARS: None,  # named calendars: flowsched.config.calendars
}


def read_scheduler_settings(tree: ConfigTree) -> tuple[SchedulerSettings, list[ConfigProblem]]:
    """The settings in ``tree`` (a whole configuration) and every problem found in them."""
    from pyhocon import ConfigTree

    problems: list[ConfigProblem] = []
    values: dict[str, object] = {}
    for key in tree:
        if key != BLOCK and is_near(key.strip('"'), (BLOCK,), cutoff=0.85):
            problems.append(_unknown((key,), BLOCK))
    block = tree.get(BLOCK, None)
    if block is None:
        if BLOCK in tree:  # `ipf-scheduler = null`: a mistake, not "use the defaults"
            problems.append(ConfigProblem(BLOCK, "null", "must be an object (mongodb { ... })"))
        return SchedulerSettings(), problems
    if not isinstance(block, ConfigTree):
        problems.append(_wrong((BLOCK,), block, "must be an object (mongodb { ... })"))
        return SchedulerSettings(), problems
    for name, section in block.items():
        path = (BLOCK, name)
        if name == _MONGODB:
            _read(section, path, _MONGODB_KEYS, values, problems)
        elif name == _POSTGRES:
            _read(section, path, _POSTGRES_KEYS, values, problems)
        elif name == _OURS:
            _read_ours(section, path, values, problems)
        elif name == _CALENDARS:
            from flowsched.config.calendars import read_calendars

            values["calendars"] = read_calendars(section, path, problems)
        else:
            problems.append(_unknown(path, closest(name, _SECTIONS)))
    if _MONGODB in block and _POSTGRES in block:
        problems.append(
            ConfigProblem(
                BLOCK,
                None,
                f"configures both {BLOCK}.{_MONGODB} and {BLOCK}.{_POSTGRES}: a scheduler "
                "keeps its timers in one database; remove one of them",
            )
        )
    settings = SchedulerSettings(**values)  # type: ignore[arg-type]
    if settings.redelivery_maximum < settings.redelivery_initial:
        key = format_key((BLOCK, _OURS, _REDELIVERY, "maximum"))
        problems.append(
            ConfigProblem(
                key,
                hocon_text(settings.redelivery_maximum),
                f"must be at least redelivery initial ({hocon_text(settings.redelivery_initial)})",
            )
        )
    return settings, problems


def _read_ours(
    section: object,
    path: tuple[str, ...],
    values: dict[str, object],
    problems: list[ConfigProblem],
) -> None:
    from pyhocon import ConfigTree

    if not isinstance(section, ConfigTree):
        problems.append(_wrong(path, section, "must be an object (poll-interval = 1s, ...)"))
        return
    for raw_name, value in section.items():
        name = raw_name.strip('"')
        if name == _REDELIVERY:
            _read(value, (*path, name), _REDELIVERY_KEYS, values, problems)
        elif name in _OUR_KEYS:
            _set((*path, name), _OUR_KEYS[name], value, values, problems)
        else:
            problems.append(_unknown((*path, name), closest(name, [*_OUR_KEYS, _REDELIVERY])))


def _read(
    section: object,
    path: tuple[str, ...],
    keys: Mapping[str, tuple[str, Parse]],
    values: dict[str, object],
    problems: list[ConfigProblem],
) -> None:
    from pyhocon import ConfigTree

    if not isinstance(section, ConfigTree):
        problems.append(_wrong(path, section, f"must be an object ({', '.join(keys)})"))
        return
    for raw_name, value in section.items():
        name = raw_name.strip('"')
        if name in keys:
            _set((*path, name), keys[name], value, values, problems)
        else:
            problems.append(_unknown((*path, name), closest(name, keys)))


def _set(
    path: tuple[str, ...],
    spec: tuple[str, Parse],
    value: object,
    values: dict[str, object],
    problems: list[ConfigProblem],
) -> None:
    attribute, parse = spec
    key = format_key(path)
    try:
        values[attribute] = parse(value)
    except ConfigError as exc:  # from parse_duration, which did not know the key
        problems.extend(ConfigProblem(key, p.value, p.message) for p in exc.problems)
    except ValueError as exc:
        problems.append(ConfigProblem(key, hocon_text(value), str(exc)))


def _unknown(path: tuple[str, ...], meant: str | None) -> ConfigProblem:
    key = format_key(path)
    if meant is None:
        return ConfigProblem(key, None, f"unknown scheduler setting {path[-1]!r}")
    fixed = format_key((*path[:-1], meant))
    return ConfigProblem(
        key,
        None,
        f"unknown scheduler setting {path[-1]!r}; did you mean {fixed}?",
        suggestion=fixed,
    )


def _wrong(path: tuple[str, ...], value: object, message: str) -> ConfigProblem:
    return ConfigProblem(format_key(path), hocon_text(value), message)
