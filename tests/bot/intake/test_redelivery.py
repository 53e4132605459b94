"""The redelivery sweep against the fake GitHub over real HTTP: what it asks for, how often, and the CLI.

The story: Redis was down, the receiver answered 503, GitHub marked the deliveries failed and will never
send them again by itself. The sweep finds them in GET /app/hook/deliveries and asks for each, once per failed attempt, up to MAX_REDELIVERIES times.
"""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
import threading

import pytest
import requests
from werkzeug.serving import make_server

from bot import context, jobs
from bot.app import create_app
from bot.github_api.client import GitHubApp
from bot.intake.queueing import DELIVERY_KEY
from bot.intake.redelivery import (
    ASKED_KEY,
    MAX_REDELIVERIES,
    WINDOW,
    Delivery,
    Ledger,
    failed_deliveries,
    parse_since,
    sweep,
    window_start,
)
from bot.worker import build_context
from core import store
from core.db import session_scope
from core.queues import CRASH_RETRY, FEEDBACK_QUEUE, REDELIVER_FAILED, enqueue
from core.settings import ConfigError, Settings
from issue_sorter.cli import main
from issue_sorter.cron import make_scheduler
from tests.bot.conftest import REPO, issue_payload, run_worker
from tests.conftest import WEBHOOK_SECRET

pytestmark = pytest.mark.redis
ATTEMPTS = r"/app/hook/deliveries/\d+/attempts"


def ago(**delta) -> dt.datetime:
    return dt.datetime.now(dt.UTC) - dt.timedelta(**delta)


def asked_guids(fake) -> list[str]:
    """The guids the fake was asked to redeliver (and accepted), in the order asked."""
    guid_of = {item["id"]: item["guid"] for item in fake.deliveries}
    calls = fake.calls("POST", ATTEMPTS)
    return [guid_of[int(call.path.split("/")[4])] for call in calls if call.status == 202]


@pytest.fixture
def app(app_settings):
    return GitHubApp(app_settings.app_id, app_settings.private_key, app_settings.api_url,
                     write_interval=0.0)


@pytest.fixture
def ledger(redis, sessions):
    return Ledger(redis, sessions)


# --- deciding ---------------------------------------------------------------------------------------

def attempt(guid: str, minutes_ago: int, status_code: int, number: int) -> Delivery:
    return Delivery(id=number, guid=guid, delivered_at=ago(minutes=minutes_ago), status_code=status_code,
                    status="", event="issues", action="opened", redelivery=number > 10)


def test_the_newest_attempt_of_each_never_successful_guid_is_chosen_oldest_guid_first():
    attempts = [attempt("late", 5, 503, 1), attempt("early", 50, 0, 2), attempt("early", 20, 502, 11),
                attempt("saved", 40, 503, 3), attempt("saved", 30, 202, 12)]
    chosen = failed_deliveries(attempts, since=ago(hours=1))
    assert [(d.guid, d.id) for d in chosen] == [("early", 11), ("late", 1)]
    assert failed_deliveries(attempts, since=ago(minutes=10)) == [attempts[0]]  # the others are older


def test_since_reads_durations_and_iso_times_and_never_leaves_githubs_window():
    now = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    assert parse_since("90m", now) == now - dt.timedelta(minutes=90)
    assert parse_since("1d12h", now) == now - dt.timedelta(hours=36)
    assert parse_since("2026-12-01T08:00:00Z", now) == dt.datetime(2026, 12, 1, 8, tzinfo=dt.UTC)
    assert parse_since("2026-12-01T08:00", now) == dt.datetime(2026, 12, 1, 8, tzinfo=dt.UTC)  # naive: UTC
    for bad in ("yesterday", "", "2026-12-02T00:00:00Z"):
        with pytest.raises(ValueError, match="--since"):
            parse_since(bad, now)
    assert window_start(now, parse_since("5d", now)) == window_start(now) > now - WINDOW
    assert window_start(now, parse_since("2h", now)) == now - dt.timedelta(hours=2)


# --- the sweep over real HTTP -----------------------------------------------------------------------

def test_only_failed_deliveries_we_never_processed_nor_queued_are_asked_for(fake_github, app, ledger,
                                                                             sessions, redis):
    fake_github.add_delivery(guid="fine", status_code=202, delivered_at=ago(minutes=50))
    fake_github.add_delivery(guid="lost", status_code=503, delivered_at=ago(minutes=40))
    fake_github.add_delivery(guid="processed", status_code=0, delivered_at=ago(minutes=30))  # we were slow
    fake_github.add_delivery(guid="queued", status_code=503, delivered_at=ago(minutes=25))
    fake_github.add_delivery(guid="recovered", status_code=503, delivered_at=ago(minutes=20))
    fake_github.add_delivery(guid="recovered", status_code=202, delivered_at=ago(minutes=10), redelivery=True)
    with session_scope(sessions) as session:
        store.mark_delivery_processed(session, "processed", "label_issue", "opened", "applied")
    redis.set(DELIVERY_KEY.format("queued"), "labeling")

    result = sweep(app, ledger, interval=0)

    assert asked_guids(fake_github) == ["lost"]
    assert [d.guid for d in result.asked] == ["lost"]
    assert (result.listed, result.failed, result.handled, result.left) == (6, 3, 2, 0)
    assert result.summary().startswith("asked GitHub to redeliver 1 of 3 failed deliveries since ")


def test_pages_are_followed_by_the_cursor_of_the_link_header(fake_github, app, ledger):
    failed = set()
    for n in range(250):
        code = 503 if n % 10 == 0 else 202
        item = fake_github.add_delivery(status_code=code, delivered_at=ago(minutes=250 - n))
        if code == 503:
            failed.add(item["guid"])

    result = sweep(app, ledger, interval=0)

    pages = fake_github.calls("GET", "/app/hook/deliveries")
    assert [call.query.get("per_page") for call in pages] == ["100"] * 3
    cursors = [call.query.get("cursor") for call in pages]
    assert cursors[0] is None and all(cursors[1:]) and len(set(cursors)) == 3
    assert result.listed == 250 and set(asked_guids(fake_github)) == failed and len(failed) == 25


def test_deliveries_outside_githubs_three_days_are_neither_read_further_nor_asked_for(fake_github, app,
                                                                                       ledger):
    for n in range(200):
        fake_github.add_delivery(status_code=503, delivered_at=ago(days=4, minutes=n))
    fake_github.add_delivery(guid="two days old", status_code=503, delivered_at=ago(days=2))
    for n in range(100):
        fake_github.add_delivery(status_code=202, delivered_at=ago(minutes=n))

    assert sweep(app, ledger, since=ago(days=1), interval=0).failed == 0  # --since narrows it further
    pages_before = len(fake_github.calls("GET", "/app/hook/deliveries"))
    result = sweep(app, ledger, interval=0)

    assert asked_guids(fake_github) == ["two days old"]
    pages = len(fake_github.calls("GET", "/app/hook/deliveries")) - pages_before
    assert pages == 2  # of 4: the page that reaches past the window is the last one read
    assert ago(days=3) < result.since <= ago(days=3) + dt.timedelta(minutes=11)


def test_a_redelivery_that_failed_too_is_asked_for_again_up_to_the_cap(fake_github, app, ledger, redis):
    """The chaos bench lost 2 of 10,000 issues this way: Redis was down at the delivery and again at its
    redelivery, and the sweep, which asked once per guid, never asked again."""
    for guid in ("a", "b"):
        fake_github.add_delivery(guid=guid, status_code=503, delivered_at=ago(minutes=30))
    assert fake_github.webhook_url is None  # so each redelivery fails too, and is listed as failed

    sweeps = [sweep(app, ledger, interval=0) for _ in range(MAX_REDELIVERIES + 1)]

    assert [sorted(d.guid for d in result.asked) for result in sweeps] == [["a", "b"]] * MAX_REDELIVERIES + [[]]
    assert sorted(d.guid for d in sweeps[-1].given_up) == ["a", "b"]
    assert "2 given up after 3 redeliveries" in sweeps[-1].summary()
    assert [item["redelivery"] for item in fake_github.deliveries].count(True) == 2 * MAX_REDELIVERIES
    newest = max((d for d in sweeps[0].asked if d.guid == "a"), key=lambda d: d.id)
    assert 0 < redis.ttl(ASKED_KEY.format(f"a:{newest.id}")) <= WINDOW.total_seconds()


def test_asks_are_paced_and_capped_per_sweep_and_the_rest_wait_for_the_next(fake_github, app, ledger):
    for n in range(5):
        fake_github.add_delivery(guid=f"lost-{n}", status_code=503, delivered_at=ago(minutes=50 - n))
    sleeps: list[float] = []

    first = sweep(app, ledger, limit=2, sleep=sleeps.append)

    assert [d.guid for d in first.asked] == ["lost-0", "lost-1"] and first.left == 3
    assert sleeps == [1.0]  # one second between two asks, none before the first
    assert [d.guid for d in sweep(app, ledger, limit=2, sleep=sleeps.append).asked] == ["lost-2", "lost-3"]
    # the never asked for first; then, the fake's redeliveries having failed too, the oldest again
    assert [d.guid for d in sweep(app, ledger, limit=2, sleep=sleeps.append).asked] == ["lost-4", "lost-0"]
    assert asked_guids(fake_github) == [f"lost-{n}" for n in range(5)] + ["lost-0"]


def test_github_failing_stops_the_sweep_and_the_next_one_asks_again(fake_github, app, ledger):
    fake_github.add_delivery(guid="lost", status_code=503, delivered_at=ago(minutes=5))
    fake_github.fail_next("GET", "/app/hook/deliveries", 502)
    assert "list" in sweep(app, ledger, interval=0).stopped

    fake_github.fail_next("POST", ATTEMPTS, 500)
    stopped = sweep(app, ledger, interval=0)
    assert stopped.asked == [] and stopped.left == 1 and "500" in stopped.stopped

    assert [d.guid for d in sweep(app, ledger, interval=0).asked] == ["lost"]


def test_a_delivery_github_refuses_to_redeliver_is_reported_and_not_asked_again(fake_github, app, ledger):
    fake_github.add_delivery(guid="refused", status_code=503, delivered_at=ago(minutes=5))
    fake_github.fail_next("POST", ATTEMPTS, 422)

    result = sweep(app, ledger, interval=0)

    assert result.asked == [] and [d.guid for d, _ in result.refused] == ["refused"]
    assert "422" in result.refused[0][1]
    assert sweep(app, ledger, interval=0).refused == [] and len(fake_github.calls("POST", ATTEMPTS)) == 1


def test_the_delivery_endpoints_want_the_apps_jwt(fake_github):
    for method, path in (("GET", "/app/hook/deliveries"), ("POST", "/app/hook/deliveries/1/attempts")):
        answer = requests.request(method, fake_github.url + path, headers={"Authorization": "token ghs_x"},
                                  timeout=5)
        assert answer.status_code == 401


# --- the job, the cron entry, the setting -----------------------------------------------------------

def test_the_job_takes_the_arguments_its_contract_names():
    function = getattr(importlib.import_module(REDELIVER_FAILED.name.rsplit(".", 1)[0]),
                       REDELIVER_FAILED.short_name)
    parameters = inspect.signature(function).parameters
    assert REDELIVER_FAILED.arguments <= parameters.keys() and REDELIVER_FAILED.queue == FEEDBACK_QUEUE
    assert all(p.default is not p.empty for p in parameters.values())  # cron calls it with none


def test_the_job_in_dry_run_says_it_cannot(settings, sessions, redis, fake_github):
    context.configure(build_context(settings, redis=redis))  # no App credentials
    try:
        assert jobs.redeliver_failed() == "skipped: dry-run cannot list the App's webhook deliveries"
    finally:
        context.configure(None)
    assert fake_github.requests == []


def test_cron_sweeps_at_the_configured_interval(redis):
    settings = Settings.from_env({"ISSUE_SORTER_REDELIVERY_INTERVAL": "600"}, require_webhook_secret=False)
    scheduler = make_scheduler(redis, settings)
    sweeps = [job for job in scheduler.get_jobs() if job.func_name == REDELIVER_FAILED.name]
    assert len(sweeps) == 1 and sweeps[0].interval == 600 and sweeps[0].queue_name == FEEDBACK_QUEUE


def test_every_periodic_job_is_retried_when_its_worker_dies(redis):
    """RQ's cron gives its jobs no retries: a sweep a worker died under sat in the failed registry
    (chaos run 2), and a weekly retraining check would wait a week."""
    scheduler = make_scheduler(redis, Settings.from_env({}, require_webhook_secret=False))
    jobs = [cron_job.enqueue(redis) for cron_job in scheduler.get_jobs()]
    assert jobs and all(job.retries_left == CRASH_RETRY.max for job in jobs)


def test_the_interval_setting_has_a_default_and_must_be_positive():
    assert Settings.from_env({}, require_webhook_secret=False).redelivery_interval == 900
    with pytest.raises(ConfigError, match="ISSUE_SORTER_REDELIVERY_INTERVAL"):
        Settings.from_env({"ISSUE_SORTER_REDELIVERY_INTERVAL": "0"}, require_webhook_secret=False)


# --- the operator's command ---------------------------------------------------------------------------

@pytest.fixture
def cli_env(monkeypatch, tmp_path, fake_github, app_key, redis_url, redis):
    for name in ("GITHUB_WEBHOOK_SECRET", "GITHUB_PRIVATE_KEY_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("GITHUB_APP_ID", "1")
    monkeypatch.setenv("GITHUB_PRIVATE_KEY", app_key[0])
    monkeypatch.setenv("GITHUB_API_URL", fake_github.url)
    monkeypatch.setenv("GITHUB_WRITE_INTERVAL", "0")
    assert main(["migrate"]) == 0
    return monkeypatch


def test_redeliver_prints_what_it_asked_for(cli_env, fake_github, capsys):
    fake_github.add_delivery(guid="lost-1", event="issues", action="opened", status_code=503,
                             delivered_at=ago(hours=1))
    fake_github.add_delivery(guid="older", status_code=503, delivered_at=ago(hours=3))

    assert main(["redeliver", "--since", "2h"]) == 0

    out = capsys.readouterr().out
    assert "asked: lost-1 (issues.opened, delivered " in out and "Invalid HTTP Response: 503" in out
    assert "older" not in out and "asked GitHub to redeliver 1 of 1 failed deliveries" in out
    assert asked_guids(fake_github) == ["lost-1"]
    assert main(["redeliver", "--since", "5d"]) == 0  # further back than GitHub keeps: it says so
    out = capsys.readouterr().out
    assert "only the past three days" in out and "asked: older" in out
    # lost-1's redelivery failed too (the fake has no receiver): its new attempt is asked for once more
    assert "asked: lost-1" in out and "asked GitHub to redeliver 2 of 2 failed deliveries" in out


def test_redeliver_again_asks_once_more_for_what_failed_after_an_earlier_ask(cli_env, fake_github, capsys):
    fake_github.add_delivery(guid="still lost", status_code=503, delivered_at=ago(minutes=30))
    fake_github.add_delivery(guid="now fine", status_code=503, delivered_at=ago(minutes=20))
    for _ in range(MAX_REDELIVERIES + 1):  # the last one gives up: every redelivery failed too
        assert main(["redeliver"]) == 0
    assert "given up (its redeliveries failed too; --again asks once more): still lost" in capsys.readouterr().out
    fake_github.add_delivery(guid="now fine", status_code=202, redelivery=True)  # a human's redelivery worked

    assert main(["redeliver", "--again"]) == 0

    assert asked_guids(fake_github) == ["still lost", "now fine"] * MAX_REDELIVERIES + ["still lost"]
    assert "asked GitHub to redeliver 1 of 1 failed deliveries" in capsys.readouterr().out.splitlines()[-1]


def test_redeliver_with_a_bad_since_or_max_says_so_and_asks_nothing(cli_env, fake_github, capsys):
    fake_github.add_delivery(status_code=503)
    assert main(["redeliver", "--since", "last week"]) == 1
    assert "--since takes a duration such as 90m" in capsys.readouterr().err
    assert main(["redeliver", "--max", "-1"]) == 1
    assert "cannot be negative" in capsys.readouterr().err
    assert fake_github.requests == []


def test_redeliver_with_max_0_only_counts(cli_env, fake_github, capsys):
    fake_github.add_delivery(status_code=503)
    assert main(["redeliver", "--max", "0"]) == 0
    assert "redeliver 0 of 1 failed deliveries" in capsys.readouterr().out and asked_guids(fake_github) == []


def test_redeliver_in_dry_run_says_it_cannot_and_asks_nothing(cli_env, fake_github):
    cli_env.delenv("GITHUB_APP_ID")
    cli_env.delenv("GITHUB_PRIVATE_KEY")
    fake_github.add_delivery(status_code=503)
    with pytest.raises(SystemExit, match="cannot ask GitHub in dry-run"):
        main(["redeliver"])
    assert fake_github.requests == []


# --- end to end -------------------------------------------------------------------------------------

@pytest.fixture
def receiver(app_settings, redis, fake_github):
    """Our webhook receiver on a real port, where the fake GitHub sends its redeliveries."""
    server = make_server("127.0.0.1", 0, create_app(app_settings, redis=redis), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    fake_github.webhook_url = f"http://127.0.0.1:{server.server_port}/webhook"
    fake_github.webhook_secret = WEBHOOK_SECRET
    yield fake_github.webhook_url
    server.shutdown()
    thread.join()


@pytest.mark.slow
def test_a_delivery_lost_to_a_503_is_redelivered_queued_and_labelled(worker_context, receiver, fake_github,
                                                                      payload, redis):
    title, body = "App crashes with TypeError when saving", "Steps to reproduce: click save. Traceback: ..."
    fake_github.add_issue(REPO, 7, title, body)
    fake_github.add_delivery(guid="lost-in-outage", status_code=503, delivered_at=ago(minutes=20),
                             body=issue_payload(payload, "opened", 7, title=title, body=body))

    enqueue(redis, REDELIVER_FAILED, {})
    run_worker(redis)  # the sweep asks; the fake redelivers to the receiver; the label job runs

    assert asked_guids(fake_github) == ["lost-in-outage"]
    assert fake_github.deliveries[0]["redelivery"] and fake_github.deliveries[0]["status_code"] == 202
    assert len(fake_github.issue_labels(REPO, 7)) == 1
    with session_scope(worker_context.sessionmaker) as session:
        assert store.is_delivery_processed(session, "lost-in-outage")
    enqueue(redis, REDELIVER_FAILED, {})
    run_worker(redis)
    assert asked_guids(fake_github) == ["lost-in-outage"]  # the redelivery succeeded: nothing to ask
