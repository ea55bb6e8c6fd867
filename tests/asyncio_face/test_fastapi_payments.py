"""examples/fastapi_payments.py under uvicorn on 127.0.0.1 with the wire server, driven with
httpx: payments start, some are answered, a failing fraud call is retried, the others time
out; the app restarts and the timeouts pending at the stop fire in the new process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parents[2]
SHORT = """
# The test's durations: a 4 s fraud-check timeout, one retry 300 ms after a failed call.
Payment.CheckingFraud.CheckFraud {
  timeout-duration = 4s
  max-retries = 1
  backoff-type = "LINEAR"
  initial-retry-interval = 300ms
}
ipf-scheduler.flowsched.poll-interval = 200ms
"""


class App:
    """The example under uvicorn, on a free port."""

    def __init__(self, env: dict[str, str]) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        command = [sys.executable, "-m", "uvicorn", "--app-dir", "examples"]
        command += ["fastapi_payments:app", "--host", "127.0.0.1", "--port", str(self.port)]
        self.process = subprocess.Popen(command, cwd=REPO, env=env)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.client.get("/openapi.json").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert self.process.poll() is None, "the app exited at start-up"
            assert time.monotonic() < deadline, "the app did not start"
            time.sleep(0.1)

    def stop(self) -> None:
        self.client.close()
        self.process.send_signal(signal.SIGTERM)  # graceful: the lifespan closes the scheduler
        # uvicorn shuts down (lifespan exit included), then re-raises the signal.
        assert self.process.wait(60) in (0, -signal.SIGTERM)

    def state(self, payment: str) -> str:
        return str(self.client.get(f"/payments/{payment}").json()["state"])

    def wait_for(self, payment: str, state: str, seconds: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            shown: dict[str, Any] = self.client.get(f"/payments/{payment}").json()
            if shown["state"] == state:
                return shown
            time.sleep(0.1)
        pytest.fail(f"{payment} never reached {state} (it is {self.state(payment)})")


@pytest.fixture
def env(mongo_uri: str, mongo_client: Any, tmp_path: Path) -> Iterator[dict[str, str]]:
    config = tmp_path / "application.conf"
    original = (REPO / "config" / "application.conf").read_text(encoding="utf-8")
    config.write_text(original + SHORT, encoding="utf-8")
    database = f"flowsched_fastapi_{uuid.uuid4().hex[:8]}"
    yield {
        **os.environ,
        "FLOWSCHED_MONGO_URI": mongo_uri,
        "FLOWSCHED_SCHEDULER_DATABASE": database,
        "PAYMENTS_CONFIG": str(config),
    }
    mongo_client.drop_database(database)


def test_payments_answer_retry_time_out_and_survive_a_restart(
    env: dict[str, str], mongo_client: Any
) -> None:
    app = App(env)
    try:
        for payment in ("ok-1", "no-1", "late-1", "flaky-1"):
            response = app.client.post(f"/payments/{payment}")
            assert response.status_code == 201, response.text
            assert response.json()["state"] == "CheckingFraud"
        assert app.client.post("/payments/ok-1").status_code == 409  # started already
        answer = app.client.post("/payments/ok-1/answer", json={"approved": True})
        assert answer.json()["state"] == "Approved"
        answer = app.client.post("/payments/no-1/answer", json={"approved": False})
        assert answer.json()["state"] == "Rejected"
        # The first fraud call of flaky-1 failed: retried 300 ms later (the test config).
        deadline = time.monotonic() + 20
        while app.client.get("/payments/flaky-1").json()["actions"][0]["attempts"] < 2:
            assert time.monotonic() < deadline, "flaky-1's failed call was never retried"
            time.sleep(0.1)
        # Started just before the stop: their 4 s timeouts are still pending at it.
        for payment in ("restart-1", "restart-2"):
            assert app.client.post(f"/payments/{payment}").status_code == 201
    finally:
        app.stop()

    database = mongo_client[env["FLOWSCHED_SCHEDULER_DATABASE"]]
    pending = {d["flow_id"] for d in database["timers"].find({}, {"flow_id": 1})}
    assert {"restart-1", "restart-2"} <= pending

    app = App(env)
    try:
        for payment in ("restart-1", "restart-2", "late-1", "flaky-1"):
            shown = app.wait_for(payment, "FraudTimedOut")
            assert shown["finished"]
        assert app.state("ok-1") == "Approved"
        assert app.state("no-1") == "Rejected"
        timeline = app.client.get("/payments/restart-1").json()["timeline"]
        whats = [entry["what"] for entry in timeline]
        assert whats[0] == "started" and whats[-1] == "finished", whats  # in the order it happened
        assert "fired" in whats, whats  # the timeout, fired after the restart
        assert any("CheckFraud" in entry["detail"] for entry in timeline)
        assert app.client.get("/payments/nobody").status_code == 404
    finally:
        app.stop()
    assert database["timers"].count_documents({}) == 0
