"""The `transitions` peer of bench/flow_bench.py: the same path, the way a Python user would
otherwise write it. Runs in its own virtualenv (bench/.venv-transitions, made by
``make bench``), so it imports nothing of flowsched; flow_bench.py starts it as a subprocess:

    bench/.venv-transitions/bin/python bench/transitions_peer.py Machine 10000 1000

prints one JSON line: {"machine": ..., "instances": N, "seconds": ..., "per_instance_us": ...}.

Each instance is a model added to one shared machine (the library's advice for many
instances; ``auto_transitions=False`` so no ``to_<state>`` trigger is bound per model) and
goes New -> Checking -> Complete:

* ``start``: enters ``Checking``, a ``Timeout`` state (the extension starts one
  ``threading.Timer`` for the action timeout, 60 s); its ``on_enter`` invokes the action (a
  no-op, as in flow_bench.py) and starts one ``threading.Timer`` for the retry (20 s, with
  +/-20 % jitter as flowsched's default) and one for the processing-time deadline (120 s);
* ``passed`` (the completing response): goes to ``Complete``; leaving ``Checking`` cancels
  the three timers; the finished model is removed from the machine.

``Machine`` is not thread-safe while timers fire on their own threads; ``LockedMachine`` is
the variant that is (flowsched's domain locks per instance). Both can be measured.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import threading
import time

from transitions import Machine
from transitions.extensions import LockedMachine
from transitions.extensions.states import Timeout, add_state_features

ACTION_TIMEOUT_S = 60.0
RETRY_S = 20.0
JITTER = 0.2
DEADLINE_S = 120.0


def check(instance: Instance) -> None:
    """The action: does nothing and answers later (the response is sent by the loop)."""


class Instance:
    """One flow instance: its timers other than the Timeout state's own."""

    def __init__(self, flow_id: str, rng: random.Random) -> None:
        self.flow_id = flow_id
        self.rng = rng
        self.retry_timer: threading.Timer | None = None
        self.deadline_timer: threading.Timer | None = None

    def on_enter_Checking(self) -> None:
        check(self)
        wait = RETRY_S * (1 + self.rng.uniform(-JITTER, JITTER))
        self.retry_timer = threading.Timer(wait, self.retry)
        self.retry_timer.daemon = True
        self.retry_timer.start()
        self.deadline_timer = threading.Timer(DEADLINE_S, self.too_slow_fired)
        self.deadline_timer.daemon = True
        self.deadline_timer.start()

    def on_exit_Checking(self) -> None:
        for timer in (self.retry_timer, self.deadline_timer):
            if timer is not None:
                timer.cancel()

    def retry(self) -> None:
        check(self)

    def too_slow_fired(self) -> None:
        self.too_slow()  # type: ignore[attr-defined]  # bound by the machine


def build(kind: str) -> Machine:
    base = LockedMachine if kind == "LockedMachine" else Machine

    @add_state_features(Timeout)
    class TimeoutMachine(base):  # type: ignore[misc, valid-type]
        pass

    states = [
        "New",
        {"name": "Checking", "timeout": ACTION_TIMEOUT_S, "on_timeout": "timed_out"},
        "Complete",
        "TimedOut",
        "TooSlow",
    ]
    transitions = [
        ["start", "New", "Checking"],
        ["passed", "Checking", "Complete"],
        ["timed_out", "Checking", "TimedOut"],
        ["too_slow", "Checking", "TooSlow"],
    ]
    return TimeoutMachine(
        model=None,
        states=states,
        transitions=transitions,
        initial="New",
        auto_transitions=False,
    )


def run(kind: str, n: int, warmup: int) -> dict[str, object]:
    machine = build(kind)
    rng = random.Random(42)

    def one(flow_id: str) -> None:
        instance = Instance(flow_id, rng)
        machine.add_model(instance)
        instance.start()  # type: ignore[attr-defined]
        instance.passed()  # type: ignore[attr-defined]
        if instance.state != "Complete":  # type: ignore[attr-defined]
            raise AssertionError(f"{flow_id} ended in {instance.state}")  # type: ignore[attr-defined]
        machine.remove_model(instance)

    for i in range(warmup):
        one(f"w-{i}")
    gc.collect()
    cpu, start = time.process_time(), time.perf_counter()
    for i in range(n):
        one(f"f-{i}")
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    return {
        "machine": kind,
        "instances": n,
        "seconds": seconds,
        "per_instance_us": seconds / n * 1e6,
        "instances_per_s": n / seconds,
        "cpu_s": cpu,  # every thread of the process (the timers' threads included)
    }


if __name__ == "__main__":
    import transitions

    result = run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    result["transitions"] = transitions.__version__
    print(json.dumps(result))
