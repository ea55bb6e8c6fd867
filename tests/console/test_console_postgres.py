"""The console over a PostgreSQL table (``flowsched console --uri postgresql://... --table T``),
over HTTP: the list (from ``timers()``), a timer's page with its attempts, cancel, requeue of a
dead letter, sign-in with a users file. Skipped with the reason when ``FLOWSCHED_POSTGRES_URL``
is unset."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from console_kit import USERS, csrf_of, sign_in
from starlette.testclient import TestClient

pytest.importorskip("psycopg")

from flowsched.console import app
from flowsched.outcomes import DeadLettered, Failure, Redeliver
from flowsched.postgres import PostgresTimerStore
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.store.records import Settlement

HOUR = timedelta(hours=1)


@pytest.fixture
def store(postgres_url: str, fresh_table: Callable[[], str]) -> Iterator[PostgresTimerStore]:
    store = PostgresTimerStore(postgres_url, table=fresh_table())
    yield store
    store.close()


@pytest.fixture
def console(postgres_url: str, store: PostgresTimerStore) -> Iterator[Callable[..., TestClient]]:
    """``console(**options)``: an HTTP client on the console over ``store``'s table, built
    from its URI as ``flowsched console`` builds it."""
    opened: list[TestClient] = []

    def build(**options: Any) -> TestClient:
        client = TestClient(app(postgres_url, table=store.table, **options))
        opened.append(client)
        return client

    yield build
    for client in opened:
        client.close()


def ids(html: str) -> list[str]:
    return re.findall(r'class="timer-link" href="/timer\?id=([^"]+)"', html)


def _fail_once(store: PostgresTimerStore, item_id: str, dead: bool = False) -> None:
    """Claim ``item_id`` (due now), start it and settle a failure (a retry, or a dead letter)."""
    [claim] = store.claim_due({"h:h"}, "node-a", timedelta(seconds=30), 10)
    assert claim.item.id == item_id and store.confirm_start([claim]) == [claim]
    failure = Failure("failed", "TimeoutError", "gateway <down>", 'File "pay.py", line 7')
    now = store.now()
    if dead:
        outcome: Any = DeadLettered(DeadLetter(claim.item, 1, "TimeoutError: gateway", now),
                                    failure)  # fmt: skip
    else:
        outcome = Redeliver(now + HOUR, 1, "TimeoutError: gateway", failure)
    assert store.settle([Settlement(claim, outcome)])[0].applied


def test_the_list_pages_soonest_first_from_timers(
    store: PostgresTimerStore, console: Callable[..., TestClient]
) -> None:
    due = store.now() + HOUR
    for n in range(7):
        store.put(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, due - n * timedelta(minutes=1),
                               "flow-a" if n % 2 else "flow-b", handler="h"))  # fmt: skip
    client = console()
    first = client.get("/timers?limit=3").text
    assert ids(first) == ["t-6", "t-5", "t-4"] and re.search(r'id="count">7<', first)
    following = re.search(r'href="(/timers\?[^"]+)" id="next-page"', first)
    assert following is not None
    second = client.get(following.group(1).replace("&amp;", "&")).text
    assert ids(second) == ["t-3", "t-2", "t-1"]
    back = re.search(r'href="(/timers\?[^"]+)" id="previous-page"', second)
    assert back is not None and ids(client.get(back.group(1).replace("&amp;", "&")).text) == [
        "t-6", "t-5", "t-4"
    ]  # fmt: skip
    assert ids(client.get("/timers?flow=flow-a").text) == ["t-5", "t-3", "t-1"]
    assert ids(client.get("/timers?state=overdue").text) == []
    assert client.get("/timers?state=sideways").status_code == 400


def test_a_timers_page_shows_its_attempts(
    store: PostgresTimerStore, console: Callable[..., TestClient]
) -> None:
    store.put(ScheduleItem("p-1", ScheduleKind.TIMER, store.now() - HOUR, "flow-1", handler="h"))
    _fail_once(store, "p-1")
    page = console().get("/timer?id=p-1").text
    assert 'id="history"' in page and 'id="no-history"' not in page
    assert "node-a" in page and "TimeoutError: gateway" in page and "failed" in page
    assert "flow-1" in page  # the timer's own fields
    assert console().get("/timer?id=none-such").status_code == 404


def test_an_operator_cancels_and_requeues_a_dead_letter(
    store: PostgresTimerStore, console: Callable[..., TestClient]
) -> None:
    store.put(ScheduleItem("c-1", ScheduleKind.TIMER, store.now() + HOUR, handler="h"))
    store.put(ScheduleItem("d-1", ScheduleKind.TIMER, store.now() - HOUR, handler="h"))
    _fail_once(store, "d-1", dead=True)
    client = console(users=USERS)
    sign_in(client, "alice")
    page = client.get("/timer?id=c-1").text
    generation = re.search(r'name="generation" value="(\d+)"', page)
    assert generation is not None
    form = {"csrf": csrf_of(page), "id": "c-1", "generation": generation.group(1)}
    other = str(int(generation.group(1)) + 1000)
    assert client.post("/timer/cancel", data={**form, "generation": other}).status_code == 200
    assert store.exists("c-1")  # another generation than the one shown: not cancelled
    assert client.post("/timer/cancel", data=form).status_code == 200
    assert not store.exists("c-1")
    dead = client.get("/timer?id=d-1").text
    assert 'id="requeue"' in dead and "/dead" in client.get("/dead").url.path
    assert "d-1" in client.get("/dead").text
    letter = re.search(r'id="requeue".*?name="generation" value="(\d+)"', dead, re.S)
    assert letter is not None
    data = {"csrf": csrf_of(dead), "id": "d-1", "generation": letter.group(1)}
    assert client.post("/dead/requeue", data=data).status_code == 200
    assert store.exists("d-1") and store.dead_letters() == []
    audit = client.get("/audit").text
    assert "cancel" in audit and "requeue" in audit and "alice" in audit


def test_reads_need_a_sign_in_with_a_users_file(
    store: PostgresTimerStore, console: Callable[..., TestClient]
) -> None:
    store.put(ScheduleItem("s-1", ScheduleKind.TIMER, store.now() + HOUR, handler="h"))
    client = console(users=USERS)
    refused = client.get("/timers", follow_redirects=False)
    assert refused.status_code in (302, 303, 401) and "s-1" not in refused.text
    sign_in(client, "vera")  # a viewer: reads, no actions
    page = client.get("/timer?id=s-1").text
    assert "s-1" in page and 'action="/timer/cancel"' not in page


def test_a_table_that_is_not_there_is_said_not_made(postgres_url: str) -> None:
    with pytest.raises(ValueError, match="no flowsched timers table fs_absent_table"):
        app(postgres_url, table="fs_absent_table")


def test_the_other_pages_and_a_bulk_cancel_work_on_the_table(
    store: PostgresTimerStore, console: Callable[..., TestClient]
) -> None:
    from test_console_bulk import confirm_form, preview_count

    now = store.now()
    for n in range(4):
        store.put(ScheduleItem(f"b-{n}", ScheduleKind.TIMER, now + HOUR, "flow-x", handler="h"))
    store.put(ScheduleItem("k-1", ScheduleKind.TIMER, now + 2 * HOUR, "flow-y", handler="h"))
    store.put(ScheduleItem("r-1", ScheduleKind.TIMER, now - HOUR, handler="h"))
    store.claim_due({"h:h"}, "node-z", timedelta(seconds=30), 1)  # r-1, held by node-z
    client = console(users=USERS)
    sign_in(client, "alice")
    for path in ("/", "/overview/live", "/nodes", "/quarantine", "/dead", "/audit"):
        assert client.get(path).status_code == 200, path
    assert "node-z" in client.get("/nodes").text  # its claim, though it has no heartbeat
    assert ids(client.get("/timers?state=running").text) == ["r-1"]
    preview = client.get("/bulk/cancel-flow?flow=flow-x").text
    assert preview_count(preview) == 4
    done = client.post("/bulk/cancel-flow", data=confirm_form(preview))
    assert 'id="bulk-done">4 done<' in done.text
    assert [store.exists(f"b-{n}") for n in range(4)] == [False] * 4 and store.exists("k-1")


def test_flowsched_console_takes_a_postgresql_uri_and_a_table(
    postgres_url: str, store: PostgresTimerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    from typer.testing import CliRunner

    from flowsched.cli import build_app

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda application, **_: seen.update(app=application))
    store.put(ScheduleItem("cli-1", ScheduleKind.TIMER, store.now() + HOUR, handler="h"))
    args = ["console", "--uri", postgres_url, "--table", store.table]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert f"table {store.table}" in result.output
    with TestClient(seen["app"], base_url="http://127.0.0.1") as client:
        assert ids(client.get("/timers").text) == ["cli-1"]
    missing = CliRunner().invoke(build_app(), [*args[:3], "--table", "fs_not_a_table"])
    assert missing.exit_code == 2 and "no flowsched timers table fs_not_a_table" in missing.output


def test_the_audit_is_a_table_that_outlives_the_console(
    store: PostgresTimerStore, console: Callable[..., TestClient]
) -> None:
    """The audit on PostgreSQL is ``<table>_audit``: a console started later (a restart, or
    another replica) lists what an earlier one recorded, filtered and paged like MongoDB's;
    a bulk entry is found by any id it lists."""
    now = store.now()
    for n in range(3):
        store.put(ScheduleItem(f"a-{n}", ScheduleKind.TIMER, now + HOUR, "flow-a", handler="h"))
    first = console(users=USERS)
    assert "a-0" not in first.get("/audit").text  # no table yet: an empty list, no error
    sign_in(first, "alice")
    page = first.get("/timer?id=a-0").text
    generation = re.search(r'name="generation" value="(\d+)"', page)
    assert generation is not None
    form = {"csrf": csrf_of(page), "id": "a-0", "generation": generation.group(1)}
    assert first.post("/timer/cancel", data=form).status_code == 200
    from test_console_bulk import confirm_form

    preview = first.get("/bulk/cancel-flow?flow=flow-a").text
    assert first.post("/bulk/cancel-flow", data=confirm_form(preview)).status_code == 200
    first.close()

    later = console(users=USERS)
    sign_in(later, "alice")
    audit = later.get("/audit?action=cancel").text
    assert "a-0" in audit and "alice" in audit
    assert "a-2" not in audit  # the bulk cancel is another action
    by_item = later.get("/audit?item_id=a-2").text
    assert "2 ids" in by_item and "bulk_cancel" in by_item  # found by an id it lists
    entries = store_audit(store)
    assert [e[0] for e in entries] == sorted(e[0] for e in entries)  # seq grows with time
    assert {e[1] for e in entries} >= {"sign_in", "cancel"}
    assert any(e[1].startswith("bulk_cancel") for e in entries), entries
    refused = later.get("/audit?outcome=refused").text
    assert "a-0" not in refused
    # Paging: one entry a page, newest first, continued by the 'next' cursor.
    one = later.get("/audit?limit=1").text
    following = re.search(r'href="(/audit\?[^"]+)" id="next-page"', one)
    assert following is not None, one
    second = later.get(following.group(1).replace("&amp;", "&"))
    assert second.status_code == 200 and second.text != one
    forged = "WyIyMDI2LTAxLTAxVDAwOjAwOjAwKzAwOjAwIiwgImFiYyJd"  # a cursor with a text key
    assert later.get(f"/audit?after={forged}").status_code == 400


def store_audit(store: PostgresTimerStore) -> list[tuple[int, str]]:
    with store.pool.connection() as conn:
        rows = conn.execute(f'SELECT seq, action FROM "{store.table}_audit" ORDER BY at, seq')
        return [(int(row[0]), str(row[1])) for row in rows.fetchall()]
