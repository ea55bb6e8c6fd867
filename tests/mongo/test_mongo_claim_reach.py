"""The claim query's reach: after a full batch a claim reads about two batches further on,
not the whole backlog - and still never skips an older item (mongo/candidates.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flowsched.mongo.candidates import reach_after
from flowsched.port import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER
MS = timedelta(milliseconds=1)


def backlog(scheduler: Any, clock: Any, count: int, prefix: str = "t") -> None:
    """``count`` items due 1 ms apart, all due by the time the test claims."""
    start = clock.now() - timedelta(seconds=10)
    for n in range(count):
        scheduler.schedule(ScheduleItem(f"{prefix}-{n:03}", TIMER, start + n * MS))


def queries(scheduler: Any) -> list[dict[str, Any]]:
    """The ``ready_at`` conditions of the claim queries the next take() sends."""
    seen: list[dict[str, Any]] = []
    query = scheduler._claims.candidates
    ranges = query._ranges

    def recording(routes: Any, after: Any, upto: Any, limit: int) -> Any:
        seen.append({"after": after, "upto": upto, "limit": limit})
        return (yield from ranges(routes, after, upto, limit))

    query._ranges = recording
    return seen


def test_after_a_full_batch_the_next_claim_stops_at_twice_its_span(make, clock):
    scheduler = make(batch_size=10)
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    backlog(scheduler, clock, 100)
    first = scheduler._claimer.take(10)
    assert first.won == 10
    sent = queries(scheduler)
    second = scheduler._claimer.take(10)
    assert [claim.item.id for claim in second.deliver] == [f"t-{n:03}" for n in range(10, 20)]
    assert len(sent) == 1  # one query: the reach held a full batch
    start = clock.now() - timedelta(seconds=10)
    assert sent[0]["upto"] == start + 9 * MS + 2 * (9 * MS)  # last + 2 x span (0..9 ms)


def test_an_item_older_than_the_reach_is_never_skipped(make, clock):
    scheduler = make(batch_size=10)
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    backlog(scheduler, clock, 100)
    scheduler._claimer.take(10)
    old = clock.now() - timedelta(hours=1)  # scheduled meanwhile, due long before the rest
    scheduler.schedule(ScheduleItem("old", TIMER, old))
    second = scheduler._claimer.take(10)
    assert second.deliver[0].item.id == "old"


def test_a_short_reach_reads_on_to_the_horizon_in_a_second_query(make, clock):
    scheduler = make(batch_size=10)
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    backlog(scheduler, clock, 10)  # 0..9 ms: a full batch, then
    backlog(scheduler, clock, 30, prefix="u")  # the same instants again, and later ones
    scheduler._claimer.take(10)
    sent = queries(scheduler)
    second = scheduler._claimer.take(10)
    assert second.won == 10
    assert len(sent) in (1, 2)
    assert scheduler.run_due() == 20  # everything left, whatever the reach
    assert scheduler._claimer.take(10).won == 0


def test_with_a_backlog_spread_out_the_reach_finds_the_rest_in_two_queries(make, clock):
    scheduler = make(batch_size=10)
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    backlog(scheduler, clock, 10)  # a dense batch 0..9 ms
    far = clock.now() - timedelta(seconds=1)  # then one item long after the reach
    scheduler.schedule(ScheduleItem("far", TIMER, far))
    scheduler._claimer.take(10)
    sent = queries(scheduler)
    second = scheduler._claimer.take(10)
    assert [claim.item.id for claim in second.deliver] == ["far"]
    assert len(sent) == 2 and sent[1]["after"] == sent[0]["upto"]


def test_the_reach_is_only_set_by_a_full_batch():
    def doc(ms: int) -> dict[str, Any]:
        from datetime import UTC, datetime

        return {"ready_at": datetime(2026, 1, 1, tzinfo=UTC) + ms * MS}

    assert reach_after([doc(0), doc(5)], 3) is None
    assert reach_after([doc(0), doc(5), doc(10)], 3) == doc(30)["ready_at"]
    assert reach_after([doc(4)], 1) is None  # one item has no span to go by
    assert reach_after([doc(4), doc(4)], 2) is None  # nor a batch due at one instant
