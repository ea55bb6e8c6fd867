"""Internal: recurring schedules — when the slots of an ``every(...)`` or cron schedule fall.

Pure: no I/O, no clock of its own. Next fire times come from APScheduler's trigger classes,
which already handle time zones and daylight-saving changes.

Semantics (shared by every adapter):

* Slots are counted from the schedule's ``start`` (the time it was scheduled, unless given):
  an ``every(1h)`` schedule started at 10:00 has slots 11:00, 12:00, …
* After a gap (downtime, a long tick) only the latest due slot runs, once:
  :meth:`Recurrence.slot_to_run` gives it, and the handler is told the previous applied slot.
* A slot at or before the applied one is never run again.
* On the day a cron time occurs twice (clocks going back), it runs once: a slot whose local
  wall time repeats the previous slot's is skipped. A cron time that does not exist (clocks
  going forward) runs at APScheduler's shifted time, one hour later in local time.
* Slots fall on whole milliseconds (the precision MongoDB keeps dates in): ``start`` is cut to
  whole milliseconds and an interval must be a whole number of them, so a slot read back from
  a store compares equal to the slot that was computed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from flowsched.clock import ensure_utc
from flowsched.durations import parse_duration

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

__all__ = ["Recurrence"]


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A recurring schedule: ``Recurrence.every(timedelta(hours=1))`` or
    ``Recurrence.cron("0 2 * * *", "Europe/London")``.

    ``retry_failed``: a failing tick is normally counted as that slot's outcome (the next tick
    is the next slot); with ``retry_failed=True`` the tick is redelivered with the scheduler's
    redelivery backoff (and dead-lettered at its ``max_attempts``) until one succeeds. Each
    redelivery runs the latest slot due by then: the failed one, or a newer one if it came
    meanwhile (missed slots are not replayed).
    """

    interval: timedelta | None = None
    cron_expr: str | None = None
    timezone: str = "UTC"
    start: datetime | None = None
    retry_failed: bool = False

    def __post_init__(self) -> None:
        if (self.interval is None) == (self.cron_expr is None):
            raise ValueError("a Recurrence needs exactly one of interval or cron_expr")
        if self.interval is not None and self.interval <= timedelta(0):
            raise ValueError(f"recurrence interval must be positive (got {self.interval})")
        if self.interval is not None and self.interval % _MS:
            raise ValueError(
                f"recurrence interval must be a whole number of milliseconds (got {self.interval})"
            )
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here: import flowsched stays light

        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {self.timezone!r} (use an IANA name)") from None
        if self.cron_expr is not None:
            try:
                _cron_trigger(self.cron_expr, self.timezone)
            except ValueError as exc:
                raise ValueError(
                    f"bad cron expression {self.cron_expr!r} (5 fields: minute hour day "
                    f"month day-of-week): {exc}"
                ) from None
        if self.start is not None:
            start = ensure_utc(self.start, "recurrence start")
            whole_ms = start.replace(microsecond=start.microsecond - start.microsecond % 1000)
            object.__setattr__(self, "start", whole_ms)

    @classmethod
    def every(
        cls,
        interval: timedelta | str,
        *,
        start: datetime | None = None,
        retry_failed: bool = False,
    ) -> Recurrence:
        """A slot every ``interval``, the first one ``interval`` after ``start``.

        ``interval`` is a ``timedelta`` or a HOCON duration (``"1h"``, ``"90 s"``; a bare
        number is milliseconds); a bad string is a :class:`~flowsched.ConfigError` (a
        ``ValueError``), any other type a ``TypeError``.

        >>> Recurrence.every("90 s").interval
        datetime.timedelta(seconds=90)
        """
        if isinstance(interval, str):
            interval = parse_duration(interval, key="Recurrence.every interval")
        elif not isinstance(interval, timedelta):
            raise TypeError(
                "Recurrence.every takes a timedelta or a duration string such as '1h' "
                f"(got {type(interval).__name__})"
            )
        return cls(interval=interval, start=start, retry_failed=retry_failed)

    @classmethod
    def cron(
        cls,
        expr: str,
        timezone: str = "UTC",
        *,
        start: datetime | None = None,
        retry_failed: bool = False,
    ) -> Recurrence:
        """Slots at the times a 5-field crontab expression names, in ``timezone``."""
        return cls(cron_expr=expr, timezone=timezone, start=start, retry_failed=retry_failed)

    def anchored(self, start: datetime) -> Recurrence:
        """This recurrence with ``start`` set, unless it already has one."""
        return self if self.start is not None else replace(self, start=start)

    def _anchor(self) -> datetime:
        if self.start is None:
            raise ValueError("recurrence has no start yet (the scheduler sets it on schedule)")
        return self.start

    def next_slot(self, after: datetime) -> datetime:
        """The first slot strictly after ``after`` (and after the start); ``ValueError`` if
        there is none before the year 10000."""
        try:
            return self._next_slot(after)
        except OverflowError:
            what = f"every {self.interval}" if self.interval else f"cron {self.cron_expr!r}"
            raise ValueError(
                f"recurrence {what} has no slot after {after.isoformat()} before the year 10000"
            ) from None

    def _next_slot(self, after: datetime) -> datetime:
        anchor = self._anchor()
        after = max(ensure_utc(after, "after"), anchor)
        if self.interval is not None:
            elapsed = after - anchor
            count = elapsed // self.interval + 1
            return anchor + self.interval * count
        assert self.cron_expr is not None
        trigger = _cron_trigger(self.cron_expr, self.timezone)
        candidate = after
        while True:
            fire = trigger.get_next_fire_time(None, candidate + timedelta(microseconds=1))
            if fire is None:  # pragma: no cover - crontab always has a next time
                raise ValueError(f"cron {self.cron_expr!r} has no time after {after}")
            fire_utc = ensure_utc(fire)
            if not self._repeats_local_time(fire_utc):
                return fire_utc
            candidate = fire_utc

    def _repeats_local_time(self, slot: datetime) -> bool:
        """True for the second occurrence of a local time on the day clocks go back."""
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(self.timezone)
        local = slot.astimezone(zone)
        return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()

    def slot_to_run(self, now: datetime, applied: datetime | None) -> datetime | None:
        """The latest slot at or before ``now`` that is after ``applied``; ``None`` if none.

        Missed slots are not replayed: after a gap this is the newest one only.
        """
        now = ensure_utc(now, "now")
        floor = applied if applied is not None else self._anchor()
        slot = self.next_slot(floor)
        if slot > now:
            return None
        if self.interval is not None:
            return slot + self.interval * ((now - slot) // self.interval)
        while True:
            following = self.next_slot(slot)
            if following > now:
                return slot
            slot = following

    def to_json(self) -> dict[str, Any]:
        """A plain JSON object (stored with the item by persistent adapters)."""
        data: dict[str, Any] = {"retry_failed": self.retry_failed}
        if self.interval is not None:
            data["every_seconds"] = self.interval.total_seconds()
        else:
            data["cron"] = self.cron_expr
            data["timezone"] = self.timezone
        if self.start is not None:
            data["start"] = self.start.isoformat()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recurrence:
        """The inverse of :meth:`to_json`; ``ValueError`` on a malformed object."""
        try:
            start = datetime.fromisoformat(data["start"]) if data.get("start") else None
            retry_failed = bool(data.get("retry_failed", False))
            if "every_seconds" in data:
                return cls(
                    interval=timedelta(seconds=float(data["every_seconds"])),
                    start=start,
                    retry_failed=retry_failed,
                )
            return cls(
                cron_expr=str(data["cron"]),
                timezone=str(data.get("timezone", "UTC")),
                start=start,
                retry_failed=retry_failed,
            )
        except (KeyError, TypeError, OverflowError) as exc:  # overflow: an endless interval
            raise ValueError(f"malformed recurrence {data!r}: {exc}") from None


_MS = timedelta(milliseconds=1)


@lru_cache(maxsize=256)
def _cron_trigger(expr: str, timezone: str) -> CronTrigger:
    """The trigger for ``expr`` (built once per expression; imported on first use, since
    APScheduler takes a tenth of a second to import and most users have no cron schedule)."""
    from apscheduler.triggers.cron import CronTrigger

    return CronTrigger.from_crontab(expr, timezone=timezone)
