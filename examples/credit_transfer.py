"""The OBCreditTransfer flow the examples share, its simulated services and a timeline printer.

ValidatingSchemeRules (ValidateAgainstSchemeRules) → CheckingFraud (CheckFraud) → Complete,
with a state for each way time can run out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from flowsched import (
    ANY_STATE,
    ActionRequest,
    ActionTimeoutEvent,
    Flow,
    ProcessingTimeElapsedEvent,
    TimelineEntry,
)

FLOW = "OBCreditTransfer"


@dataclass(frozen=True)
class SchemeRulesValidated:
    """The scheme-rules service accepted the payment (completes ValidateAgainstSchemeRules)."""


@dataclass(frozen=True)
class FraudCheckPassed:
    """The fraud service cleared the payment (completes CheckFraud)."""


def credit_transfer_flow() -> Flow:
    """The flow: each response moves it on; each kind of timeout has its own end state."""
    return (
        Flow(FLOW)
        .initial("ValidatingSchemeRules", invokes="ValidateAgainstSchemeRules")
        .state("CheckingFraud", invokes="CheckFraud")
        .terminal("Complete", "ValidationTimedOut", "FraudTimedOut", "TooLate")
        .response(SchemeRulesValidated, to="ValidateAgainstSchemeRules")
        .response(FraudCheckPassed, to="CheckFraud")
        .on(SchemeRulesValidated, in_state="ValidatingSchemeRules", go_to="CheckingFraud")
        .on(FraudCheckPassed, in_state="CheckingFraud", go_to="Complete")
        .on(
            ActionTimeoutEvent,
            in_state="ValidatingSchemeRules",
            action="ValidateAgainstSchemeRules",
            go_to="ValidationTimedOut",
        )
        .on(
            ActionTimeoutEvent, in_state="CheckingFraud", action="CheckFraud", go_to="FraudTimedOut"
        )
        .on(ProcessingTimeElapsedEvent, in_state=ANY_STATE, destination="Complete", go_to="TooLate")
    )


def scheme_rules_service(request: ActionRequest) -> object:
    """Answers at once: returning the response hands it straight back to the flow."""
    return SchemeRulesValidated()


def fraud_service(request: ActionRequest) -> object:
    """Answers on the attempt named by the instance's data (``None``: the service is down)."""
    answers_on = request.data.get("fraud_answers_on_attempt")
    if answers_on is not None and request.attempt >= answers_on:
        return FraudCheckPassed()
    return None


class TimelinePrinter:
    """Prints the timeline grouped by time: ``+h:mm:ss`` then one line per entry, with the
    configuration key that decided it underneath (the first time that key decides)."""

    def __init__(self, start: datetime, out: Callable[[str], None] = print) -> None:
        self.start = start
        self.out = out
        self.dues: set[datetime] = set()
        self._last: datetime | None = None
        self._keys_shown: set[str] = set()

    def __call__(self, entry: TimelineEntry) -> None:
        if entry.at != self._last:
            self._last = entry.at
            self.out(f"\n{self.since_start(entry.at)}")
        due = ""
        if entry.due is not None:
            self.dues.add(entry.due)
            due = f" at {self.since_start(entry.due)}"
        self.out(f"  {entry.flow_id:<5} {entry.what.value:<9} {entry.detail}{due}")
        if entry.config_key and entry.config_key not in self._keys_shown:
            self._keys_shown.add(entry.config_key)
            self.out(f"  {'':<15} decided by {entry.config_key}")

    def since_start(self, when: datetime) -> str:
        """``+h:mm:ss`` (with milliseconds when there are any) since ``start``."""
        delta = when - self.start
        seconds = int(delta.total_seconds())
        millis = delta.microseconds // 1000
        text = f"+{seconds // 3600}:{seconds % 3600 // 60:02}:{seconds % 60:02}"
        return f"{text}.{millis:03}" if millis else text

    def next_due(self, now: datetime) -> datetime | None:
        """The earliest due time of a timer scheduled so far that is still ahead of ``now``."""
        ahead = [due for due in self.dues if due > now]
        return min(ahead) if ahead else None
