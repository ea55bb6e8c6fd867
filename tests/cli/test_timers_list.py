"""``flowsched timers list``: soonest due first, filters, and pages that say how to go on."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from timers_kit import NOW, ids, rows

from flowsched.port import ScheduleKind
from flowsched.recurrence import Recurrence

MIN = timedelta(minutes=1)


def seed_seven(namespace) -> list[str]:
    """o-0 .. o-6 due 10 minutes apart, from 30 minutes ago; flows f-0, f-1, f-2 in turn."""
    for n in range(7):
        namespace.timer(f"o-{n}", (n - 3) * 10 * MIN, flow_id=f"f-{n % 3}")
    return [f"o-{n}" for n in range(7)]


def test_lists_timers_soonest_due_first_with_their_details(namespace, timers):
    namespace.timer("later", 20 * MIN, ScheduleKind.ACTION_TIMEOUT, flow_id="flow-1")
    namespace.timer("late", -10 * MIN, flow_id="flow-2")
    namespace.timer("soon", 5 * MIN, ScheduleKind.PROCESSING_TIMEOUT)

    code, out, err = timers("list")

    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "timers in flowsched.timers at mongodb://localhost:27017"
    assert rows(out) == [
        ["late", "TIMER", "2026-03-01T11:50:00.000Z (overdue)", "flow-2", "0", "-"],
        ["soon", "PROCESSING_TIMEOUT", "2026-03-01T12:05:00.000Z", "-", "0", "-"],
        ["later", "ACTION_TIMEOUT", "2026-03-01T12:20:00.000Z", "flow-1", "0", "-"],
    ]
    assert out.splitlines()[-1] == "showing 1-3 of 3"


def test_kind_and_flow_filters_combine(namespace, timers):
    seed_seven(namespace)
    namespace.timer("t-1", MIN, ScheduleKind.ACTION_TIMEOUT, flow_id="f-1")

    assert ids(timers("list", "--flow", "f-1")[1]) == ["o-1", "t-1", "o-4"]
    assert ids(timers("list", "--flow", "f-1", "--kind", "timer")[1]) == ["o-1", "o-4"]
    assert ids(timers("list", "--kind", "ACTION_TIMEOUT")[1]) == ["t-1"]
    assert timers("list", "--flow", "nobody")[1].splitlines()[-1] == "no timers"


def test_overdue_means_due_before_now_and_not_being_delivered(namespace, clock, timers):
    namespace.timer("waiting", -10 * MIN)
    namespace.timer("running", -5 * MIN, ScheduleKind.ACTION_TIMEOUT)
    namespace.timer("orphaned", -20 * MIN, ScheduleKind.PROCESSING_TIMEOUT)
    namespace.timer("future", 10 * MIN)
    assert namespace.claim(ScheduleKind.ACTION_TIMEOUT, "node-b", lease=10 * MIN) == ["running"]
    assert namespace.claim(ScheduleKind.PROCESSING_TIMEOUT, "node-c", lease=MIN) == ["orphaned"]
    clock.advance(2 * MIN)  # node-c stopped renewing: its lease ran out a minute ago

    code, out, _ = timers("list", "--overdue")

    assert code == 0
    table = {row[0]: row for row in rows(out)}
    assert list(table) == ["orphaned", "waiting"]
    assert table["orphaned"][5] == "node-c, lease ran out 2026-03-01T12:01:00.000Z"
    everything = {row[0]: row for row in rows(timers("list")[1])}
    assert everything["running"][5] == "node-b until 2026-03-01T12:10:00.000Z"
    assert "(overdue)" not in everything["running"][2]


def test_pages_say_where_they_are_and_how_to_go_on(namespace, timers):
    expected = seed_seven(namespace)

    first = timers("list", "--limit", "3")[1]
    second = timers("list", "--limit", "3", "--page", "2")[1]
    last = timers("list", "--limit", "3", "--page", "3")[1]

    assert ids(first) + ids(second) + ids(last) == expected
    assert first.splitlines()[-1] == "showing 1-3 of 7, next: --page 2"
    assert second.splitlines()[-1] == "showing 4-6 of 7, next: --page 3"
    assert last.splitlines()[-1] == "showing 7-7 of 7"
    code, past, _ = timers("list", "--limit", "3", "--page", "4")
    assert (code, ids(past)) == (0, [])
    assert past.splitlines()[-1] == "page 4 is past the end: 7 timers in all"


def test_after_an_id_continues_from_it_while_earlier_timers_fire(namespace, timers):
    seed_seven(namespace)
    namespace.timer("o-3b", 0 * MIN)  # due with o-3: ties are ordered by id

    first = timers("list", "--limit", "4")[1]
    assert ids(first) == ["o-0", "o-1", "o-2", "o-3"]
    namespace.scheduler.cancel("o-0")  # fired meanwhile: --page 2 would now skip o-3b
    code, out, _ = timers("list", "--limit", "3", "--after", "o-3")

    assert code == 0
    assert ids(out) == ["o-3b", "o-4", "o-5"]
    assert out.splitlines()[-1] == "showing 4-6 of 7, next: --after o-5"
    assert timers("list", "--after", "o-6")[1].splitlines()[-1] == (
        "that id is past the end: 7 timers in all"
    )


def test_after_an_id_that_is_gone_exits_1(namespace, timers):
    seed_seven(namespace)

    code, out, err = timers("list", "--after", "o-99")

    assert (code, out) == (1, "")
    assert (
        err
        == "flowsched: error: --after o-99: no such id any more (fired or removed?); use --page\n"
    )


def test_json_gives_the_page_and_every_field(namespace, timers):
    seed_seven(namespace)

    code, out, _ = timers("list", "--json", "--limit", "2", "--flow", "f-0")

    assert code == 0
    page = json.loads(out)
    assert {k: page[k] for k in ("total", "first", "last", "next_page", "next_after")} == {
        "total": 3, "first": 1, "last": 2, "next_page": 2, "next_after": "o-3",
    }  # fmt: skip
    assert [timer["id"] for timer in page["timers"]] == ["o-0", "o-3"]
    first = page["timers"][0]
    assert first["due"] == "2026-03-01T11:30:00.000Z"
    assert first["overdue"] is True
    assert first["key"] == f"o-0#{first['generation']}"
    assert first["claim"] is None
    following = json.loads(timers("list", "--json", "--flow", "f-0", "--after", "o-3")[1])
    assert [t["id"] for t in following["timers"]] == ["o-6"]
    assert (following["first"], following["next_page"], following["next_after"]) == (3, None, None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit", "0"], "--limit 0: must be between 1 and 1000"),
        (["--limit", "1001"], "--limit 1001: must be between 1 and 1000"),
        (["--page", "0"], "--page 0: pages are numbered from 1"),
        (["--page", "2", "--after", "o-1"], "--page and --after: give one or the other"),
        (["--kind", "alarm"], "--kind 'alarm': not one of ACTION_TIMEOUT, ACTION_RETRY, "
                              "PROCESSING_TIMEOUT, TIMER"),
        (["--timeout", "soon"], "--timeout 'soon':"),
        (["--timeout", "0s"], "--timeout '0s': must be a duration above zero and at most 1d"),
        (["--timeout", "12d"], "--timeout '12d': must be a duration above zero and at most 1d"),
        (["--collection", "a..b"], "--collection 'a..b': must be a MongoDB collection name"),
        (["--db", "my db"], "--db 'my db': must be a MongoDB database name"),
    ],
)  # fmt: skip
def test_bad_options_are_one_line_and_exit_2(namespace, timers, args, message):
    code, out, err = timers("list", *args)

    assert (code, out) == (2, "")
    assert err.startswith(f"flowsched: error: {message}")
    assert err.count("\n") == 1


def test_a_malformed_document_is_listed_with_its_reason(namespace, timers):
    namespace.timer("fine", MIN)
    namespace.collection.insert_one({"_id": "odd", "kind": "ALARM", "due": NOW, "generation": 1})

    code, out, _ = timers("list")

    assert code == 0
    table = {row[0]: row for row in rows(out)}
    assert table["odd"][5].startswith("malformed: kind 'ALARM' is not one of")
    assert table["fine"][1] == "TIMER"


def test_recurring_items_show_how_they_repeat(namespace, timers):
    namespace.timer("hourly", MIN)
    namespace.timer("once", 2 * MIN)
    every_hour = Recurrence.every(timedelta(hours=1), start=NOW).to_json()
    namespace.collection.update_one({"_id": "hourly"}, {"$set": {"recurrence": every_hour}})

    out = timers("list")[1]

    assert "repeats" in out
    assert {row[0]: row[6] for row in rows(out)} == {"hourly": "every 1h", "once": "-"}
    shown = dict(row for row in rows(timers("show", "hourly")[1]) if row[0])
    assert shown["recurrence"] == "every 1h"
    assert json.loads(timers("show", "hourly", "--json")[1])["recurrence"] == every_hour
