"""Internal: what both PostgreSQL scheduler faces (``PostgresScheduler`` and
``AsyncPostgresScheduler``) share, written once: their keywords and defaults, the options
they hand their timer store, and what they add to a node scheduler (the table, the
LISTEN wake-up, the heartbeats)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypedDict, TypeVar, cast

from flowsched.clock import Clock
from flowsched.delivery import DeliveryCore, Observer
from flowsched.history import HistoryPolicy
from flowsched.node.common import NodeArgs, NodeOptions, is_manual
from flowsched.postgres.wakeup import conninfo_of

if TYPE_CHECKING:
    from flowsched.calendar import Calendar
    from flowsched.config import SchedulingConfig

__all__ = [
    "PostgresArgs",
    "PostgresFace",
    "PostgresOptions",
    "StoreOptions",
    "notify_window",
    "split_options",
    "store_options",
    "waker",
]


def notify_window(poll_interval: timedelta) -> timedelta:
    """How soon a timer must be due for its ``schedule`` to wake the listening nodes: a
    timer due later is found by a node's next poll anyway."""
    return max(2 * poll_interval, timedelta(seconds=1))


class PostgresArgs(NodeArgs, total=False):
    """The keywords of both faces: a node scheduler's and :class:`PostgresOptions`'."""

    table: str
    op_timeout: timedelta | None
    listen: bool
    pool_size: int | None
    durable_firing: bool
    history: HistoryPolicy | None


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """The faces' own settings and their defaults (the others are :class:`NodeOptions`)."""

    table: str = "flowsched_timers"
    op_timeout: timedelta | None = timedelta(seconds=10)
    listen: bool = True
    pool_size: int | None = None
    durable_firing: bool = False
    history: HistoryPolicy | None = None


def split_options(options: PostgresArgs) -> tuple[PostgresOptions, NodeArgs, NodeOptions]:
    """The faces' own settings, the node scheduler's keywords and those with their defaults;
    ``TypeError`` names a keyword neither takes."""
    node: dict[str, Any] = dict(options)
    own = {f.name: node.pop(f.name) for f in fields(PostgresOptions) if f.name in node}
    return PostgresOptions(**own), cast(NodeArgs, node), NodeOptions(**node)


class StoreOptions(TypedDict):
    """The keyword arguments of ``PostgresTimerStore`` and ``AsyncPostgresTimerStore`` a
    scheduler face sets (the pool or conninfo goes first, apart)."""

    table: str
    clock: Clock | None
    notify_within: timedelta
    op_timeout: timedelta | None
    pool_size: int
    durable_firing: bool
    history_limit: int
    history_retention: timedelta


def store_options(own: PostgresOptions, node: NodeOptions) -> StoreOptions:
    """The store's arguments for a scheduler built with these: ``notify_within`` from
    ``poll_interval`` (:func:`notify_window`), a pool of 4 unless ``pool_size`` is given,
    and the history kept as ``history`` says (default :class:`HistoryPolicy`)."""
    history = own.history or HistoryPolicy()
    return StoreOptions(
        table=own.table,
        clock=node.clock,
        notify_within=notify_window(node.poll_interval),
        op_timeout=own.op_timeout,
        pool_size=own.pool_size or 4,
        durable_firing=own.durable_firing,
        history_limit=history.limit,
        history_retention=history.retention,
    )


class _Helper(Protocol):
    def start(self) -> None: ...


L = TypeVar("L", bound=_Helper)
B = TypeVar("B", bound=_Helper)


def waker(
    routes: Callable[[], frozenset[str]], wake: Callable[[], None]
) -> Callable[[str | None], None]:
    """The listener's callback: ``wake`` when a notice names no route or one served here."""

    def heard(route: str | None) -> None:
        if route is None or route in routes():
            wake()

    return heard


class PostgresFace(Generic[L, B]):
    """What both faces add to their node scheduler, but for how they stop (one waits, one
    awaits): the table, the LISTEN listener (``L``) and the heartbeats (``B``), built
    once and started once."""

    calendars: Mapping[str, Calendar]
    _clock: Clock
    _delivery: DeliveryCore
    node_id: str
    _table: str
    _listener: L | None = None
    _beats: B | None = None
    _helpers_started = False

    @property
    def table(self) -> str:
        """The timers table."""
        return self._table

    def _add_helpers(
        self,
        store: Any,
        conninfo_or_pool: Any,
        kinds: tuple[Callable[..., L], Callable[..., B]],
        listen: bool,
        poll_interval: timedelta,
        wake: Callable[[], None],
    ) -> None:
        """Build (not start) the heartbeats and, if ``listen``, the listener; neither on a
        manual clock."""
        self._table = store.table
        if is_manual(self._clock):
            return
        listener, beats = kinds
        self._beats = beats(store, self.node_id, self._delivery.routes, poll_interval)
        if listen:
            heard = waker(self._delivery.routes, wake)
            channel = store.setup.queries.channel
            self._listener = listener(conninfo_of(conninfo_or_pool), channel, heard)

    def _start_helpers(self) -> None:
        if self._helpers_started:
            return
        self._helpers_started = True
        for helper in (self._listener, self._beats):
            if helper is not None:
                helper.start()

    @classmethod
    def from_config(
        cls,
        config: SchedulingConfig,
        *,
        node_id: str | None = None,
        clock: Clock | None = None,
        observer: Observer | None = None,
    ) -> Self:
        """A scheduler on ``ipf-scheduler.postgres { url, table }`` with the settings of
        ``ipf-scheduler.flowsched`` (``node_id`` wins over ``node-id``; ``shutdown-timeout``
        bounds closing; ``history-limit`` and ``history-retention`` the history) and the
        named calendars of ``ipf-scheduler.calendars`` (``calendar="name"`` resolves
        against them). A missing ``url`` is a :class:`~flowsched.ConfigError` naming the key.

        >>> config = SchedulingConfig.from_file("config/application.conf")  # doctest: +SKIP
        >>> with PostgresScheduler.from_config(config) as scheduler: ...  # doctest: +SKIP
        """
        from flowsched.postgres.from_config import build

        return build(cls, config, node_id, clock, observer)
