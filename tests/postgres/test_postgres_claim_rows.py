"""A claim's rows become the same claims, and the same rows are refused with the same
reasons, whether a row takes the firing path's quick decoding (flowsched.postgres.claim_rows)
or the checked one (rows.item_from_row and the checks of each column): every row below is
decoded both ways. No server: rows as psycopg returns them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from flowsched.errors import MalformedDocument
from flowsched.postgres.claim_rows import checked_claim, claims_from_rows
from flowsched.postgres.plans import Row
from flowsched.store.records import Claim

DUE = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = DUE + timedelta(seconds=30)


def _row(**values: object) -> Row:
    """A claim row: a one-shot TIMER of the usual types, with ``values`` replaced."""
    row: dict[str, object] = {
        "id": "t-1",
        "generation": 7,
        "kind": "TIMER",
        "handler": None,
        "flow_id": None,
        "due": DUE,
        "payload": None,
        "recurrence": None,
        "previous": None,
        "runs": 0,
        "attempts": 0,
        "lease_until": LEASE,
        "route": "k:TIMER",
        "claim_token": "token-1",
        "lapses": 0,
    }
    row.update(values)
    return tuple(row.values())


def _checked(rows: list[Row], owner: str) -> tuple[list[Claim], dict[str, str]]:
    """The checked decoding of every row (what the claim did before the quick one)."""
    claims: list[Claim] = []
    bad: dict[str, str] = {}
    for row in rows:
        try:
            claim = checked_claim(row, owner)
        except MalformedDocument as exc:
            bad[str(row[0])] = exc.reason
            continue
        claims.append(claim)
    claims.sort(key=lambda claim: (claim.item.due, claim.generation))
    return claims, bad


def _same(claims: list[Claim], expected: list[Claim]) -> None:
    assert len(claims) == len(expected)
    for claim, other in zip(claims, expected, strict=True):
        assert claim == other  # the item by value, attempt, owner, lease, token, lapsed
        item, want = claim.item, other.item
        assert (item.generation, item.handler, item.route, item.payload, item.runs) == (
            want.generation,
            want.handler,
            want.route,
            want.payload,
            want.runs,
        )
        assert item.previous == want.previous and item.recurrence == want.recurrence
        assert type(item.kind) is type(want.kind) and item.due.tzinfo is UTC


USABLE = [
    _row(),
    _row(id="t-2", handler="send-reminder", route="h:send-reminder"),
    _row(id="t-3", payload={"order": 12, "note": "é"}, flow_id="flow-1"),
    _row(id="t-é", generation=0, attempts=3),  # not ASCII: the checked way, still usable
    _row(id="t-5", due=DUE.astimezone(timezone(timedelta(hours=2)))),  # not in UTC
    _row(id="t-6", recurrence={"every_seconds": 60.0, "start": DUE.isoformat()}, runs=2),
    _row(id="t-7", previous=DUE, runs=4),  # a one-shot: previous and runs are not read
    _row(id="t-8", lapses=2),  # two runs lost with their nodes: Claim.lapsed
]

UNUSABLE = [
    _row(id=""),
    _row(id="x" * 1025),
    _row(id="t-\x00"),
    _row(id="t-\ud800"),
    _row(id=12),
    _row(id="t-b1", generation=-1),
    _row(id="t-b2", generation=True),
    _row(id="t-b3", generation=None),
    _row(id="t-b4", kind="NOPE"),
    _row(id="t-b5", kind=None),
    _row(id="t-b6", due=DUE.replace(tzinfo=None)),
    _row(id="t-b7", due="2026-01-01"),
    _row(id="t-b8", flow_id=""),
    _row(id="t-b9", flow_id="f\x00"),
    _row(id="t-b10", handler=""),
    _row(id="t-b11", handler="bad\nname"),
    _row(id="t-b12", handler="h" * 201),
    _row(id="t-b13", payload=[1, 2]),
    _row(id="t-b14", payload={"text": "a\x00b"}),
    _row(id="t-b15", payload={"big": 2**70}),
    _row(id="t-b16", payload={"blob": "x" * 2000}),
    _row(id="t-b17", attempts=None),
    _row(id="t-b18", attempts=False),
    _row(id="t-b19", lease_until=None),
    _row(id="t-b20", lease_until=LEASE.replace(tzinfo=None)),
    _row(id="t-b21", claim_token=None),
    _row(id="t-b22", recurrence={"every": "nope"}),
    _row(id="t-b23", lapses=None),
]


@pytest.mark.parametrize("row", USABLE, ids=lambda row: str(row[0]))
def test_a_usable_row_is_the_same_claim_either_way(row: Row) -> None:
    claims, bad = claims_from_rows([row], "node-a")
    expected, expected_bad = _checked([row], "node-a")
    assert bad == expected_bad == {}
    _same(claims, expected)
    assert [claim.lapsed for claim in claims] == [row[14]]


@pytest.mark.parametrize("row", UNUSABLE, ids=lambda row: repr(row[0])[:20])
def test_an_unusable_row_is_refused_with_the_same_reason(row: Row) -> None:
    claims, bad = claims_from_rows([row], "node-a")
    assert claims == [] and bad == _checked([row], "node-a")[1]
    assert list(bad) == [str(row[0])] and bad[str(row[0])]


def test_claims_come_soonest_due_first_then_by_generation_the_bad_left_out() -> None:
    rows = [
        _row(id="late", due=DUE + timedelta(seconds=2), generation=1),
        _row(id="b", generation=9),
        _row(id="poison", kind="NOPE"),
        _row(id="a", generation=3),
        _row(id="early", due=DUE - timedelta(seconds=1), generation=20),
        *USABLE[1:],
    ]
    claims, bad = claims_from_rows(rows, "node-b")
    expected, expected_bad = _checked(rows, "node-b")
    _same(claims, expected)
    assert [claim.item.id for claim in claims][:3] == ["early", "t-é", "a"]
    assert bad == expected_bad and list(bad) == ["poison"]
