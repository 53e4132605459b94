"""The labelling job's plumbing through the real pipeline: signed delivery → Redis → RQ worker with the real
model → the fake GitHub over HTTP. Retries, drops, the model's loading and promotion; the rules themselves
(what is labelled, skipped or handled once) run on the fakes in test_rules.py."""

import dataclasses
import time

import pytest
from rq import Queue
from rq.registry import ScheduledJobRegistry
from rq.scheduler import RQScheduler
from sqlalchemy import event, select

from bot import context, jobs
from bot.worker import build_context
from core import store
from core.classifier import load_classifier
from core.db import session_scope
from core.issue_text import format_issue_text
from core.kinds import labels_for_kinds
from core.queues import LABELING_QUEUE, SERIALIZER
from core.tables import Prediction, WebhookDelivery
from simulation.fake_github import FAILURE_MESSAGES
from tests.bot.conftest import REPO, deliver, issue_payload, run_worker
from tests.sql_statements import statements

pytestmark = [pytest.mark.redis, pytest.mark.slow]
ISSUES = {
    1: ("App crashes with TypeError when saving", "Steps to reproduce: click save. Traceback: TypeError ..."),
    2: ("Add dark mode to the settings page", "It would be great to have a dark theme option."),
    3: ("How do I configure the proxy?", "I could not find in the docs how to set a proxy. Any hints?"),
}


def open_issue(fake_github, client, payload, number: int, delivery: str, **fields):
    title, body = ISSUES[number]
    fake_github.add_issue(REPO, number, title, body, **fields)
    return deliver(client, "issues", issue_payload(payload, "opened", number, title=title, body=body), delivery)


def add_label_calls(fake_github, number: int):
    return fake_github.calls("POST", rf"/repos/{REPO}/issues/{number}/labels")


def predictions(ctx):
    with session_scope(ctx.sessionmaker) as session:
        return session.scalars(select(Prediction).order_by(Prediction.id)).all()


def test_each_issue_gets_the_label_the_promoted_model_predicts_and_the_model_loads_once(
        worker_context, fake_github, client, payload, redis, tiny_model_dir):
    for number in ISSUES:
        assert open_issue(fake_github, client, payload, number, f"d-{number}").status_code == 202
    run_worker(redis)
    assert worker_context.models.loads == 1  # once per worker process, not per job
    reference = load_classifier(tiny_model_dir)  # the same weights, loaded here independently
    mapping = labels_for_kinds(fake_github.repo_labels(REPO))
    for number, (title, body) in ISSUES.items():
        scores = reference.predict([format_issue_text(title, body)])[0]
        expected = mapping[max(scores, key=scores.get)]
        calls = add_label_calls(fake_github, number)
        assert len(calls) == 1 and calls[0].json in ([expected], {"labels": [expected]})
        assert fake_github.issue_labels(REPO, number) == [expected]
    rows = predictions(worker_context)
    assert [row.outcome for row in rows] == ["applied"] * 3
    assert all(set(row.scores) == {"bug", "feature", "question"} for row in rows)
    assert all(abs(sum(row.scores.values()) - 1) < 1e-4 and row.model_version_id for row in rows)


def test_a_github_5xx_is_retried_later_and_then_labels(worker_context, fake_github, client, payload, redis):
    fake_github.fail_next("POST", rf"/repos/{REPO}/issues/1/labels", 502)
    open_issue(fake_github, client, payload, 1, "d-5xx")
    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) == []
    scheduled = ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert scheduled.get_job_ids() == ["label_issue--d-5xx--retry1"]
    time.sleep(2.05)  # retry_base_seconds = 1 in the harness, rounded up to the next whole second
    scheduler = RQScheduler([LABELING_QUEUE], connection=redis, serializer=SERIALIZER)
    scheduler.acquire_locks()
    scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()
    run_worker(redis)
    assert len(fake_github.issue_labels(REPO, 1)) == 1 and len(predictions(worker_context)) == 1


def test_a_rate_limit_is_retried_at_githubs_reset_time(worker_context, fake_github, client, payload, redis):
    reset = int(time.time()) + 120
    fake_github.fail_next("GET", rf"/repos/{REPO}/issues/1", 403,
                          headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
    open_issue(fake_github, client, payload, 1, "d-rate")
    run_worker(redis)
    scheduled = ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    when = scheduled.get_scheduled_time("label_issue--d-rate--retry1").timestamp()
    assert abs(when - reset) < 5


@pytest.mark.parametrize("status,headers,wait", [(429, {"Retry-After": "30"}, 30), (403, {}, 60)])
def test_a_secondary_rate_limit_is_retried_when_github_says(worker_context, fake_github, client, payload,
                                                           redis, status, headers, wait):
    """A secondary limit sends Retry-After, or only its message (then GitHub's advice: a minute)."""
    fake_github.fail_next("POST", rf"/repos/{REPO}/issues/1/labels", status, headers=headers,
                          body={"message": FAILURE_MESSAGES[429]})
    open_issue(fake_github, client, payload, 1, "d-secondary")
    started = time.time()
    run_worker(redis)
    scheduled = ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    when = scheduled.get_scheduled_time("label_issue--d-secondary--retry1").timestamp()
    assert abs(when - started - wait) < 5 and fake_github.issue_labels(REPO, 1) == []
    assert predictions(worker_context) == []  # rolled back: the retry classifies afresh


@pytest.mark.parametrize("method,path,status", [("POST", "/labels", 403), ("GET", "", 404), ("GET", "", 410),
                                                ("POST", "/labels", 422)])
def test_permission_and_missing_issue_errors_are_recorded_and_dropped(worker_context, fake_github, client,
                                                                      payload, redis, method, path, status):
    fake_github.fail_next(method, rf"/repos/{REPO}/issues/1{path}", status)
    open_issue(fake_github, client, payload, 1, "d-drop")
    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) == []
    assert ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids() == []
    with session_scope(worker_context.sessionmaker) as session:
        assert session.get(WebhookDelivery, "d-drop").outcome.startswith(f"dropped: GitHub answered {status}")


def test_dry_run_classifies_and_stores_but_never_calls_github(app_settings, sessions, redis, tiny_model_dir,
                                                              fake_github, client, payload):
    from tests.tiny_model import promote_model

    promote_model(app_settings.database_url, app_settings.model_dir, tiny_model_dir)
    dry = dataclasses.replace(app_settings, app_id=None, private_key=None)
    ctx = build_context(dry, redis=redis)
    context.configure(ctx)
    try:
        deliver(client, "issues", issue_payload(payload, "opened", 7, title="Crash on start", body="segfault"), "d-dry")
        run_worker(redis)
    finally:
        context.configure(None)
    assert fake_github.requests == []
    (row,) = predictions(ctx)
    assert row.outcome == "dry_run" and row.label in ("bug", "feature", "question")


def test_a_promotion_reaches_the_running_worker_without_restart(worker_context, fake_github, client, payload,
                                                                redis, tiny_model_dir, app_settings):
    from tests.tiny_model import promote_model

    open_issue(fake_github, client, payload, 1, "d-v1")
    run_worker(redis)
    new_version = promote_model(app_settings.database_url, app_settings.model_dir, tiny_model_dir)
    open_issue(fake_github, client, payload, 2, "d-v2")
    run_worker(redis)
    first, second = predictions(worker_context)
    with session_scope(worker_context.sessionmaker) as session:
        assert store.serving_model_version(session).version == new_version
        assert second.model_version_id != first.model_version_id
    assert worker_context.models.loads == 2


def test_a_label_job_reads_its_installation_once_and_checks_and_records_its_delivery_in_its_transaction(
        worker_context, fake_github, client, payload, redis):
    """A labelling worker's time outside the model is mostly small database round trips. Before, the
    installation row was read twice (the session keeps a row only while something refers to it), and the
    delivery's check, the serving promotion and the delivery's record each had a transaction of their own
    (a connection checkout with its pre-ping, BEGIN, COMMIT), the record read before it was written."""
    open_issue(fake_github, client, payload, 1, "d-warm")
    run_worker(redis)  # the repository and its installation are known, as in a running service
    open_issue(fake_github, client, payload, 2, "d-count")
    engine, checkouts = worker_context.sessionmaker.kw["bind"], []

    def checkout(*args):
        checkouts.append(1)

    event.listen(engine, "checkout", checkout)
    try:
        with statements(worker_context.sessionmaker) as seen:
            run_worker(redis)
    finally:
        event.remove(engine, "checkout", checkout)

    assert len(add_label_calls(fake_github, 2)) == 1
    selects = [" ".join(sql.split()) for sql in seen if sql.lstrip().startswith("SELECT")]
    assert sum("FROM installations" in sql for sql in selects) == 1
    assert sum("FROM model_promotions" in sql for sql in selects) == 1  # every job: a promotion reaches it
    assert sum("FROM webhook_deliveries" in sql for sql in selects) == 1  # the check; the record is one upsert
    # one transaction from the delivery's check to its record; a second after the decision's checkpoint
    assert len(checkouts) == 2
    assert outcome_of(worker_context, "d-count") == "applied"


def outcome_of(ctx, delivery: str) -> str:
    with session_scope(ctx.sessionmaker) as session:
        return session.get(WebhookDelivery, delivery).outcome


def test_a_label_job_run_again_after_its_delivery_was_recorded_writes_nothing(
        worker_context, fake_github, client, payload, redis):
    """RQ can run a finished job again (the worker died after the job's commit, before RQ marked it done):
    the delivery's record, committed with the decision, stops it before it asks GitHub or the model."""
    open_issue(fake_github, client, payload, 1, "d-again")
    (queued,) = Queue(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).get_jobs()
    kwargs = dict(queued.kwargs)
    run_worker(redis)
    requests = len(fake_github.requests)

    assert jobs.label_issue(**kwargs) == "skipped: delivery already processed"
    assert len(fake_github.requests) == requests and len(add_label_calls(fake_github, 1)) == 1
    assert outcome_of(worker_context, "d-again") == "applied"
