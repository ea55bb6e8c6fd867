"""Malformed query strings get a 400 naming the problem, never a 500 nor a scan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from console_kit import USERS, csrf_of, sign_in
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


@pytest.fixture
def signed_in(client: Any) -> Iterator[tuple[Any, str]]:
    """An operator's client (so every action path is reached) and its CSRF token."""
    console = client(users=USERS)
    sign_in(console, "alice")
    yield console, csrf_of(console.get("/timers").text)


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


EXTREMES = [
    "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "1" * 30, "9" * 400,
    "99999999999999999999", "-1", "NaN", "1e309", "%00", "\x00", "\ud800", "[]", "{}",
    "eyJhIjoxfQ", "WzEsMl0", "W251bGwsbnVsbF0", "WyI5OTk5LTEyLTMxVDIzOjU5OjU5LTE0OjAwIiwieCJd",
    "<script>", "a" * 201, "../../etc/passwd", "$where", "{\"$gt\": \"\"}",
]  # fmt: skip
GET_PATHS = ["/", "/overview/live", "/timers", "/timer", "/dead", "/quarantine", "/nodes",
             "/audit", "/bulk/cancel", "/bulk/cancel-flow", "/bulk/requeue"]  # fmt: skip
POST_PATHS = ["/timer/cancel", "/timer/run-now", "/timer/redeliver", "/dead/requeue",
              "/bulk/cancel", "/bulk/cancel-flow", "/bulk/requeue", "/login"]  # fmt: skip
PARAM_NAMES = ["id", "flow", "kind", "handler", "due_from", "due_to", "state", "after",
               "before", "limit", "per", "who", "action", "outcome", "item_id", "since",
               "until", "back", "generation", "csrf", "user", "secret", "bogus"]  # fmt: skip
values = st.one_of(st.sampled_from(EXTREMES), st.text(max_size=40))
pairs = st.lists(st.tuples(st.sampled_from(PARAM_NAMES), values), max_size=5)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    post=st.booleans(),
    get_path=st.sampled_from(GET_PATHS),
    post_path=st.sampled_from(POST_PATHS),
    params=pairs,
    keep_csrf=st.booleans(),
)
def test_no_malformed_query_or_form_gives_a_500(
    signed_in: Any,
    post: bool,
    get_path: str,
    post_path: str,
    params: list[tuple[str, str]],
    keep_csrf: bool,
) -> None:
    console, csrf = signed_in
    if post:
        data = [(n, v) for n, v in params if n != "csrf"]
        if keep_csrf:
            data.append(("csrf", csrf))
        body = "&".join(f"{quote(n)}={quote(v, safe='', errors='surrogatepass')}"
                        for n, v in data)  # fmt: skip
        form = {"content-type": "application/x-www-form-urlencoded"}
        response = console.post(post_path, content=body.encode(), headers=form)
        path = post_path
    else:
        query = "&".join(f"{quote(n)}={quote(v, safe='', errors='surrogatepass')}"
                         for n, v in params)  # fmt: skip
        response = console.get(f"{get_path}?{query}")
        path = get_path
    assert response.status_code != 500, (path, params, response.text[:300])
    assert response.headers["cache-control"] == "no-store"
    assert "content-security-policy" in response.headers
