"""``history()`` on the MongoDB wire server: five failed attempts on one node, read back
whole on a second node, with the attempts riding on the settles (no round trip of their own
per attempt: one history write per settle)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched import ScheduleItem, ScheduleKind
from flowsched.clock import ManualClock

pytestmark = pytest.mark.wire
pytest.importorskip("pymongo")

S = timedelta(seconds=1)


def test_five_failures_on_one_node_are_read_on_another(mongo_db: Any) -> None:
    from flowsched.mongo import MongoScheduler

    # Near the wall clock: the server's TTL monitor judges expires_at by its own clock.
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    alpha = MongoScheduler(mongo_db["timers"], node_id="alpha", clock=clock)
    beta = MongoScheduler(mongo_db["timers"], node_id="beta", clock=clock)

    def handler(item: ScheduleItem, attempt: int) -> None:
        if attempt < 5:
            raise TimeoutError(f"acquirer timed out #{attempt}")

    alpha.register("pay", handler)
    alpha.start()
    try:
        alpha.schedule(ScheduleItem("w-1", ScheduleKind.TIMER, clock.now(), handler="pay"))
        clock.advance(10 * 60 * S)
        attempts = beta.history("w-1")
    finally:
        alpha.close()
        beta.close()

    assert [a.outcome for a in attempts] == ["failed"] * 5 + ["succeeded"]
    assert {a.node for a in attempts} == {"alpha"}
    assert [a.error_message for a in attempts[:5]] == [f"acquirer timed out #{n}" for n in range(5)]
    assert all(a.ended is not None and a.started <= a.ended for a in attempts)
    assert [a.started for a in attempts] == sorted(a.started for a in attempts)
    stored = mongo_db["timers_history"].find_one({"_id": "w-1"})
    assert len(stored["attempts"]) == 6
    indexes = {i["name"]: i for i in mongo_db["timers_history"].list_indexes()}
    assert indexes["history_ttl"]["expireAfterSeconds"] == 0
