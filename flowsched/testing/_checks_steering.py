"""Checks of steering timers from Python (CONTRACT section 18): ``timers()`` order, filters
and cursor paging, ``iter_timers`` equal to the pages, bad arguments refused, ``pause`` and
``resume``, and ``history``.

Written against the synchronous port, as every check of the kit: an asyncio adapter is tried
through :class:`~flowsched.testing._async_trial.BlockingPort`. The history guarantee needs a
``history`` attribute: on an adapter without one it is skipped, not failed (its name says so).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from flowsched.delivery import RedeliveryPolicy
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence
from flowsched.steering import Attempt, TimerInfo, TimerPage
from flowsched.testing._trial import CLOCK_START, TIMER, Guarantee, Trial

__all__ = ["STEERING_GUARANTEES", "Steered"]

S = timedelta(seconds=1)
HOUR = timedelta(hours=1)


class Steered(Protocol):
    """The steering calls a scheduler has (CONTRACT section 18)."""

    def timers(self, **filters: Any) -> TimerPage: ...

    def iter_timers(self, **filters: Any) -> Iterator[TimerInfo]: ...

    def pause(self, item_id: str) -> bool: ...

    def resume(self, item_id: str) -> bool: ...


def _steered(t: Trial) -> Steered:
    for call in ("timers", "iter_timers", "pause", "resume"):
        assert callable(getattr(t.scheduler, call, None)), (
            f"the scheduler has no {call}() (CONTRACT section 18)"
        )
    return cast(Steered, t.scheduler)


def _ids(page: TimerPage | list[TimerInfo]) -> list[str]:
    items = page.items if isinstance(page, TimerPage) else page
    return [info.id for info in items]


def _soonest_due_first(t: Trial) -> None:
    s = _steered(t)
    for item_id, seconds in (("c", 30), ("b", 10), ("e", 20), ("a", 10), ("d", 5)):
        t.timer(item_id, t.at(seconds), flow_id="f")
    page = s.timers()
    assert _ids(page) == ["d", "a", "b", "e", "c"], (
        f"timers() listed {_ids(page)}: expected soonest due first, ties by id"
    )
    assert page.next is None, f"a page holding every timer has next={page.next!r}, not None"
    first = page.items[0]
    got = (first.id, first.kind, first.flow_id, first.due, first.state)
    assert got == ("d", TIMER, "f", t.at(5), "scheduled"), f"TimerInfo fields {got}"


def _info_fields(t: Trial) -> None:
    s, rec = _steered(t), t.recorder
    t.scheduler.subscribe(TIMER, rec)
    rec.fail("f", times=1)
    t.timer("f", t.at(1), flow_id="flow", payload={"order": "o-1"})
    t.clock.advance(2 * S)  # failed once; redelivered at 4 s
    (info,) = s.timers(id_prefix="f").items
    assert info.attempts == 1, f"after one failed delivery TimerInfo.attempts is {info.attempts}"
    assert info.state == "scheduled", f"a timer waiting for its redelivery is {info.state!r}"
    assert info.node is None and info.lease_until is None, "an unclaimed timer shows a claim"
    assert info.payload == {"order": "o-1"}, f"TimerInfo.payload is {info.payload!r}"
    assert info.payload_size > 0, f"TimerInfo.payload_size is {info.payload_size}"
    assert info.recurrence is None, f"a one-shot timer has recurrence {info.recurrence!r}"
    t.scheduler.schedule_recurring("r", Recurrence.every(HOUR))
    (ticking,) = s.timers(id_prefix="r").items
    assert ticking.recurrence is not None, "a recurring timer's TimerInfo has no recurrence"


def _last_error(t: Trial) -> None:
    s, rec = _steered(t), t.recorder
    t.scheduler.subscribe(TIMER, rec)
    rec.fail("f", times=1)
    t.timer("f", t.at(1))
    t.clock.advance(2 * S)  # failed once; redelivered at 4 s
    (info,) = s.timers(id_prefix="f").items
    assert "handler failed for f" in (info.last_error or ""), (
        f"after a failed delivery TimerInfo.last_error is {info.last_error!r}"
    )


def _paused_then_replaced_or_cancelled(t: Trial) -> None:
    s, rec = _steered(t), t.recorder
    t.scheduler.subscribe(TIMER, rec)
    t.timer("p", t.at(5))
    t.timer("c", t.at(5))
    s.pause("p")
    s.pause("c")
    assert t.scheduler.get("p") is not None, "get() of a paused item is None"
    t.timer("p", t.at(10))  # a replacement is not paused
    assert t.scheduler.cancel("c") is True, "cancel() of a paused item did not answer True"
    t.clock.advance(20 * S)
    assert rec.ids == ["p"], f"delivered {rec.ids}: expected the replacement p only"


def _filters(t: Trial) -> None:
    s = _steered(t)
    t.scheduler.register("named", lambda item, attempt: None)
    t.timer("o1", t.at(10), flow_id="f1")
    t.scheduler.schedule(ScheduleItem("o2", ScheduleKind.ACTION_TIMEOUT, t.at(20), "f1"))
    t.timer("p1", t.at(30), flow_id="f2")
    t.scheduler.create_single_timer("n1", t.at(40), "named")
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"id_prefix": "o"}, ["o1", "o2"]),
        ({"flow_id": "f1"}, ["o1", "o2"]),
        ({"kind": ScheduleKind.ACTION_TIMEOUT}, ["o2"]),
        ({"kind": "ACTION_TIMEOUT"}, ["o2"]),
        ({"handler": "named"}, ["n1"]),
        ({"due_from": t.at(20), "due_to": t.at(40)}, ["o2", "p1"]),
        ({"due_from": t.at(11)}, ["o2", "p1", "n1"]),
        ({"due_to": t.at(10)}, []),
        ({"flow_id": "f1", "kind": ScheduleKind.TIMER}, ["o1"]),
        ({"id_prefix": "zz"}, []),
    ]
    for filters, expected in cases:
        got = _ids(s.timers(**filters))
        assert got == expected, f"timers({_args(filters)}) listed {got}, expected {expected}"
        listed = _ids(list(s.iter_timers(**filters)))
        assert listed == expected, f"iter_timers({_args(filters)}) gave {listed}"


def _args(filters: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in filters.items())


def _paging(t: Trial) -> None:
    s = _steered(t)
    count = 23
    for n in range(count):  # three timers share each due time: ties by id across pages
        t.timer(f"x{n:02d}", t.at(1 + n // 3))
    t.timer("other", t.at(2))
    everything = _ids(s.timers(id_prefix="x", limit=1000))
    expected = sorted((f"x{n:02d}" for n in range(count)), key=lambda i: (int(i[1:]) // 3, i))
    assert everything == expected, f"one page of every timer: {everything}"
    seen: list[str] = []
    page = s.timers(id_prefix="x", limit=5)
    pages = 1
    while True:
        seen += _ids(page)
        if page.next is None:
            break
        assert len(page.items) == 5, f"page {pages} holds {len(page.items)} timers, not 5"
        assert pages < count, "paging does not end"
        page = s.timers(id_prefix="x", limit=5, after=page.next)
        pages += 1
    assert seen == expected, f"pages of 5 gave {seen}: every timer exactly once, in order"
    assert pages == 5, f"{count} timers came in {pages} pages of at most 5, expected 5"
    exact = s.timers(id_prefix="x", limit=count)
    assert exact.next is None, "a page that holds the last timer has a next cursor"
    assert s.timers(id_prefix="x", limit=count - 1).next is not None, (
        "a page that stops before the last timer has no next cursor"
    )
    for size in (None, 4):
        filters = {"id_prefix": "x"} if size is None else {"id_prefix": "x", "limit": size}
        listed = _ids(list(s.iter_timers(**filters)))
        assert listed == expected, f"iter_timers({_args(filters)}) is not the pages: {listed}"


def _bad_arguments(t: Trial) -> None:
    s = _steered(t)
    t.timer("a", t.at(10))
    naive = CLOCK_START.replace(tzinfo=None)
    bad: list[dict[str, Any]] = [
        {"due_from": naive},
        {"due_to": naive},
        {"limit": 0},
        {"limit": -1},
        {"after": "not-a-cursor"},
        {"state": "sleeping"},
        {"kind": "NO_SUCH_KIND"},
    ]
    for filters in bad:
        for name, call in (("timers", s.timers), ("iter_timers", _listed(s))):
            try:
                call(**filters)
            except (ValueError, TypeError):
                continue
            raise AssertionError(f"{name}({_args(filters)}) raised no ValueError/TypeError")


def _listed(s: Steered) -> Callable[..., list[TimerInfo]]:
    return lambda **filters: list(s.iter_timers(**filters))


def _paused_fires_nothing(t: Trial) -> None:
    s, rec = _steered(t), t.recorder
    t.scheduler.subscribe(TIMER, rec)
    t.timer("p", t.at(5))
    t.timer("q", t.at(5))
    assert s.pause("p") is True, "pause() of a scheduled item did not answer True"
    t.clock.advance(60 * S)
    assert rec.ids == ["q"], f"delivered {rec.ids} with p paused: expected only q"
    assert t.scheduler.exists("p"), "a paused item no longer exists()"
    states = [(info.id, info.state) for info in s.timers(id_prefix="p").items]
    assert states == [("p", "paused")], f"timers() shows the paused item as {states}"
    assert _ids(s.timers(state="paused")) == ["p"], "timers(state='paused') does not list it"


def _resume_one_shot(t: Trial) -> None:
    s, rec = _steered(t), t.recorder
    t.scheduler.subscribe(TIMER, rec)
    t.timer("p", t.at(5))
    s.pause("p")
    t.clock.advance(60 * S)
    assert rec.ids == [], f"a paused item was delivered: {rec.ids}"
    assert s.resume("p") is True, "resume() of a paused item did not answer True"
    shown = [(info.state, info.due) for info in s.timers(id_prefix="p").items]
    assert shown == [("scheduled", t.clock.now())], (
        f"after resume() timers() shows (state, due) {shown}: expected scheduled, due now"
    )
    t.clock.advance(S)
    assert rec.ids == ["p"], f"after resume() and 1 s, delivered {rec.ids}: expected p once"
    assert not t.scheduler.exists("p"), "the resumed item is still scheduled after delivery"


def _resume_recurring(t: Trial) -> None:
    s, rec = _steered(t), t.recorder
    t.scheduler.subscribe(TIMER, rec)
    t.scheduler.schedule_recurring("r", Recurrence.every(HOUR))
    assert s.pause("r") is True, "pause() of a recurring item did not answer True"
    t.clock.advance(3 * HOUR + HOUR / 2)
    assert rec.ids == [], f"a paused recurring item ticked: {[d.item.due for d in rec.deliveries]}"
    assert s.resume("r") is True, "resume() of a paused recurring item did not answer True"
    t.clock.advance(HOUR)
    slots = [d.item.due for d in rec.deliveries]
    assert slots == [CLOCK_START + 4 * HOUR], (
        f"after resume at 3.5 h the item ticked for {slots}: expected only the 4 h slot "
        "(missed slots are not replayed)"
    )
    assert t.scheduler.exists("r"), "the resumed recurring item ended"


def _unknown_ids(t: Trial) -> None:
    s = _steered(t)
    assert s.pause("nothing") is False, "pause() of an unknown id did not answer False"
    assert s.resume("nothing") is False, "resume() of an unknown id did not answer False"
    t.timer("gone", t.at(5))
    t.scheduler.cancel("gone")
    assert s.pause("gone") is False, "pause() of a cancelled item did not answer False"
    assert s.resume("gone") is False, "resume() of a cancelled item did not answer False"


def _dead_letters_only_with_state_dead(t: Trial) -> None:
    s, rec = _steered(t), t.recorder
    t.scheduler.subscribe(TIMER, rec)
    rec.fail("dead")
    t.timer("dead", t.at(1))
    t.timer("alive", t.at(60))
    t.clock.advance(10 * S)
    assert [d.item.id for d in t.scheduler.dead_letters()] == ["dead"], "no dead letter to list"
    listed = _ids(s.timers())
    assert listed == ["alive"], f"timers() listed {listed}: dead letters only with state='dead'"
    dead = [(info.id, info.state) for info in s.timers(state="dead").items]
    assert dead == [("dead", "dead")], f"timers(state='dead') listed {dead}"
    assert _ids(list(s.iter_timers())) == ["alive"], "iter_timers() listed a dead letter"


def _history(t: Trial) -> None:
    rec = t.recorder
    history = cast(Callable[[str], list[Attempt]], getattr(t.scheduler, "history"))  # noqa: B009
    t.scheduler.subscribe(TIMER, rec)
    rec.fail("h", times=1)
    t.timer("h", t.at(1))
    t.clock.advance(30 * S)
    assert [d.attempt for d in rec.of("h")] == [0, 1], f"deliveries {rec.of('h')}"
    attempts = history("h")
    outcomes = [a.outcome for a in attempts]
    assert outcomes == ["failed", "succeeded"], f"history('h') outcomes {outcomes}"
    failed, succeeded = attempts
    assert failed.error_type is not None and failed.error_type.endswith("RuntimeError"), (
        f"the failed attempt's error_type is {failed.error_type!r}"
    )
    assert "handler failed for h" in (failed.error_message or ""), (
        f"the failed attempt's error_message is {failed.error_message!r}"
    )
    assert succeeded.error_type is None, f"the succeeded attempt has {succeeded.error_type!r}"
    for a in attempts:
        assert isinstance(a.started, datetime) and a.started.utcoffset() == timedelta(0), (
            f"started {a.started!r} is not timezone-aware UTC"
        )
        assert a.ended is not None and a.ended >= a.started, f"ended {a.ended} of {a}"
    assert failed.started < succeeded.started, "history() is not oldest first"
    assert history("never-scheduled") == [], "history() of an unknown id is not empty"


STEERING_GUARANTEES = (
    Guarantee("timers() lists soonest due first, ties by id", _soonest_due_first),
    Guarantee("TimerInfo carries attempts, payload, payload_size and recurrence", _info_fields),
    Guarantee(
        "TimerInfo.last_error is the latest failure's text "
        "(skipped when the adapter has no history)",
        _last_error,
        needs="history",
    ),
    Guarantee(
        "timers() and iter_timers() filter by id_prefix, flow_id, kind, handler and "
        "due_from <= due < due_to",
        _filters,
    ),
    Guarantee(
        "cursor paging lists every timer exactly once, next is None on the last page, "
        "iter_timers() equals the pages",
        _paging,
    ),
    Guarantee(
        "timers() and iter_timers() refuse a naive datetime, limit 0, a foreign cursor, "
        "an unknown state or kind (ValueError/TypeError)",
        _bad_arguments,
    ),
    Guarantee(
        "a paused item fires nothing when its time passes, still exists(), state 'paused'",
        _paused_fires_nothing,
    ),
    Guarantee("a resumed one-shot item whose time passed is due at once", _resume_one_shot),
    Guarantee(
        "a resumed recurring item goes on at its next slot; missed slots are not replayed",
        _resume_recurring,
    ),
    Guarantee("pause() and resume() answer False for an unknown id", _unknown_ids),
    Guarantee(
        "a paused item can be read, cancelled, and replaced by schedule() (unpaused)",
        _paused_then_replaced_or_cancelled,
    ),
    Guarantee(
        "dead letters are listed only with state='dead'",
        _dead_letters_only_with_state_dead,
        redelivery=RedeliveryPolicy(max_attempts=1),
    ),
    Guarantee(
        "history() lists a failed then a succeeded attempt, oldest first, with the error "
        "(skipped when the adapter has no history)",
        _history,
        needs="history",
    ),
)
