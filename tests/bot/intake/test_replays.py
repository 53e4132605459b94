"""A captured signed body resent under a new delivery id is refused; GitHub's redeliveries still work;
events older than GitHub's redelivery window are ignored."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import Queue

from bot.github_api.issues import event_time
from bot.intake.queueing import BODY_KEY, REPLAY_WINDOW_SECONDS, body_digest
from core.metrics import DELIVERIES_KEY
from core.queues import FEEDBACK_QUEUE, LABELING_QUEUE, SERIALIZER
from core.settings import Settings
from tests.bot.intake.test_webhooks import deliver

# the receiver with the default age limit, as deployed
pytestmark = [pytest.mark.redis, pytest.mark.settings(max_event_age=Settings(webhook_secret="x").max_event_age)]


def fresh_opened(payload, *, age: dt.timedelta = dt.timedelta(0)) -> bytes:
    body = payload("issues/opened")
    body["installation"] = {"id": 1}
    stamp = (dt.datetime.now(dt.timezone.utc) - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    body["issue"].update(created_at=stamp, updated_at=stamp)
    return json.dumps(body).encode()


def test_the_same_body_under_a_new_delivery_id_is_refused(client, redis, payload):
    body = fresh_opened(payload)
    assert deliver(client, "issues", body, delivery="first").status_code == 202
    replay = deliver(client, "issues", body, delivery="attacker-made-id")
    assert replay.status_code == 409 and "another X-GitHub-Delivery" in replay.json["error"]
    assert Queue(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).job_ids == ["label_issue--first"]


def test_githubs_redelivery_same_body_same_id_still_works_after_a_failed_attempt(client, redis, payload,
                                                                                  monkeypatch):
    """GitHub redelivers the same body under the same X-GitHub-Delivery (the id names the event)."""
    body = fresh_opened(payload)
    monkeypatch.setattr("bot.intake.queueing.enqueue", _failing_enqueue)
    assert deliver(client, "issues", body, delivery="d-1").status_code == 503
    assert not redis.exists(BODY_KEY.format(body_digest(body)))  # the failed attempt left no marker
    monkeypatch.undo()
    assert deliver(client, "issues", body, delivery="d-1").status_code == 202  # the redelivery
    assert deliver(client, "issues", body, delivery="d-1").json["queued"] is False  # and once only
    assert Queue(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).count == 1


def _failing_enqueue(*_args, **_kwargs):
    raise RedisConnectionError("down")


def test_a_body_is_remembered_for_githubs_redelivery_window(client, redis, payload):
    body = fresh_opened(payload)
    deliver(client, "issues", body, delivery="d-1")
    ttl = redis.ttl(BODY_KEY.format(body_digest(body)))
    assert REPLAY_WINDOW_SECONDS - 60 < ttl <= REPLAY_WINDOW_SECONDS
    assert REPLAY_WINDOW_SECONDS >= 3 * 24 * 3600  # GitHub redelivers deliveries of the past 3 days


def test_an_event_older_than_the_window_is_ignored_and_a_recent_one_is_not(client, redis, payload):
    window = dt.timedelta(seconds=REPLAY_WINDOW_SECONDS)
    old = deliver(client, "issues", fresh_opened(payload, age=window + dt.timedelta(minutes=5)), delivery="old")
    assert old.status_code == 200 and "older" in old.json["ignored"]
    recent = deliver(client, "issues", fresh_opened(payload, age=window - dt.timedelta(hours=2)), delivery="new")
    assert recent.status_code == 202
    assert Queue(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).job_ids == ["label_issue--new"]


def test_an_event_ignored_as_too_old_is_counted_as_such_not_as_a_ping(client, redis, payload):
    window = dt.timedelta(seconds=REPLAY_WINDOW_SECONDS)
    deliver(client, "issues", fresh_opened(payload, age=window + dt.timedelta(minutes=5)), delivery="old")
    deliver(client, "ping", json.dumps({"zen": "Keep it logically awesome."}).encode(), delivery="p-1")
    assert redis.hgetall(DELIVERIES_KEY) == {b"issues|too_old": b"1", b"ping|ping": b"1"}


def test_an_old_comment_on_an_old_issue_is_ignored(client, redis, payload):
    body = payload("issue_comment/created")  # 2019, as GitHub published it
    body["comment"]["body"] = "/issue-sorter retrain"
    response = deliver(client, "issue_comment", json.dumps(body).encode(), delivery="c-1")
    assert response.status_code == 200 and Queue(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).count == 0


def test_event_time_is_the_newest_issue_or_comment_update(payload):
    body = payload("issue_comment/created")
    body["comment"]["updated_at"] = "2026-01-02T03:04:05Z"
    newest = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert event_time(None, None, body["issue"], body["comment"]) == newest
    installation = payload("installation/created")  # not dated by its body: the body markers guard it
    assert event_time(None, None, installation.get("issue"), installation.get("comment")) is None
    body["issue"]["updated_at"] = "not a time"
    assert event_time(None, None, body["issue"], body["comment"]) == newest


def test_the_age_limit_is_a_setting():
    assert Settings.from_env({"GITHUB_WEBHOOK_SECRET": "x", "ISSUE_SORTER_MAX_EVENT_AGE": "0"}).max_event_age == 0
    with pytest.raises(ValueError, match="ISSUE_SORTER_MAX_EVENT_AGE"):
        Settings.from_env({"GITHUB_WEBHOOK_SECRET": "x", "ISSUE_SORTER_MAX_EVENT_AGE": "-1"})
