"""``flowsched timers show`` and ``cancel``: one timer, found by id; exit 1 when there is none."""

from __future__ import annotations

import json
from datetime import timedelta

from timers_kit import rows

from flowsched.mongo import MongoTimerStore
from flowsched.outcomes import Redeliver
from flowsched.port import ScheduleItem, ScheduleKind, kind_route
from flowsched.store import Settlement

MIN = timedelta(minutes=1)


def fields(out: str) -> dict[str, str]:
    """``show``'s table as {field: value}, multi-line values joined by newlines."""
    shown: dict[str, list[str]] = {}
    name = ""
    for row in rows(out):
        name = row[0] or name
        shown.setdefault(name, []).append(row[1])
    return {key: "\n".join(lines) for key, lines in shown.items()}


def fail_once(namespace, item_id: str) -> None:
    """Deliver ``item_id`` once to a handler that raises (it is then due again in 3 s)."""

    def gateway_down(item: ScheduleItem, attempt: int) -> None:
        raise ConnectionError("gateway down")

    namespace.scheduler.subscribe(ScheduleKind.TIMER, gateway_down)
    namespace.scheduler.run_due()


def test_show_gives_every_field_of_a_timer(namespace, clock, timers):
    item = namespace.timer("pay-1", -MIN, flow_id="order-7", payload={"order": "o-7", "n": 2})
    fail_once(namespace, "pay-1")

    code, out, err = timers("show", "pay-1")

    assert (code, err) == (0, "")
    shown = fields(out)
    assert shown["id"] == "pay-1"
    assert shown["kind"] == "TIMER"
    assert shown["due"] == "2026-03-01T12:00:03.000Z (in 3s)"  # redelivered after 3 s
    assert shown["flow"] == "order-7"
    assert shown["generation"] == str(item.generation)
    assert shown["key"] == item.key
    assert shown["attempts"] == "1 failed, 1 delivery started"
    assert shown["last error"] == "ConnectionError: gateway down"
    assert shown["claimed by / lease"] == "-"
    assert json.loads(shown["payload"]) == {"order": "o-7", "n": 2}


def test_show_json_has_the_same_fields(namespace, timers):
    item = namespace.timer("pay-1", 5 * MIN, payload={"order": "o-7"})
    assert namespace.claim(ScheduleKind.TIMER, "node-a", 10 * MIN) == []  # not due: no claim

    code, out, _ = timers("show", "pay-1", "--json")

    assert code == 0
    shown = json.loads(out)
    assert shown["payload"] == {"order": "o-7"}
    assert (shown["generation"], shown["key"]) == (item.generation, item.key)
    assert (shown["due"], shown["overdue"], shown["claim"]) == (
        "2026-03-01T12:05:00.000Z", False, None,
    )  # fmt: skip
    assert (shown["attempts"], shown["deliveries"], shown["last_error"]) == (0, 0, None)


def test_show_of_an_unknown_id_is_one_line_and_exit_1(namespace, timers):
    namespace.timer("pay-1", MIN)
    namespace.dead_letter("pay-9", "boom", died_ago=MIN)

    assert timers("show", "nope") == (
        1,
        "",
        "flowsched: error: no timer nope in flowsched.timers\n",
    )
    code, _, err = timers("show", "pay-9")
    assert code == 1
    assert err == (
        "flowsched: error: no timer pay-9 in flowsched.timers "
        "(it is a dead letter: flowsched timers requeue pay-9)\n"
    )


def test_cancel_removes_the_timer_and_a_second_cancel_exits_1(namespace, timers):
    namespace.timer("pay-1", MIN)
    namespace.timer("pay-2", MIN)

    assert timers("cancel", "pay-1") == (0, "cancelled pay-1\n", "")
    assert not namespace.scheduler.exists("pay-1")
    assert namespace.scheduler.exists("pay-2")
    assert timers("cancel", "pay-1") == (
        1,
        "",
        "flowsched: error: no timer pay-1 in flowsched.timers\n",
    )


def test_cancel_during_a_delivery_is_fenced_like_the_schedulers_own_cancel(
    namespace, clock, timers
):
    namespace.timer("pay-1", -MIN)
    node_b = MongoTimerStore(namespace.collection, clock=clock, node="node-b")
    [running] = node_b.claim_started([kind_route(ScheduleKind.TIMER)], "node-b", 10 * MIN, 10)

    code, out, _ = timers("cancel", "pay-1")

    assert code == 0
    assert out == (
        "cancelled pay-1 (a delivery running on node-b may still finish; "
        "its outcome is not written)\n"
    )
    # node-b's handler fails and it writes a redelivery: fenced on the cancelled schedule.
    failed = Redeliver(clock.now() + MIN, 1, "boom")
    [settled] = node_b.settle([Settlement.of(running, failed)])
    assert not settled.applied
    assert namespace.store.find("pay-1") is None
