"""transitions' own ``Timeout`` tests, ported to :class:`DurableTimeout`.

Ported from pytransitions/transitions ``tests/test_states.py`` at commit
bd42b38f3627e6bca7274fb4d9af2e105f75da7c (``test_timeout``, ``test_timeout_callbacks``,
``test_timeout_transitioning``). Changes, and only these: ``DurableTimeout`` in place of
``Timeout`` (through ``DurableMachine``, which needs ``scheduler=`` and ``name=``); a
``ManualClock`` advanced past the timeout in place of each ``sleep``; the model of
``test_timeout_callbacks`` has an ``id`` (a durable timer names its model).
"""

from __future__ import annotations

from datetime import timedelta
from unittest.mock import MagicMock

import pytest
from transitions.extensions.states import add_state_features

from flowsched import InMemoryScheduler, ManualClock
from flowsched.integrations.transitions import DurableMachine, DurableTimeout


def sleep(clock: ManualClock, seconds: float) -> None:
    clock.advance(timedelta(seconds=seconds))


def test_timeout(clock: ManualClock, scheduler: InMemoryScheduler) -> None:
    mock = MagicMock()

    @add_state_features(DurableTimeout)
    class CustomMachine(DurableMachine):
        def timeout(self) -> None:
            mock()

    states = [
        "A",
        {"name": "B", "timeout": 0.3, "on_timeout": "timeout"},
        {"name": "C", "timeout": 0.3, "on_timeout": mock},
    ]

    m = CustomMachine(states=states, scheduler=scheduler, name="test_timeout")
    m.to_B()
    m.to_A()
    sleep(clock, 0.4)
    assert not mock.called
    m.to_B()
    sleep(clock, 0.4)
    assert mock.called
    m.to_C()
    sleep(clock, 0.4)
    assert mock.call_count == 2

    with pytest.raises(AttributeError):
        m.add_state({"name": "D", "timeout": 0.3})


def test_timeout_callbacks(clock: ManualClock, scheduler: InMemoryScheduler) -> None:
    timeout = MagicMock()
    notification = MagicMock()
    counter = MagicMock()

    class CustomMachine(DurableMachine):
        pass

    class Model:
        id = "model-1"

        def on_timeout_B(self) -> None:
            counter()

        def timeout(self) -> None:
            timeout()

        def notification(self) -> None:
            notification()

        def another_notification(self) -> None:
            notification()

    states = ["A", {"name": "B", "timeout": 0.05, "on_timeout": "timeout"}]
    model = Model()
    machine = CustomMachine(
        model=model, states=states, initial="A", scheduler=scheduler, name="callbacks"
    )
    model.to_B()  # type: ignore[attr-defined]
    sleep(clock, 0.1)
    assert timeout.called
    assert counter.called
    machine.get_state("B").add_callback("timeout", "notification")
    machine.on_timeout_B("another_notification")
    model.to_B()  # type: ignore[attr-defined]
    sleep(clock, 0.1)
    assert timeout.call_count == 2
    assert counter.call_count == 2
    assert notification.called
    machine.get_state("B").on_timeout = []
    model.to_B()  # type: ignore[attr-defined]
    sleep(clock, 0.1)
    assert timeout.call_count == 2
    assert notification.call_count == 2


def test_timeout_transitioning(clock: ManualClock, scheduler: InMemoryScheduler) -> None:
    timeout_mock = MagicMock()

    class CustomMachine(DurableMachine):
        pass

    states = ["A", {"name": "B", "timeout": 0.05, "on_timeout": ["to_A", timeout_mock]}]
    machine = CustomMachine(states=states, initial="A", scheduler=scheduler, name="transitioning")
    machine.to_B()
    sleep(clock, 0.1)
    assert machine.is_A()
    assert timeout_mock.called
