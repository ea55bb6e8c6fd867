"""A parent flow hands its offsets to a child, so the child's deadline spans both flows.

A Payment flow is started with the client's ``AcceptedAt`` timestamp as a custom offset. When
it reaches Screening it starts a SanctionsCheck child flow, passing ``request.offsets`` (the
parent's whole offset map: ``AcceptedAt`` plus the entry time of each state it went through).
The child's processing-time deadline counts from ``AcceptedAt`` — the client's clock, not the
child's start:

    AcceptedAt          = 08:59:20   (given to the parent)
    child started       = 09:00:05
    deadline (1 minute) = AcceptedAt + 1 m = 09:00:20, not 09:01:05
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from credit_transfer import TimelinePrinter

from flowsched import (
    ActionRequest,
    Flow,
    FlowDomain,
    InMemoryScheduler,
    ManualClock,
    ProcessingTimeElapsedEvent,
    SchedulingConfig,
)

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
ACCEPTED = START - timedelta(seconds=40)

CONFIG = """
ipf.flow.SanctionsCheck.processing-time.Checking.Cleared {
  timeout-duration = 1m
  offset-id = AcceptedAt    # an offset the child got from its parent
}
"""


@dataclass(frozen=True)
class Received:
    """The payment's details are complete: screen it."""


@dataclass(frozen=True)
class NamesCleared:
    """The sanctions list had no match."""


PAYMENT = (
    Flow("Payment")
    .initial("Receiving")
    .state("Screening", invokes="StartSanctionsCheck")
    .terminal("Done")
    .on(Received, in_state="Receiving", go_to="Screening")
)

SANCTIONS_CHECK = (
    Flow("SanctionsCheck")
    .initial("Checking", invokes="ScreenNames")
    .terminal("Cleared", "Expired")
    .on(NamesCleared, in_state="Checking", go_to="Cleared")
    .on(ProcessingTimeElapsedEvent, in_state="Checking", destination="Cleared", go_to="Expired")
)


def main() -> None:
    clock = ManualClock(START)
    timeline = TimelinePrinter(START)
    domains: list[FlowDomain] = []

    def start_sanctions_check(request: ActionRequest) -> None:
        # Every action receives the flow's offset map; hand it to the child as it is.
        domains[0].start("SanctionsCheck", f"{request.flow_id}/sanctions", offsets=request.offsets)

    with InMemoryScheduler(clock=clock) as scheduler:
        domain = (
            FlowDomain.builder()
            .with_config(SchedulingConfig.from_string(CONFIG))
            .with_scheduler_adapter(scheduler)
            .with_clock(clock)
            .with_flow(PAYMENT)
            .with_flow(SANCTIONS_CHECK)
            .with_action_adapter("StartSanctionsCheck", start_sanctions_check)
            .with_action_adapter("ScreenNames", lambda request: None)  # never answers
            .with_listener(timeline)
            .build()
        )
        domains.append(domain)
        print(f"accepted at {ACCEPTED.time()} (40 s before the parent started)\n")
        domain.start("Payment", "pay-1", offsets={"AcceptedAt": ACCEPTED})
        clock.advance(timedelta(seconds=5))
        domain.handle("pay-1", Received())
        while (due := timeline.next_due(clock.now())) is not None:
            clock.set(due)

    child = domain.instance("pay-1/sanctions")
    assert child is not None
    print("\nThe child's offsets (the parent's, plus its own state entries):")
    for name, when in sorted(child.offsets.items(), key=lambda kv: kv[1]):
        print(f"  {name:<10} {when.time()}")
    print(f"\npay-1/sanctions ended in {child.state}")


if __name__ == "__main__":
    main()
