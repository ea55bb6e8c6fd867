"""A FastAPI payments service whose fraud-check timeouts survive restarts.

The application's lifespan owns an ``AsyncMongoScheduler`` and an ``AsyncFlowDomain``
(``build_async``): POST ``/payments/{id}`` starts a payment flow, which asks the fraud
service (``CheckFraud``, an ``async def`` adapter) and waits in ``CheckingFraud``; POST
``/payments/{id}/answer`` with ``{"approved": true|false}`` is the fraud service's answer;
GET ``/payments/{id}`` shows the state and the timeline. An unanswered check is retried and
then times out (``FraudTimedOut``) with the durations of ``config/application.conf``
(``Any.CheckingFraud.CheckFraud``: 20 s, 4 retries after 10 s then every 30 min); the timers,
the instances and the timeline live in MongoDB, so a timeout pending when the service stops
fires after it starts again - on this process or on any other node of the collection.

Run (a MongoDB at ``FLOWSCHED_MONGO_URI``; ``PAYMENTS_CONFIG`` names another config file)::

    FLOWSCHED_MONGO_URI=mongodb://localhost:27017 \\
        uvicorn --app-dir examples fastapi_payments:app --port 8000
    curl -X POST localhost:8000/payments/p-1
    curl -X POST localhost:8000/payments/p-1/answer -H 'content-type: application/json' \\
        -d '{"approved": true}'
    curl localhost:8000/payments/p-1
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from flowsched import (
    ActionRequest,
    ActionTimeoutEvent,
    AsyncFlowDomain,
    AsyncMongoFlowStore,
    AsyncMongoScheduler,
    Flow,
    FlowAlreadyExistsError,
    FlowDomain,
    SchedulingConfig,
    TimelineEntry,
)

CONFIG = Path(__file__).resolve().parent.parent / "config" / "application.conf"
FLOW = "Payment"


@dataclass(frozen=True)
class FraudCheckPassed:
    """The fraud service approved the payment."""


@dataclass(frozen=True)
class FraudCheckFailed:
    """The fraud service rejected the payment."""


def payment_flow() -> Flow:
    return (
        Flow(FLOW)
        .initial("CheckingFraud", invokes="CheckFraud")
        .terminal("Approved", "Rejected", "FraudTimedOut")
        .on(FraudCheckPassed, in_state="CheckingFraud", go_to="Approved")
        .on(FraudCheckFailed, in_state="CheckingFraud", go_to="Rejected")
        .on(
            ActionTimeoutEvent, in_state="CheckingFraud", action="CheckFraud", go_to="FraudTimedOut"
        )
    )


class Timeline:
    """Writes every timeline entry to a collection (in tasks held until :meth:`drain`)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self._writes: set[asyncio.Task[Any]] = set()
        # One step's entries share their time and are written concurrently: the order they
        # happened in is kept as a sequence number.
        self._sequence = itertools.count()

    def __call__(self, entry: TimelineEntry) -> None:
        document = {
            "flow_id": entry.flow_id,
            "at": entry.at,
            "seq": next(self._sequence),
            "what": entry.what.value,
            "detail": entry.detail,
            "config_key": entry.config_key,
            "due": entry.due,
        }
        task = asyncio.get_running_loop().create_task(self.collection.insert_one(document))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def drain(self) -> None:
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    async def of(self, flow_id: str) -> list[dict[str, Any]]:
        await self.drain()
        shown = {"_id": 0, "seq": 0}
        cursor = self.collection.find({"flow_id": flow_id}, shown).sort([("at", 1), ("seq", 1)])
        return [{**doc, "at": str(doc["at"])} for doc in await cursor.to_list(None)]


async def check_fraud(request: ActionRequest) -> None:
    """Send the check to the fraud service (here: nothing to send; it answers by POST).

    A payment whose id starts with ``flaky-`` fails its first call, to show a retry."""
    if request.flow_id.startswith("flaky-") and request.attempt == 1:
        raise ConnectionError("the fraud service is unreachable")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    config = SchedulingConfig.from_file(os.environ.get("PAYMENTS_CONFIG", CONFIG))
    async with AsyncMongoScheduler.from_config(config) as scheduler:
        database = scheduler.collection.database
        timeline = Timeline(database["payment_timeline"])
        app.state.timeline = timeline
        app.state.domain = (
            FlowDomain.builder()
            .with_config(config)
            .with_scheduler_adapter(scheduler)
            .with_flow_store(AsyncMongoFlowStore(database["payments"]))
            .with_flow(payment_flow())
            .with_action_adapter("CheckFraud", check_fraud)
            .with_listener(timeline)
            # The shared file also configures the credit-transfer flow, not served here.
            .with_options(config_check="warn")
            .build_async()
        )
        yield  # serving
    await timeline.drain()


app = FastAPI(title="payments", lifespan=lifespan)


def domain() -> AsyncFlowDomain:
    built: AsyncFlowDomain = app.state.domain
    return built


class Answer(BaseModel):
    approved: bool


@app.post("/payments/{payment_id}", status_code=201)
async def start_payment(payment_id: str) -> dict[str, str]:
    try:
        instance = await domain().start(FLOW, payment_id)
    except FlowAlreadyExistsError as exc:
        raise HTTPException(409, str(exc)) from None
    return {"id": payment_id, "state": instance.state}


@app.post("/payments/{payment_id}/answer")
async def answer(payment_id: str, body: Answer) -> dict[str, str]:
    event = FraudCheckPassed() if body.approved else FraudCheckFailed()
    instance = await domain().handle(payment_id, event)
    if instance is None:
        raise HTTPException(404, f"no payment {payment_id!r}")
    return {"id": payment_id, "state": instance.state}


@app.get("/payments/{payment_id}")
async def show(payment_id: str) -> dict[str, Any]:
    instance = await domain().instance(payment_id)
    if instance is None:
        raise HTTPException(404, f"no payment {payment_id!r}")
    runs = [{"action": run.action, "attempts": run.attempts} for run in instance.actions]
    return {
        "id": payment_id,
        "state": instance.state,
        "finished": instance.finished,
        "actions": runs,
        "timeline": await app.state.timeline.of(payment_id),
    }
