"""Malformed query strings get a 400 naming the problem, never a 500 nor a scan."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NAMES = ["id", "flow", "kind", "handler", "due_from", "due_to", "state", "after", "limit"]
BAD_VALUES = {
    "kind": st.text(min_size=1).filter(
        lambda v: (
            v.strip().upper()
            not in {"TIMER", "ACTION_TIMEOUT", "ACTION_RETRY", "PROCESSING_TIMEOUT"}
        )
    ),
    "state": st.text(min_size=1).filter(
        lambda v: v not in {"waiting", "overdue", "running", "stale", "retrying"}
    ),
    "limit": st.one_of(
        st.integers(max_value=0).map(str),
        st.integers(min_value=201).map(str),
        st.text(min_size=1).filter(lambda v: not v.isdigit()),
    ),
    "due_from": st.text(min_size=1).filter(lambda v: not v[:1].isdigit()),
    "after": st.text(min_size=1, alphabet="!@#$%^&*()<>"),
    "id": st.text(min_size=201, max_size=400),
    "flow": st.text(alphabet="\x00\x01\x1f", min_size=1),
    "unknown": st.text(min_size=1),
}


@st.composite
def malformed(draw: st.DrawFn) -> list[tuple[str, str]]:
    name = draw(st.sampled_from(sorted(BAD_VALUES)))
    value = draw(BAD_VALUES[name])
    params = [(name if name != "unknown" else draw(st.text(min_size=1).filter(
        lambda n: n not in NAMES)), value)]  # fmt: skip
    if draw(st.booleans()):  # repeated parameters are malformed too
        params.append(params[0])
    return params


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(params=malformed())
def test_malformed_timers_queries_are_400(client: Any, params: list[tuple[str, str]]) -> None:
    console = client()
    response = console.get("/timers", params=params)
    assert response.status_code == 400, (params, response.status_code)
    assert 'id="problem"' in response.text


def test_other_pages_refuse_malformed_queries(client: Any) -> None:
    console = client()
    backwards = "/timers?due_from=2026-03-02&due_to=2026-03-01"
    for url in ["/dead?limit=x", "/dead?after=%%%", "/quarantine?bogus=1", "/nodes?x=1",
                "/?per=week", "/timer", "/timer?id=a&id=b", backwards]:  # fmt: skip
        assert console.get(url).status_code == 400, url
