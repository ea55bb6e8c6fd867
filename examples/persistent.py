"""The credit-transfer flow on MongoDB, surviving a process restart in the middle of it.

Needs a MongoDB (``FLOWSCHED_MONGO_URI``; ``make test`` starts a local wire-compatible
server, or use ``bash tools/with-mongo.sh python examples/persistent.py``) and the driver
(``pip install -e '.[mongo]'``).

Timers live in ``MongoScheduler``'s collection (built from ``config/application.conf`` with
``MongoScheduler.from_config``) and flow instances in ``MongoFlowStore``'s,
so nothing of the flow lives only in a process. This script runs two real processes on one
fresh database, with a compressed clock (a ManualClock both agree on; a started scheduler
delivers inside ``clock.advance``, each timer at its due time, so hours pass at once):

1. the first starts tx-1; the fraud service is down; it retries at +10 s, then the process
   exits with the next retry and the 2 h action timeout still pending;
2. the second builds a new domain from the same collections, knows nothing else, and moves
   the clock on: the remaining retries run (+30:10, +1:00:10, +1:30:10) and the action
   timeout fires at +2:00:00 and moves the reloaded instance to FraudTimedOut.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from credit_transfer import (
    FLOW,
    TimelinePrinter,
    credit_transfer_flow,
    fraud_service,
    scheme_rules_service,
)
from pymongo import MongoClient

from flowsched import FlowDomain, ManualClock, MongoFlowStore, MongoScheduler, SchedulingConfig

CONFIG = Path(__file__).resolve().parent.parent / "config" / "application.conf"
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
RESTART_AT = START + timedelta(seconds=20)


def build(db: Any, clock: ManualClock, node: str) -> tuple[FlowDomain, MongoScheduler]:
    """Everything a process needs: state comes from the two collections only.

    The scheduler is built from the file's ``ipf-scheduler`` block: its ``uri`` and
    ``database-name`` take ``FLOWSCHED_MONGO_URI`` and ``FLOWSCHED_SCHEDULER_DATABASE`` from
    the environment (``${?...}`` in HOCON), which :func:`main` sets to a fresh database."""
    config = SchedulingConfig.from_file(CONFIG)
    scheduler = MongoScheduler.from_config(config, node_id=node, clock=clock)
    timeline = TimelinePrinter(START)
    domain = (
        FlowDomain.builder()
        .with_config(config)
        .with_scheduler_adapter(scheduler)
        .with_flow_store(MongoFlowStore(db["flow_instances"]))
        .with_clock(clock)
        .with_flow(credit_transfer_flow())
        .with_action_adapter("ValidateAgainstSchemeRules", scheme_rules_service)
        .with_action_adapter("CheckFraud", fraud_service)
        .with_listener(timeline)
        .build()
    )
    return domain, scheduler


def first_process(db: Any) -> None:
    clock = ManualClock(START)
    domain, scheduler = build(db, clock, "process-1")
    scheduler.start()
    domain.start(FLOW, "tx-1", offsets={"AcceptedAt": START})
    clock.advance(RESTART_AT - clock.now())
    print(f"-- process {os.getpid()} exits; pending in MongoDB:")
    for item in domain.timers("tx-1"):
        print(f"     {item.kind.value:<18} due +{item.due - START}")
    scheduler.close()  # also closes the client from_config made


def second_process(db: Any) -> None:
    clock = ManualClock(RESTART_AT)
    domain, scheduler = build(db, clock, "process-2")
    instance = domain.instance("tx-1")
    assert instance is not None
    print(
        f"-- process {os.getpid()} starts; reloaded tx-1 in {instance.state} "
        f"(attempts so far: {instance.actions[0].attempts})"
    )
    scheduler.start()
    clock.advance(START + timedelta(hours=3) - clock.now())
    scheduler.close()
    final = domain.instance("tx-1")
    print(f"\ntx-1 ended in {final.state if final else 'unknown'}")


def main() -> None:
    uri = os.environ.get("FLOWSCHED_MONGO_URI")
    if not uri:
        sys.exit(
            "set FLOWSCHED_MONGO_URI (or run: bash tools/with-mongo.sh python "
            "examples/persistent.py)"
        )
    client: MongoClient[Any] = MongoClient(uri, serverSelectionTimeoutMS=10_000)
    if len(sys.argv) == 3:  # a child process: run one phase on the given database
        phase, name = sys.argv[1:]
        os.environ["FLOWSCHED_SCHEDULER_DATABASE"] = name  # read by config/application.conf
        (first_process if phase == "first" else second_process)(client[name])
        return
    name = f"flowsched_persistent_{uuid.uuid4().hex[:8]}"
    try:
        for phase in ("first", "second"):
            subprocess.run([sys.executable, __file__, phase, name], check=True)
    finally:
        client.drop_database(name)


if __name__ == "__main__":
    main()
