"""``flowsched timers dead-letters`` and ``requeue``: see what gave up, and put it back."""

from __future__ import annotations

import json
from datetime import timedelta

from timers_kit import ids, rows

from flowsched.delivery import RedeliveryPolicy
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind

MIN = timedelta(minutes=1)


def test_dead_letters_are_listed_oldest_first(namespace, timers):
    namespace.timer("alive", MIN)
    namespace.dead_letter("pay-2", "TimeoutError: no answer", died_ago=5 * MIN, flow_id="f-2")
    namespace.dead_letter("pay-1", "ValueError: " + "x" * 200, died_ago=9 * MIN)

    code, out, _ = timers("dead-letters")

    assert code == 0
    assert (
        out.splitlines()[0] == "dead letters in flowsched.timers_dead at mongodb://localhost:27017"
    )
    table = rows(out)
    assert [row[0] for row in table] == ["pay-1", "pay-2"]
    assert table[1] == [
        "pay-2", "ACTION_RETRY", "-", "5", "TimeoutError: no answer", "2026-03-01T11:55:00.000Z",
        "f-2",
    ]  # fmt: skip
    assert table[0][4] == "ValueError: " + "x" * 67 + "…"  # cut in the table ...
    whole = json.loads(timers("dead-letters", "--json")[1])["dead_letters"]
    assert whole[0]["error"] == "ValueError: " + "x" * 200  # ... whole in JSON
    assert whole[1] == {
        "id": "pay-2", "kind": "ACTION_RETRY", "handler": None, "due": "2026-03-01T11:55:00.000Z",
        "flow_id": "f-2", "payload": None, "generation": 7, "attempts": 5,
        "error": "TimeoutError: no answer", "dead_at": "2026-03-01T11:55:00.000Z",
    }  # fmt: skip


def test_dead_letters_page_and_filter_like_list(namespace, timers):
    namespace.timer("alive", MIN)
    for n in range(5):
        namespace.dead_letter(f"d-{n}", "boom", died_ago=(10 - n) * MIN, flow_id=f"f-{n % 2}")

    first = timers("dead-letters", "--limit", "2")[1]
    assert ids(first) == ["d-0", "d-1"]
    assert first.splitlines()[-1] == "showing 1-2 of 5, next: --page 2"
    assert ids(timers("dead-letters", "--limit", "2", "--after", "d-1")[1]) == ["d-2", "d-3"]
    assert ids(timers("dead-letters", "--flow", "f-1")[1]) == ["d-1", "d-3"]
    assert timers("dead-letters", "--kind", "TIMER")[1].splitlines()[-1] == "no dead letters"


def test_requeue_schedules_the_dead_letter_again_with_attempts_reset(namespace, timers):
    namespace.timer("alive", MIN)
    namespace.dead_letter("pay-1", "boom", died_ago=MIN, flow_id="f-1", payload={"p": 1})

    code, out, err = timers("requeue", "pay-1")

    assert (code, err) == (0, "")
    assert out == "requeued pay-1: due 2026-03-01T12:00:00.000Z, attempts reset\n"
    shown = json.loads(timers("show", "pay-1", "--json")[1])
    assert (shown["kind"], shown["flow_id"], shown["payload"]) == ("ACTION_RETRY", "f-1", {"p": 1})
    assert (shown["due"], shown["attempts"]) == ("2026-03-01T12:00:00.000Z", 0)
    assert namespace.store.dead_letter("pay-1") is None
    assert timers("requeue", "pay-1") == (
        1, "", "flowsched: error: no dead letter pay-1 in flowsched.timers_dead\n",
    )  # fmt: skip


def test_requeue_at_a_given_time(namespace, timers):
    namespace.timer("alive", MIN)
    namespace.dead_letter("pay-1", "boom", died_ago=MIN)
    namespace.dead_letter("pay-2", "boom", died_ago=MIN)

    assert timers("requeue", "pay-1", "--at", "2026-03-02T09:30:00+01:00")[1] == (
        "requeued pay-1: due 2026-03-02T08:30:00.000Z, attempts reset\n"
    )
    assert timers("requeue", "pay-2", "--at", "2026-03-02T09:30:00")[1] == (
        "requeued pay-2: due 2026-03-02T09:30:00.000Z, attempts reset\n"  # no offset: UTC
    )
    code, _, err = timers("requeue", "pay-3", "--at", "tomorrow")
    assert (code, err) == (
        2, "flowsched: error: --at 'tomorrow': not an ISO 8601 time (e.g. 2026-03-01T12:00:00Z)\n",
    )  # fmt: skip


def test_requeue_does_not_overwrite_a_timer_scheduled_since_unless_told(namespace, timers):
    # A schedule supersedes its id's dead letter on every store; a letter beside a live timer
    # is one an older version left, or one a settle wrote as the id was scheduled again.
    namespace.timer("pay-1", 30 * MIN, payload={"new": True})
    namespace.dead_letter("pay-1", "boom", died_ago=MIN, payload={"old": True})

    code, _, err = timers("requeue", "pay-1")
    assert code == 1
    assert err == (
        "flowsched: error: pay-1 is scheduled again since it died: see `flowsched timers show "
        "pay-1`; pass --replace to overwrite it\n"
    )
    assert namespace.scheduler.get("pay-1").payload == {"new": True}

    assert timers("requeue", "pay-1", "--replace")[0] == 0
    assert namespace.scheduler.get("pay-1").payload == {"old": True}


def test_a_timer_that_exhausted_its_attempts_can_be_requeued_and_then_runs(
    namespace, clock, timers
):
    app = MongoScheduler(
        namespace.collection,
        node_id="app",
        clock=clock,
        redelivery=RedeliveryPolicy(max_attempts=2),
    )
    calls: list[int] = []

    def flaky(item: ScheduleItem, attempt: int) -> None:
        calls.append(attempt)
        if len(calls) <= 2:
            raise RuntimeError("downstream unavailable")

    app.subscribe(ScheduleKind.TIMER, flaky)
    namespace.timer("pay-1", -MIN)
    app.run_due()
    clock.advance(timedelta(seconds=3))
    app.run_due()  # second failure: dead letter
    assert ids(timers("list")[1]) == []
    letter = json.loads(timers("dead-letters", "--json")[1])["dead_letters"][0]
    assert (letter["id"], letter["attempts"]) == ("pay-1", 2)
    assert letter["error"] == "RuntimeError: downstream unavailable"

    assert timers("requeue", "pay-1")[0] == 0
    app.run_due()

    assert calls == [0, 1, 0]  # requeued with attempts reset; this time it succeeds
    assert not app.exists("pay-1")
    assert timers("dead-letters")[1].splitlines()[-1] == "no dead letters"
