"""What a job leaves in Redis: JSON, never a pickle; ids, never the issue's text, once it failed, was retried
or was rescheduled; and nothing of it kept longer than 7 days.

Through the real pipeline (signed delivery → Redis → RQ worker → the fake GitHub over HTTP), scanning every
key and value of the test database, decompressed and decoded as RQ stores them.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json
import pickle
import time
import zlib

import pytest
from rq.job import Job
from rq.registry import FailedJobRegistry, ScheduledJobRegistry
from rq.scheduler import RQScheduler
from sqlalchemy import select

from bot import context, jobs
from bot.intake import events
from bot.worker import build_context
from core.db import session_scope
from core.queues import (
    FEEDBACK_QUEUE,
    JOB_TEXT_KEY,
    KEEP_SECONDS,
    LABELING_QUEUE,
    QUEUES,
    REDELIVER_FAILED,
    RETRAIN_DUE,
    SERIALIZER,
    TRAINING_QUEUE,
)
from core.settings import Settings
from core.tables import IssueRecord, Prediction
from issue_sorter.cron import make_scheduler
from tests.bot.conftest import REPO, deliver, issue_payload, run_worker

pytestmark = pytest.mark.redis
TITLE = "Kettle overheats near the zanzibar-quartz valve"
BODY = "Private details: tangerine-osprey-4417 is the serial number of my kettle."
EDITED = "Kettle overheats (edited on GitHub)"


def blobs(redis) -> dict[str, list[bytes]]:
    """Every key with every field, member and value it holds, as bytes."""
    found = {}
    for key in redis.scan_iter(count=1000):
        kind = redis.type(key).decode()
        if kind == "string":
            values = [redis.get(key)]
        elif kind == "hash":
            values = [part for item in redis.hgetall(key).items() for part in item]
        elif kind == "list":
            values = redis.lrange(key, 0, -1)
        elif kind == "set":
            values = list(redis.smembers(key))
        elif kind == "zset":
            values = redis.zrange(key, 0, -1)
        elif kind == "stream":
            values = [part for _, fields in redis.xrange(key) for item in fields.items() for part in item]
        else:
            raise AssertionError(f"{key!r} is a {kind}: this scan does not read it")
        found[key.decode()] = [value if isinstance(value, bytes) else str(value).encode() for value in values]
    return found


def decoded(value: bytes) -> list[str]:
    """The value as stored, and as RQ would read it: base64-decoded (results), zlib-decompressed (job data,
    errors), then JSON or pickle."""
    forms = [value]
    try:
        forms.append(base64.b64decode(value, validate=True))
    except binascii.Error:
        pass
    for form in list(forms):
        try:
            forms.append(zlib.decompress(form))
        except zlib.error:
            pass
    texts = [form.decode("utf-8", "replace") for form in forms]
    for form in forms:
        for load in (json.loads, pickle.loads):  # pickle: this test's own database, to catch a regression
            try:
                texts.append(repr(load(form)))
            except Exception:  # noqa: BLE001 - not that format
                pass
    return texts


def keys_holding(redis, *needles: str) -> list[str]:
    return sorted(key for key, values in blobs(redis).items()
                  if any(needle in text for value in values for text in decoded(value) for needle in needles))


def assert_nothing_kept_past_a_week(redis, job_id: str) -> None:
    """Every key of the job expires within 7 days; the registries naming it are indexes of ids."""
    for key, values in blobs(redis).items():
        ttl = redis.ttl(key)
        assert ttl <= KEEP_SECONDS, f"{key} is kept {ttl} s"
        if job_id in key:
            assert 0 < ttl, f"{key}, a key of the job, never expires"
    failed = FailedJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    for _, expires in redis.zrange(failed.key, 0, -1, withscores=True):
        assert expires <= time.time() + KEEP_SECONDS + 5


def move_scheduled_jobs_now(redis, queue: str = LABELING_QUEUE) -> None:
    """Let the scheduled jobs' time come, and do what a worker's scheduler does each second."""
    registry = ScheduledJobRegistry(queue, connection=redis, serializer=SERIALIZER)
    for job_id in registry.get_job_ids():
        redis.zadd(registry.key, {job_id: time.time() - 1})
    scheduler = RQScheduler([queue], connection=redis, serializer=SERIALIZER)
    scheduler.acquire_locks()
    scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()


def open_issue(fake_github, client, payload, delivery: str):
    fake_github.add_issue(REPO, 1, TITLE, BODY)
    response = deliver(client, "issues", issue_payload(payload, "opened", 1, title=TITLE, body=BODY), delivery)
    assert response.status_code == 202


def test_a_queued_job_is_json_with_its_text_beside_it_and_the_worker_runs_it(worker_context, fake_github, client,
                                                                             payload, redis):
    open_issue(fake_github, client, payload, "d-json")
    job_key = "rq:job:label_issue--d-json"
    data = zlib.decompress(redis.hget(job_key, "data"))
    assert not data.startswith(b"\x80")  # a pickle's first byte (PROTO)
    func, instance, args, kwargs = json.loads(data)
    assert (func, instance, args) == ("bot.jobs.label_issue", None, [])
    assert kwargs["number"] == 1 and {"title", "body"}.isdisjoint(kwargs["snapshot"])  # ids, not text
    assert keys_holding(redis, TITLE, BODY) == [JOB_TEXT_KEY.format("label_issue--d-json")]
    assert 0 < redis.ttl(JOB_TEXT_KEY.format("label_issue--d-json")) <= 24 * 3600

    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) != []
    assert redis.hget(job_key, "status") == b"finished"
    (result,) = redis.xrange("rq:results:label_issue--d-json")
    assert json.loads(base64.b64decode(result[1][b"return_value"])) == "applied"  # results too are JSON
    assert keys_holding(redis, TITLE, BODY) == []  # the finished job's text went with it


def test_a_failed_job_leaves_no_issue_text_in_redis_and_nothing_past_a_week(bare_context, fake_github, client,
                                                                            payload, redis):
    """No model is promoted: every run raises, RQ retries it 3 times (CRASH_RETRY), then fails it."""
    open_issue(fake_github, client, payload, "d-fail")
    run_worker(redis)
    scheduled = ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert scheduled.get_job_ids() == ["label_issue--d-fail"]  # retried: ids only from now on
    assert keys_holding(redis, TITLE, BODY) == []
    assert_nothing_kept_past_a_week(redis, "label_issue--d-fail")
    for _ in range(3):
        move_scheduled_jobs_now(redis)
        run_worker(redis)
    failed = FailedJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert failed.get_job_ids() == ["label_issue--d-fail"]
    assert keys_holding(redis, TITLE, BODY) == []
    assert_nothing_kept_past_a_week(redis, "label_issue--d-fail")
    assert len(fake_github.calls("GET", rf"/repos/{REPO}/issues/1")) == 4  # each retry read the issue again


@pytest.fixture
def fresh_window(worker_context):
    """The fresh window as in production: the first run takes the delivery's copy and reads nothing."""
    worker_context.settings = dataclasses.replace(worker_context.settings, fresh_delivery_seconds=3600.0)
    return worker_context


def test_a_job_rescheduled_for_a_rate_limit_keeps_no_text_and_labels_from_githubs_copy(fresh_window, fake_github,
                                                                                      client, payload, redis):
    reset = int(time.time()) + 120
    fake_github.fail_next("POST", rf"/repos/{REPO}/issues/1/labels", 403,
                          headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
    open_issue(fake_github, client, payload, "d-rate")
    run_worker(redis)
    assert fake_github.calls("GET", rf"/repos/{REPO}/issues/1") == []  # the fast path: the delivery's copy
    scheduled = ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert scheduled.get_job_ids() == ["label_issue--d-rate--retry1"] and fake_github.issue_labels(REPO, 1) == []
    assert keys_holding(redis, TITLE, BODY) == []
    assert_nothing_kept_past_a_week(redis, "label_issue--d-rate--retry1")

    # edited meanwhile (the fake's copy is dated in whole seconds: later than the delivery's by 2 s)
    fake_github.add_issue(REPO, 1, EDITED, BODY, created_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2))
    move_scheduled_jobs_now(redis)
    run_worker(redis)
    assert len(fake_github.calls("GET", rf"/repos/{REPO}/issues/1")) == 1
    assert len(fake_github.issue_labels(REPO, 1)) == 1
    with session_scope(fresh_window.sessionmaker) as session:
        assert [p.outcome for p in session.scalars(select(Prediction))] == ["applied"]
        assert session.scalars(select(IssueRecord.title)).one() == EDITED
    assert keys_holding(redis, TITLE, BODY) == []


def event_without_text(payload, action: str) -> dict:
    event = events.parse("issues", f"d-{action}", issue_payload(payload, action, 1, title=TITLE, body=BODY,
                                                                 labels=["bug"], label="bug"))
    kwargs = event.job_kwargs()
    del kwargs["snapshot"]["title"], kwargs["snapshot"]["body"]  # what a retried job carries
    return kwargs


def test_a_retried_feedback_job_takes_the_issue_text_from_github(bare_context, fake_github, payload):
    fake_github.add_issue(REPO, 1, EDITED, "GitHub's body", labels=["bug"])
    jobs.record_issue_event(**event_without_text(payload, "labeled"))
    with session_scope(bare_context.sessionmaker) as session:
        issue = session.scalars(select(IssueRecord)).one()
        assert (issue.title, issue.body, issue.confirmed_label) == (EDITED, "GitHub's body", "bug")


def test_a_retried_feedback_job_in_dry_run_keeps_the_stored_text(settings, sessions, redis, payload):
    context.configure(build_context(settings, redis=redis))  # no App credentials: GitHub cannot be read
    try:
        edited = issue_payload(payload, "edited", 1, title=TITLE, body=BODY)
        jobs.record_issue_event(**events.parse("issues", "d-edited", edited).job_kwargs())
        jobs.record_issue_event(**event_without_text(payload, "labeled"))
    finally:
        context.configure(None)
    with session_scope(sessions) as session:
        issue = session.scalars(select(IssueRecord)).one()
        assert (issue.title, issue.body) == (TITLE, BODY)


def test_the_cron_enqueues_json_jobs_that_the_workers_run(settings, sessions, redis):
    scheduler = make_scheduler(redis, Settings.from_env({}, require_webhook_secret=False))
    enqueued = scheduler.enqueue_jobs()
    assert {job.queue_name for job in enqueued} == {FEEDBACK_QUEUE, TRAINING_QUEUE}
    queued = {}
    for queue in (FEEDBACK_QUEUE, TRAINING_QUEUE):
        (queued[queue],) = [i.decode() for i in redis.lrange(f"rq:queue:{queue}", 0, -1)]
        func, _, _, kwargs = json.loads(zlib.decompress(redis.hget(f"rq:job:{queued[queue]}", "data")))
        assert func in (REDELIVER_FAILED.name, RETRAIN_DUE.name) and kwargs == {}
        assert 0 < redis.ttl(f"rq:job:{queued[queue]}") <= KEEP_SECONDS
    context.configure(build_context(settings, redis=redis))  # dry-run: the sweep says it cannot
    try:
        run_worker(redis, (FEEDBACK_QUEUE,))
    finally:
        context.configure(None)
    job = Job.fetch(queued[FEEDBACK_QUEUE], connection=redis, serializer=SERIALIZER)
    assert job.get_status() == "finished" and job.return_value().startswith("skipped: dry-run")
    assert all(FailedJobRegistry(q, connection=redis, serializer=SERIALIZER).count == 0 for q in QUEUES)


def test_a_comment_job_carries_only_the_command_line(payload):
    body = payload("issue_comment/created.with-installation")
    body["comment"]["body"] = "/issue-sorter retrain\n\nand the rest of what I wrote, which stays on GitHub"
    assert events.parse("issue_comment", "d-c", body).body == "/issue-sorter retrain"
    body["comment"]["body"] = "Thanks! Here is my private log: ..."
    assert events.parse("issue_comment", "d-c", body).body == ""
