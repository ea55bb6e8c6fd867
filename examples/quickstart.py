"""Quickstart: a credit-transfer flow whose timeouts, retries and deadlines come from config.

Run it with ``make demo`` (or ``python examples/quickstart.py`` after ``pip install -e .``).
Three transfers run on the in-memory scheduler under a compressed clock: a ManualClock that
jumps from one due timer to the next, so two hours pass in well under a second. What each
timer does comes from ``config/application.conf``, and so do the scheduler's settings
(``InMemoryScheduler.from_config``):

* CheckFraud: 4 retries, USER_DEFINED backoffs [10s, 30m], no jitter; a 2 h action timeout;
* processing time ValidatingSchemeRules → Complete: 3 h from the ``AcceptedAt`` offset (the
  time the customer's payment was accepted, given when the flow starts).

The transfers:

* tx-1: the fraud service answers the third attempt → Complete (its timers are cancelled);
* tx-2: the fraud service is down → 5 attempts (0, 10 s, 30 m 10 s, 60 m 10 s, 90 m 10 s),
  then the action timeout → FraudTimedOut;
* tx-3: accepted 2 h 59 m 30 s before it reached us, and the fraud service is down → the
  processing-time deadline passes 30 s in → TooLate.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from credit_transfer import (
    FLOW,
    TimelinePrinter,
    credit_transfer_flow,
    fraud_service,
    scheme_rules_service,
)

from flowsched import FlowDomain, InMemoryScheduler, ManualClock, SchedulingConfig

CONFIG = Path(__file__).resolve().parent.parent / "config" / "application.conf"
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def main() -> None:
    config = SchedulingConfig.from_file(CONFIG)
    print(f"Configuration: {CONFIG.name}\n")
    print(config.explain(FLOW, "CheckingFraud", "CheckFraud"))
    print()

    clock = ManualClock(START)
    timeline = TimelinePrinter(START)
    # Redelivery and max-attempts come from the file's ipf-scheduler.flowsched block.
    with InMemoryScheduler.from_config(config, clock=clock) as scheduler:
        domain = (
            FlowDomain.builder()
            .with_config(config)
            .with_scheduler_adapter(scheduler)
            .with_clock(clock)
            .with_flow(credit_transfer_flow())
            .with_action_adapter("ValidateAgainstSchemeRules", scheme_rules_service)
            .with_action_adapter("CheckFraud", fraud_service)
            .with_listener(timeline)
            .build()
        )
        print("Timeline (h:mm:ss since the transfers started)", end="")
        answers_third = {"fraud_answers_on_attempt": 3}
        domain.start(FLOW, "tx-1", offsets={"AcceptedAt": START}, data=answers_third)
        domain.start(FLOW, "tx-2", offsets={"AcceptedAt": START})
        long_ago = START - timedelta(hours=2, minutes=59, seconds=30)
        domain.start(FLOW, "tx-3", offsets={"AcceptedAt": long_ago})

        # The compressed clock: jump straight to the next due timer until none is left.
        while (due := timeline.next_due(clock.now())) is not None:
            clock.set(due)

    print("\nFinal states:")
    for flow_id in ("tx-1", "tx-2", "tx-3"):
        instance = domain.instance(flow_id)
        print(f"  {flow_id}: {instance.state if instance else 'unknown'}")


if __name__ == "__main__":
    main()
