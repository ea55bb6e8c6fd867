"""``flowsched timers ... --uri postgresql://... --table T``: the verbs on a PostgreSQL table
(list, show, cancel, pause, resume, dead-letters, requeue, quarantined, stats), built on the
store interface. Skipped with the reason when ``FLOWSCHED_POSTGRES_URL`` is unset."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("psycopg")

from flowsched.cli import build_app
from flowsched.cli.timers_target import take_target
from flowsched.outcomes import DeadLettered
from flowsched.postgres import PostgresTimerStore
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.store.records import Settlement

HOURS = timedelta(hours=5)
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def store(postgres_url: str, fresh_table: Callable[[], str]) -> Iterator[PostgresTimerStore]:
    store = PostgresTimerStore(postgres_url, table=fresh_table())
    yield store
    store.close()


@pytest.fixture
def timers(postgres_url: str, store: PostgresTimerStore) -> Run:
    """``timers(*args)``: ``flowsched timers --uri <server> <args> --table <table>``."""

    def run(*args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(
            build_app(), ["timers", "--uri", postgres_url, *args, "--table", store.table]
        )
        return result.exit_code, result.stdout, result.stderr

    return run


def _seed(store: PostgresTimerStore) -> None:
    due = store.now() + HOURS
    store.put(ScheduleItem("a-1", ScheduleKind.TIMER, due, "flow-1", {"n": 1}, handler="h"))
    store.put(ScheduleItem("a-2", ScheduleKind.ACTION_TIMEOUT, due + HOURS, "flow-1"))
    store.put(ScheduleItem("b-1", ScheduleKind.TIMER, due + 2 * HOURS, handler="h"))


def test_the_connection_options_pick_postgres_only_for_its_uri() -> None:
    assert take_target(["--uri", "mongodb://x/y", "list"]) is None
    assert take_target(["list", "--uri=postgresql://u@h/d", "--table", "t", "--json"]) == (
        "postgresql://u@h/d",
        "t",
        ["list", "--json"],
    )


def test_list_pages_soonest_first_with_filters(store: PostgresTimerStore, timers: Run) -> None:
    _seed(store)
    code, out, _ = timers("list", "--json")
    assert code == 0
    assert [i["id"] for i in json.loads(out)["items"]] == ["a-1", "a-2", "b-1"]
    code, out, _ = timers("list", "--json", "--kind", "TIMER", "--limit", "1")
    page = json.loads(out)
    assert [i["id"] for i in page["items"]] == ["a-1"] and page["next"]
    code, out, _ = timers("list", "--json", "--kind", "TIMER", "--after", page["next"])
    assert [i["id"] for i in json.loads(out)["items"]] == ["b-1"]
    code, out, _ = timers("list")
    assert code == 0 and "a-2" in out and "ACTION_TIMEOUT" in out
    code, _, err = timers("list", "--state", "sleeping")
    assert code == 2 and "--state 'sleeping'" in err


def test_show_prints_the_timer_and_its_history(store: PostgresTimerStore, timers: Run) -> None:
    _seed(store)
    code, out, _ = timers("show", "a-1", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["timer"]["payload"] == {"n": 1} and shown["history"] == []
    code, _, err = timers("show", "nope")
    assert code == 1 and "no timer nope" in err


def test_cancel_pause_resume_act_through_the_store(store: PostgresTimerStore, timers: Run) -> None:
    _seed(store)
    assert timers("pause", "a-1")[:2] == (0, "paused a-1\n")
    code, out, _ = timers("list", "--json", "--state", "paused")
    assert [i["id"] for i in json.loads(out)["items"]] == ["a-1"]
    assert timers("resume", "a-1")[0] == 0
    assert timers("cancel", "b-1")[:2] == (0, "cancelled b-1\n")
    assert not store.exists("b-1")
    assert timers("cancel", "b-1")[0] == 1
    code, out, _ = timers("cancel", "--flow", "flow-1")
    assert code == 0 and "cancelled 2 timer(s)" in out and not store.exists("a-1")
    assert timers("pause", "gone")[0] == 1 and timers("resume", "gone")[0] == 1


def test_dead_letters_requeue_quarantined_and_stats(store: PostgresTimerStore, timers: Run) -> None:
    now = store.now()
    store.put(ScheduleItem("d", ScheduleKind.TIMER, now - timedelta(seconds=1), handler="h"))
    [claim] = store.claim_due({"h:h"}, "n1", timedelta(seconds=30), 10)
    dead = DeadLetter(claim.item, 3, "RuntimeError: down", now)
    store.settle([Settlement(claim, DeadLettered(dead))])
    code, out, _ = timers("dead-letters", "--json")
    assert code == 0 and [(d["id"], d["error"]) for d in json.loads(out)] == [
        ("d", "RuntimeError: down")
    ]
    code, out, _ = timers("stats", "--json")
    assert json.loads(out)["states"] == {"dead": 1}
    code, out, _ = timers("requeue", "d")
    assert code == 0 and out.startswith("requeued d") and store.exists("d")
    assert timers("requeue", "d")[0] == 1
    code, out, _ = timers("quarantined", "--json")
    assert code == 0 and json.loads(out) == []


def test_an_unreachable_server_is_one_line_and_exit_2(fresh_table: Callable[[], str]) -> None:
    result = CliRunner().invoke(
        build_app(),
        ["timers", "list", "--uri", "postgresql://nobody@127.0.0.1:1/none", "--table", "t"],
    )
    assert result.exit_code == 2 and "127.0.0.1:1" in result.stderr


def test_a_mongodb_only_verb_names_the_postgres_ones(timers: Run) -> None:
    code, _, err = timers("nodes")
    assert code == 2 and "timers nodes: not a verb on PostgreSQL" in err and "requeue" in err


def test_a_table_that_is_not_there_is_said_not_made(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    result = CliRunner().invoke(
        build_app(), ["timers", "--uri", postgres_url, "--table", table, "list"]
    )
    assert result.exit_code == 2 and f"no flowsched timers table {table}" in result.stderr
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        made = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    assert made == (None,)


def test_a_config_with_a_postgres_block_picks_its_table(
    postgres_url: str, store: PostgresTimerStore, tmp_path: Path
) -> None:
    _seed(store)
    conf = tmp_path / "application.conf"
    conf.write_text(f'ipf-scheduler.postgres {{ url = "{postgres_url}", table = "{store.table}" }}')
    result = CliRunner().invoke(build_app(), ["timers", "--config", str(conf), "stats", "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["states"] == {"scheduled": 3}
    mongo = tmp_path / "mongo.conf"
    mongo.write_text('ipf-scheduler.mongodb.uri = "mongodb://localhost/ipf"')
    assert take_target(["--config", str(mongo), "stats"]) is None
