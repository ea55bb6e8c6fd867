"""``timers()`` and ``iter_timers()`` on all four schedulers: soonest due first, filters,
keyset pages, records, and arguments refused by name (CONTRACT section 18)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from steering_kit import KINDS, MIN, NOW

from flowsched import Recurrence, ScheduleKind, TimerInfo
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.scheduler import NodeScheduler
from flowsched.steering_query import MAX_LIMIT, decode_cursor, encode_cursor


def seed(face) -> list[str]:
    """t-0 .. t-6 due a minute apart from 30 minutes ahead, in reverse id order of schedule;
    plus ``tie-a``/``tie-b`` due with t-3 (ties are ordered by id)."""
    for n in reversed(range(7)):
        face.schedule(f"t-{n}", (30 + n) * MIN, flow_id=f"f-{n % 2}")
    face.schedule("tie-b", 33 * MIN)
    face.schedule("tie-a", 33 * MIN)
    return ["t-0", "t-1", "t-2", "t-3", "tie-a", "tie-b", "t-4", "t-5", "t-6"]


def test_pages_are_soonest_due_first_and_cover_everything_once(face):
    expected = seed(face)

    first = face.call("timers", limit=4)
    second = face.call("timers", limit=4, after=first.next)
    last = face.call("timers", limit=4, after=second.next)

    assert [t.id for t in first] == expected[:4]
    assert [t.id for t in second] == expected[4:8]
    assert [t.id for t in last] == expected[8:]
    assert first.next is not None and second.next is not None
    assert last.next is None
    assert face.call("timers").next is None  # all 9 fit the default page of 50
    assert face.ids(limit=2) == expected


def test_a_page_that_ends_exactly_at_the_last_timer_says_so(face):
    expected = seed(face)

    whole = face.call("timers", limit=len(expected))

    assert [t.id for t in whole] == expected
    assert whole.next is None


def test_paging_stays_exact_while_timers_before_the_cursor_vanish(face):
    expected = seed(face)
    first = face.call("timers", limit=3)

    face.call("cancel", "t-0")  # fired or cancelled meanwhile: an offset would skip one
    face.schedule("early", 1 * MIN)  # before the cursor: not on the following pages

    assert [t.id for t in face.call("timers", limit=3, after=first.next)] == expected[3:6]


def test_filters_combine(face):
    seed(face)
    face.schedule("a-1", 40 * MIN, kind=ScheduleKind.ACTION_TIMEOUT, flow_id="f-1")
    face.schedule("h-1", 41 * MIN, handler="billing")

    assert face.ids(flow_id="f-1") == ["t-1", "t-3", "t-5", "a-1"]
    assert face.ids(flow_id="f-1", kind="TIMER") == ["t-1", "t-3", "t-5"]
    assert face.ids(kind=ScheduleKind.ACTION_TIMEOUT) == ["a-1"]
    assert face.ids(kind="action_timeout") == ["a-1"]
    assert face.ids(handler="billing") == ["h-1"]
    assert face.ids(id_prefix="tie-") == ["tie-a", "tie-b"]
    assert face.ids(id_prefix="t-", flow_id="f-0") == ["t-0", "t-2", "t-4", "t-6"]
    assert face.ids(id_prefix="nobody") == []


def test_the_due_window_is_from_inclusive_to_exclusive(face):
    seed(face)

    window = face.ids(due_from=NOW + 31 * MIN, due_to=NOW + 34 * MIN)

    assert window == ["t-1", "t-2", "t-3", "tie-a", "tie-b"]
    assert face.ids(due_to=NOW + 30 * MIN) == []
    paged = face.call("timers", due_from=NOW + 31 * MIN, due_to=NOW + 34 * MIN, limit=2)
    following = face.call(
        "timers", due_from=NOW + 31 * MIN, due_to=NOW + 34 * MIN, limit=10, after=paged.next
    )
    assert [t.id for t in paged] + [t.id for t in following] == window


def test_an_id_prefix_with_regex_characters_is_taken_literally(face):
    face.schedule("a.b", MIN)
    face.schedule("axb", MIN)
    face.schedule("(x", MIN)

    assert face.ids(id_prefix="a.") == ["a.b"]
    assert face.ids(id_prefix="(") == ["(x"]


def test_a_record_carries_what_the_timer_holds(face):
    every = Recurrence.every(timedelta(hours=1), start=NOW)
    face.schedule(
        "rich", 5 * MIN, flow_id="flow-9", payload={"order": 42}, handler="h", recurrence=every
    )

    info = face.info("rich")

    assert isinstance(info, TimerInfo)
    assert (info.id, info.kind, info.handler, info.flow_id) == (
        "rich", ScheduleKind.TIMER, "h", "flow-9",
    )  # fmt: skip
    assert info.due == NOW + 5 * MIN
    assert info.state == "scheduled"
    assert (info.attempts, info.last_error, info.node, info.lease_until) == (0, None, None, None)
    assert info.recurrence is not None and info.recurrence.interval == timedelta(hours=1)
    assert info.payload == {"order": 42}
    assert info.payload_size == len('{"order":42}')


def test_a_failed_delivery_shows_in_attempts_and_due(face):
    face.on_timer(lambda f, item, attempt: (_ for _ in ()).throw(RuntimeError("boom")))
    face.schedule("flaky", MIN)

    face.advance(MIN)

    info = face.info("flaky")
    assert info.attempts == 1
    assert info.due == NOW + MIN + timedelta(seconds=3)  # redelivered after the backoff
    assert info.last_error is not None and "boom" in info.last_error


def test_a_replacement_shows_no_earlier_failure(face):
    face.on_timer(lambda f, item, attempt: (_ for _ in ()).throw(RuntimeError("boom")))
    face.schedule("flaky", MIN)
    face.advance(MIN)
    assert face.info("flaky").last_error is not None

    face.schedule("flaky", 10 * MIN)  # a new form: its own failures only

    info = face.info("flaky")
    assert (info.attempts, info.last_error) == (0, None)


@pytest.mark.parametrize("kind", KINDS)
def test_dead_letters_are_listed_only_with_state_dead(make_face, kind):
    face = make_face(kind, max_attempts=1)
    face.on_timer(lambda f, item, attempt: (_ for _ in ()).throw(RuntimeError("dead")))
    face.schedule("doomed", MIN)
    face.schedule("waiting", 10 * MIN)
    face.advance(2 * MIN)

    assert face.ids() == ["waiting"]
    dead = face.all(state="dead")
    assert [d.id for d in dead] == ["doomed"]
    assert dead[0].state == "dead"
    assert dead[0].attempts == 1
    assert dead[0].last_error is not None and "dead" in dead[0].last_error
    assert face.ids(state="dead", id_prefix="wait") == []


def test_state_selects_scheduled_and_paused(face):
    seed(face)
    assert face.call("pause", "t-2")
    assert face.call("pause", "tie-a")

    assert face.ids(state="paused") == ["t-2", "tie-a"]
    assert "t-2" not in face.ids(state="scheduled")
    assert len(face.ids(state="scheduled")) == 7
    assert face.info("t-2").state == "paused"
    assert face.ids(state="claimed") == []


def test_iter_timers_reads_page_by_page(face):
    for n in range(23):
        face.schedule(f"i-{n:02d}", n * MIN)
    pages: list[int] = []
    # One read per page: of the store on a node scheduler, else of the steering hook.
    if isinstance(face.scheduler, NodeScheduler | AsyncNodeScheduler):
        target, name = face.scheduler.store, "timers"
    else:
        target, name = face.scheduler, "_timer_page"
    original = getattr(target, name)

    def counting(filters):
        pages.append(filters.limit)
        return original(filters)

    setattr(target, name, counting)

    assert face.ids(limit=5) == [f"i-{n:02d}" for n in range(23)]
    assert pages == [5] * 5
    pages.clear()
    assert len(face.ids()) == 23
    assert pages == [500]  # its own page size unless told


@pytest.mark.parametrize(
    ("arguments", "error", "named"),
    [
        ({"limit": 0}, ValueError, "limit"),
        ({"limit": MAX_LIMIT + 1}, ValueError, "limit"),
        ({"limit": True}, TypeError, "limit"),
        ({"limit": "50"}, TypeError, "limit"),
        ({"due_from": datetime(2026, 1, 1)}, ValueError, "due_from"),
        ({"due_to": datetime(2026, 1, 1)}, ValueError, "due_to"),
        ({"due_to": "2026-01-01"}, TypeError, "due_to"),
        ({"after": "not-a-cursor"}, ValueError, "after"),
        ({"after": "t1.!!!"}, ValueError, "after"),
        ({"after": "t1.WyJ4Il0"}, ValueError, "after"),  # ["x"]: the wrong shape
        ({"after": 7}, TypeError, "after"),
        ({"state": "running"}, ValueError, "state"),
        ({"kind": "ALARM"}, ValueError, "kind"),
        ({"kind": 3}, TypeError, "kind"),
        ({"id_prefix": 3}, TypeError, "id_prefix"),
        ({"flow_id": ["f"]}, TypeError, "flow_id"),
    ],
)
def test_bad_arguments_are_refused_by_name(face, arguments, error, named):
    with pytest.raises(error, match=named):
        face.call("timers", **arguments)
    with pytest.raises(error, match=named):  # at the call, before any page is read
        face.scheduler.iter_timers(**arguments)


def test_a_cursor_round_trips_and_keeps_microseconds():
    due = datetime(2026, 3, 1, 12, 0, 0, 123456).astimezone()
    assert decode_cursor(encode_cursor(due, "ü:1")) == (due, "ü:1")
    with pytest.raises(TypeError, match="unexpected keyword"):
        from flowsched import InMemoryScheduler

        InMemoryScheduler().timers(overdue=True)  # type: ignore[call-arg]


def test_many_timers_at_one_instant_page_by_id(face):
    for n in reversed(range(8)):
        face.schedule(f"same-{n}", 5 * MIN)
    face.schedule("later", 6 * MIN)
    face.schedule("earlier", 4 * MIN)

    seen = []
    page = face.call("timers", limit=3)
    while True:
        seen.append([t.id for t in page])
        if page.next is None:
            break
        page = face.call("timers", limit=3, after=page.next)

    assert seen == [
        ["earlier", "same-0", "same-1"],
        ["same-2", "same-3", "same-4"],
        ["same-5", "same-6", "same-7"],
        ["later"],
    ]
    window = face.ids(due_from=NOW + 5 * MIN, due_to=NOW + 5 * MIN + timedelta(seconds=1), limit=2)
    assert window == [f"same-{n}" for n in range(8)]


def test_pages_stay_whole_across_gaps_in_due_times(face):
    # Mongo cursors carry a reach (about two pages ahead at the last page's pace): a page
    # must read on past it when the timers after the cursor are spread thinner.
    minutes = [1, 2, 3, 4, 5, 60, 61, 62, 600, 6000, 6001]
    for n, minute in enumerate(minutes):
        face.schedule(f"g-{n:02d}", minute * MIN)

    pages = []
    page = face.call("timers", limit=3)
    while True:
        pages.append([t.id for t in page])
        if page.next is None:
            break
        page = face.call("timers", limit=3, after=page.next)

    assert pages == [
        ["g-00", "g-01", "g-02"],
        ["g-03", "g-04", "g-05"],
        ["g-06", "g-07", "g-08"],
        ["g-09", "g-10"],
    ]
