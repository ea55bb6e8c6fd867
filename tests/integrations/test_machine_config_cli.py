"""``flowsched explain`` and ``flowsched check`` know a machine's keys
(``<name>.<State>.Any.timeout-duration``), and ``check --flows`` accepts a machine."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowsched.cli import build_app

MACHINES = """
from flowsched import InMemoryScheduler
from flowsched.integrations.transitions import DurableMachine

ORDERS = DurableMachine(
    states=["new", {"name": "awaiting_payment", "timeout": 1800, "on_timeout": "to_expired"},
            "expired"],
    initial="new",
    scheduler=InMemoryScheduler(),
    name="Orders",
)

from statemachine import State, StateChart
from flowsched.integrations.statemachine import StatechartTimers, durable_timeout

class Request(StateChart):
    requesting = State(initial=True, invoke=durable_timeout(30))
    done = State(final=True)
    done_invoke_requesting = requesting.to(done)

TIMERS = StatechartTimers(InMemoryScheduler(), name="Request")

def charts():
    return [TIMERS.as_flow(Request)]
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(build_app(), list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def machines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"machines_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MACHINES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def conf(tmp_path: Path, text: str) -> str:
    path = tmp_path / "application.conf"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_explain_shows_which_key_sets_a_machine_state_timeout(tmp_path: Path) -> None:
    path = conf(
        tmp_path,
        "Any.Any.Any.timeout-duration = 1h\nOrders.awaiting_payment.Any.timeout-duration = 45m\n",
    )
    code, out, _ = run("explain", path, "Orders", "awaiting_payment", "Any", "--json")
    assert code == 0
    assert '"key": "Orders.awaiting_payment.Any.timeout-duration"' in out
    assert "Any.Any.Any.timeout-duration" in out  # shadowed


def test_check_flows_accepts_a_machine(tmp_path: Path, machines: str) -> None:
    path = conf(tmp_path, "Orders.awaiting_payment.Any.timeout-duration = 45m\n")
    code, out, err = run("check", path, "--flows", f"{machines}:ORDERS")
    assert (code, err) == (0, "")
    assert "checked against flows Orders" in out


def test_check_flows_reports_a_state_the_machine_does_not_have(
    tmp_path: Path, machines: str
) -> None:
    path = conf(tmp_path, "Orders.awaiting_paymnet.Any.timeout-duration = 45m\n")
    code, _, err = run("check", path, "--flows", f"{machines}:ORDERS")
    assert code == 1
    assert "awaiting_paymnet" in err and "awaiting_payment" in err


def test_check_flows_takes_a_statechart_through_as_flow(tmp_path: Path, machines: str) -> None:
    path = conf(tmp_path, "Request.requesting.Any.timeout-duration = 1m\n")
    code, out, err = run("check", path, "--flows", f"{machines}:charts")
    assert (code, err) == (0, "")
    assert "checked against flows Request" in out
