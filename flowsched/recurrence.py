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
* Ends and closed days: there is no slot after ``until``; a slot on a day the ``calendar``
  excludes (judged in the calendar's time zone) does not exist - it is skipped, not moved to
  the next open day. So after a gap, the slot that runs is the latest one on an open day (it
  may run late, on a closed day, as any missed latest slot runs late). ``max_runs`` is counted
  by the adapters (the runs so far are stored with the item, see
  :attr:`flowsched.ScheduleItem.runs`); :meth:`Recurrence.ended` says when it is reached.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from flowsched.calendar import LONGEST_CLOSURE, Calendar
from flowsched.clock import ensure_utc
from flowsched.durations import parse_duration

if TYPE_CHECKING:
    from collections.abc import Mapping

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

    ``until`` (an aware datetime): no slot after it. ``max_runs``: at most that many ticks
    (a tick that ran counts, a failed one that counts as its slot's outcome too; with
    ``retry_failed`` a tick counts once it succeeds). ``calendar``: a :class:`Calendar`, or
    the name of one in the scheduler's ``ipf-scheduler.calendars`` (resolved by
    ``schedule_recurring``); no slot falls on a day it excludes. A recurring item whose
    recurrence has ended (``until`` passed, ``max_runs`` reached) is removed, as a one-shot
    item is once delivered: it is not a dead letter.
    """

    interval: timedelta | None = None
    cron_expr: str | None = None
    timezone: str = "UTC"
    start: datetime | None = None
    retry_failed: bool = False
    until: datetime | None = None
    max_runs: int | None = None
    calendar: Calendar | str | None = None

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
        _check_ends(self)

    @classmethod
    def every(
        cls,
        interval: timedelta | str,
        *,
        start: datetime | None = None,
        retry_failed: bool = False,
        until: datetime | None = None,
        max_runs: int | None = None,
        calendar: Calendar | str | None = None,
    ) -> Recurrence:
        """A slot every ``interval``, the first one ``interval`` after ``start``; none after
        ``until``, at most ``max_runs`` runs, none on a day ``calendar`` excludes.

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
        return cls(
            interval=interval,
            start=start,
            retry_failed=retry_failed,
            until=until,
            max_runs=max_runs,
            calendar=calendar,
        )

    @classmethod
    def cron(
        cls,
        expr: str,
        timezone: str = "UTC",
        *,
        start: datetime | None = None,
        retry_failed: bool = False,
        until: datetime | None = None,
        max_runs: int | None = None,
        calendar: Calendar | str | None = None,
    ) -> Recurrence:
        """Slots at the times a 5-field crontab expression names, in ``timezone``; none
        after ``until``, at most ``max_runs`` runs, none on a day ``calendar`` excludes.

        >>> from datetime import UTC, datetime
        >>> ecb_days = Calendar(timezone="Europe/Berlin", weekdays_off=("SAT", "SUN"))
        >>> at_seven = Recurrence.cron("0 7 * * *", "Europe/Berlin", calendar=ecb_days,
        ...                            start=datetime(2026, 12, 25, 12, tzinfo=UTC))
        >>> at_seven.next_slot(at_seven.start).isoformat()  # Saturday and Sunday skipped
        '2026-12-28T06:00:00+00:00'
        """
        return cls(
            cron_expr=expr,
            timezone=timezone,
            start=start,
            retry_failed=retry_failed,
            until=until,
            max_runs=max_runs,
            calendar=calendar,
        )

    def anchored(self, start: datetime) -> Recurrence:
        """This recurrence with ``start`` set, unless it already has one."""
        return self if self.start is not None else replace(self, start=start)

    def _anchor(self) -> datetime:
        if self.start is None:
            raise ValueError("recurrence has no start yet (the scheduler sets it on schedule)")
        return self.start

    def resolved(self, calendars: Mapping[str, Calendar]) -> Recurrence:
        """This recurrence with a calendar given by name replaced by ``calendars[name]``;
        ``ValueError`` naming it and the known names if there is no such calendar."""
        name = self.calendar
        if not isinstance(name, str):
            return self
        found = calendars.get(name)
        if found is None:
            known = ", ".join(sorted(calendars)) or "none: configure ipf-scheduler.calendars"
            raise ValueError(f"unknown calendar {name!r} (known calendars: {known})")
        return replace(self, calendar=found)

    def ended(self, runs: int) -> bool:
        """Whether ``runs`` ticks use up ``max_runs`` (never, without one)."""
        return self.max_runs is not None and runs >= self.max_runs

    def after(self, slot: datetime | None, runs: int) -> datetime | None:
        """The slot after ``slot`` (``None``: after the start) for an item that has run
        ``runs`` times; ``None`` when the recurrence has ended (``max_runs`` reached, or no
        slot left before ``until``); ``ValueError`` as :meth:`following`."""
        if self.ended(runs):
            return None
        return self.following(self._anchor() if slot is None else slot)

    def next_slot(self, after: datetime) -> datetime:
        """The first slot strictly after ``after`` (and after the start); ``ValueError`` if
        there is none: past ``until``, or none before the year 10000."""
        slot = self.following(after)
        if slot is None:
            assert self.until is not None
            raise ValueError(
                f"recurrence has no slot after {after.isoformat()}: it ends at "
                f"{self.until.isoformat()} (until)"
            )
        return slot

    def following(self, after: datetime) -> datetime | None:
        """The first slot strictly after ``after`` (and after the start), on a day the
        calendar leaves open; ``None`` when the recurrence has ended (the next one would be
        after ``until``); ``ValueError`` if there is none before the year 10000 (or the
        calendar closes ten years in a row)."""
        try:
            return self._following(after)
        except OverflowError:
            what = f"every {self.interval}" if self.interval else f"cron {self.cron_expr!r}"
            raise ValueError(
                f"recurrence {what} has no slot after {after.isoformat()} before the year 10000"
            ) from None

    def _following(self, after: datetime) -> datetime | None:
        calendar = self._calendar()
        slot = self._next_slot(after)
        for _closed_day in range(LONGEST_CLOSURE):
            if self.until is not None and slot > self.until:
                return None
            if calendar is None or calendar.allows(slot):
                return slot
            # Every slot of that local day is skipped: look on from the next day.
            slot = self._next_slot(calendar.next_day_start(slot) - _US)
        raise ValueError(
            f"recurrence has no slot after {after.isoformat()} on a day its calendar leaves "
            f"open ({LONGEST_CLOSURE} closed days or slots in a row)"
        )

    def _calendar(self) -> Calendar | None:
        calendar = self.calendar
        if isinstance(calendar, str):
            raise ValueError(
                f"recurrence calendar {calendar!r} is a name: schedule it with "
                "schedule_recurring on a scheduler built from the configuration that names "
                "it (ipf-scheduler.calendars), or pass a Calendar"
            )
        return calendar

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
        """The latest slot at or before ``now`` (and ``until``) that is after ``applied``, on
        an open day of the calendar; ``None`` if none.

        Missed slots are not replayed: after a gap this is the newest one only."""
        now = ensure_utc(now, "now")
        if self.until is not None and now > self.until:
            now = self.until
        floor = applied if applied is not None else self._anchor()
        try:
            slot = self.following(floor)
            if slot is None or slot > now:
                return None
            if self.interval is not None:
                return self._latest_open(slot, now)
            while True:
                following = self.following(slot)
                if following is None or following > now:
                    return slot
                slot = following
        except OverflowError:  # pragma: no cover - following() raised for it already
            raise ValueError(f"recurrence has no slot after {floor.isoformat()}") from None

    def _latest_open(self, first: datetime, now: datetime) -> datetime:
        """For an ``every`` recurrence: the latest slot at or before ``now`` on an open day,
        knowing ``first`` (an open slot at or before ``now``) is one."""
        assert self.interval is not None
        anchor = self._anchor()
        latest = anchor + self.interval * ((now - anchor) // self.interval)
        calendar = self._calendar()
        while calendar is not None and latest > first and not calendar.allows(latest):
            before = calendar.day_start(latest) - _US  # the last instant of the day before
            latest = anchor + self.interval * ((before - anchor) // self.interval)
        return max(latest, first)

    def ends_text(self) -> str:
        """``""``, or what ends or skips slots, for the tools: ``", until 2027-01-01T00:00:00
        +00:00, at most 5 runs, calendar target2"``."""
        parts = [f"until {self.until.isoformat()}"] if self.until is not None else []
        if self.max_runs is not None:
            parts.append(f"at most {self.max_runs} runs")
        calendar = self.calendar
        if calendar is not None:
            parts.append(
                f"calendar {calendar if isinstance(calendar, str) else calendar.describe()}"
            )
        return "".join(f", {part}" for part in parts)

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
        if self.until is not None:
            data["until"] = self.until.isoformat()
        if self.max_runs is not None:
            data["max_runs"] = self.max_runs
        if isinstance(self.calendar, Calendar):
            data["calendar"] = self.calendar.to_json()
        elif self.calendar is not None:
            data["calendar"] = self.calendar
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recurrence:
        """The inverse of :meth:`to_json`; ``ValueError`` on a malformed object. An object
        stored before ``until``, ``max_runs`` and ``calendar`` existed reads as having none."""
        try:
            start = datetime.fromisoformat(data["start"]) if data.get("start") else None
            until = datetime.fromisoformat(data["until"]) if data.get("until") else None
            calendar = data.get("calendar")
            ends: dict[str, Any] = {
                "start": start,
                "retry_failed": bool(data.get("retry_failed", False)),
                "until": until,
                "max_runs": data.get("max_runs"),
                "calendar": calendar
                if isinstance(calendar, str | None)
                else Calendar.from_json(calendar),
            }
            if "every_seconds" in data:
                return cls(interval=timedelta(seconds=float(data["every_seconds"])), **ends)
            return cls(
                cron_expr=str(data["cron"]), timezone=str(data.get("timezone", "UTC")), **ends
            )
        except (KeyError, TypeError, OverflowError) as exc:  # overflow: an endless interval
            raise ValueError(f"malformed recurrence {data!r:.300}: {exc}") from None


def _check_ends(recurrence: Recurrence) -> None:
    """Validate (and normalise) ``until``, ``max_runs`` and ``calendar``."""
    if recurrence.until is not None:
        until = ensure_utc(recurrence.until, "recurrence until")
        object.__setattr__(recurrence, "until", until)
        if recurrence.start is not None and until < recurrence.start:
            raise ValueError(
                f"recurrence until ({until.isoformat()}) is before its start "
                f"({recurrence.start.isoformat()})"
            )
    runs = recurrence.max_runs
    if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
        raise ValueError(f"recurrence max_runs must be a whole number >= 1 (got {runs!r})")
    calendar = recurrence.calendar
    if calendar is not None and not isinstance(calendar, Calendar | str):
        raise TypeError(
            "recurrence calendar must be a Calendar or the name of a configured one "
            f"(got {type(calendar).__name__}: {calendar!r:.80})"
        )
    if isinstance(calendar, str) and not calendar:
        raise ValueError("recurrence calendar name must not be empty")


_MS = timedelta(milliseconds=1)
_US = timedelta(microseconds=1)


@lru_cache(maxsize=256)
def _cron_trigger(expr: str, timezone: str) -> CronTrigger:
    """The trigger for ``expr`` (built once per expression; imported on first use, since
    APScheduler takes a tenth of a second to import and most users have no cron schedule)."""
    from apscheduler.triggers.cron import CronTrigger

    return CronTrigger.from_crontab(expr, timezone=timezone)
