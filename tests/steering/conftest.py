"""Fixtures of the steering tests: ``face`` runs each test on all four schedulers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from steering_kit import KINDS, MONGO_KINDS, NOW, Face, mongomock_collection

from flowsched import ManualClock

pytest.importorskip("mongomock")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def make_face(clock: ManualClock) -> Iterator[Callable[..., Face]]:
    """``make_face(kind, collection=None, **options)``: a started :class:`Face` (closed after
    the test); the Mongo kinds get a fresh mongomock collection unless given one."""
    made: list[Face] = []

    def make(kind: str, collection: Any = None, **options: Any) -> Face:
        if kind in MONGO_KINDS and collection is None:
            collection = mongomock_collection()
        face = Face(kind, clock, collection, **options)
        made.append(face)
        return face

    yield make
    for face in reversed(made):
        face.close()


@pytest.fixture(params=KINDS)
def face(request: pytest.FixtureRequest, make_face: Callable[..., Face]) -> Face:
    return make_face(request.param)


@pytest.fixture(params=MONGO_KINDS)
def mongo_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)
