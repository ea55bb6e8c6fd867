"""The timer verbs count buckets as the collection's nodes do (recorded in ``<name>_settings``).

Every look-up by id names the item's bucket; with a count other than the nodes', ``cancel``
would report "no timer" for a timer that then fires. ``migrate --buckets`` is checked against
the recorded count too.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flowsched.clock import ManualClock
from flowsched.mongo import MongoScheduler
from flowsched.mongo.documents import bucket_of
from flowsched.port import ScheduleItem, ScheduleKind

MIN = timedelta(minutes=1)
FAR = next(f"t-{i}" for i in range(100) if bucket_of(f"t-{i}", 4) != 0)


def four_bucket_node(mock_client: Any, clock: ManualClock) -> MongoScheduler:
    collection = mock_client["flowsched"]["timers"]
    return MongoScheduler(collection, node_id="node-a", clock=clock, buckets=4)


def test_show_and_cancel_find_a_timer_outside_bucket_0(mock_client, clock, timers):
    node = four_bucket_node(mock_client, clock)
    node.schedule(ScheduleItem(FAR, ScheduleKind.TIMER, clock.now() + MIN))

    assert timers("show", FAR)[0] == 0
    assert timers("cancel", FAR) == (0, f"cancelled {FAR}\n", "")
    assert not node.exists(FAR)


def test_migrate_with_another_bucket_count_is_refused_naming_both(mock_client, clock, timers):
    node = four_bucket_node(mock_client, clock)
    node.schedule(ScheduleItem(FAR, ScheduleKind.TIMER, clock.now() + MIN))

    code, out, err = timers("migrate", "--buckets", "2")

    assert (code, out) == (2, "")
    assert err.startswith("flowsched: error: buckets = 2: but flowsched.timers spreads its ")
    assert "over 4 bucket(s) (recorded by 'node-a' in flowsched.timers_settings)" in err
    assert timers("migrate")[0] == 0  # the recorded count by default
