"""``flowsched timers pause ID`` / ``resume ID``, and how ``list`` shows a paused timer."""

from __future__ import annotations

import json
from datetime import timedelta

from timers_kit import ids, rows

from flowsched.port import ScheduleKind

MIN = timedelta(minutes=1)


def test_pause_stops_a_timer_and_list_marks_it(namespace, clock, timers):
    namespace.timer("held", -5 * MIN)
    namespace.timer("free", -5 * MIN)

    code, out, err = timers("pause", "held")

    assert (code, err) == (0, "")
    assert out == "paused held: it fires nothing until `flowsched timers resume held`\n"
    table = {row[0]: row for row in rows(timers("list")[1])}
    assert table["held"][2] == "2026-03-01T11:55:00.000Z (paused)"
    assert table["free"][2] == "2026-03-01T11:55:00.000Z (overdue)"
    assert ids(timers("list", "--state", "paused")[1]) == ["held"]
    assert ids(timers("list", "--overdue")[1]) == ["free"]
    assert json.loads(timers("show", "held", "--json")[1])["other_fields"]["paused"] is True
    fired: list[str] = []
    namespace.scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    namespace.scheduler.run_due()
    assert fired == ["free"]


def test_resume_makes_an_overdue_timer_due_now(namespace, clock, timers):
    namespace.timer("held", -5 * MIN)
    timers("pause", "held")

    code, out, _ = timers("resume", "held")

    assert code == 0
    assert out == "resumed held: due 2026-03-01T12:00:00.000Z\n"
    assert ids(timers("list", "--state", "scheduled")[1]) == ["held"]


def test_an_unknown_id_exits_1(namespace, timers):
    namespace.timer("other", MIN)
    for verb in ("pause", "resume"):
        code, out, err = timers(verb, "nobody")
        assert (code, out) == (1, "")
        assert err == "flowsched: error: no timer nobody in flowsched.timers\n"


def test_a_bad_state_is_one_line_and_exit_2(namespace, timers):
    namespace.timer("other", MIN)
    code, _, err = timers("list", "--state", "dead")

    assert code == 2
    assert err.startswith("flowsched: error: --state 'dead': not one of scheduled, claimed")


def test_stats_does_not_call_a_paused_timer_unserved(namespace, timers):
    namespace.timer("held", MIN)
    assert json.loads(timers("stats", "--json")[1])["unserved_routes"] == ["k:TIMER"]

    timers("pause", "held")

    assert json.loads(timers("stats", "--json")[1])["unserved_routes"] == []
