"""enqueue_once: one script run per delivery. Redis dying around it leaves the marker and the job both or
neither, so a delivery is never lost (the redelivery is queued) nor queued twice (the redelivery is a
duplicate); and what it writes is the job RQ itself would write."""

from __future__ import annotations

import threading

import pytest
from redis.commands.core import Script
from redis.exceptions import ConnectionError as RedisConnectionError
from rq.job import Job

from bot.intake import queueing
from core import metrics
from core.queues import JOB_TEXT_KEY, LABEL_ISSUE, LABELING_QUEUE, SERIALIZER, enqueue, make_queue

pytestmark = pytest.mark.redis
KWARGS = {"delivery_id": "d-1", "installation_id": 1, "repo": "o/r", "number": 1, "action": "opened",
          "snapshot": {"title": "Crash on start", "body": "It crashes.", "labels": []}}


def test_redis_unreachable_at_enqueue_leaves_no_marker_and_the_redelivery_is_queued_once(redis, monkeypatch):
    def gone(*_args, **_kwargs):
        raise RedisConnectionError("Connection closed by server.")

    with monkeypatch.context() as patched:
        patched.setattr(Script, "__call__", gone)
        with pytest.raises(RedisConnectionError):
            queueing.enqueue_once(redis, LABEL_ISSUE, "d-1", KWARGS, body_sha256="a" * 64)
    assert redis.exists(queueing.DELIVERY_KEY.format("d-1")) == 0  # the sweep will ask for it again
    assert redis.exists(queueing.BODY_KEY.format("a" * 64)) == 0  # and the body is not taken for a replay
    assert make_queue(redis, LABELING_QUEUE).count == 0

    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-1", KWARGS, body_sha256="a" * 64) is True
    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-1", KWARGS, body_sha256="a" * 64) is False
    assert make_queue(redis, LABELING_QUEUE).job_ids == ["label_issue--d-1"]


def test_an_answer_lost_after_the_script_ran_makes_the_redelivery_a_duplicate(redis, monkeypatch):
    """The script ran but the connection broke before its answer: the receiver answered 503, GitHub
    redelivers, and the redelivery must not make a second job."""
    ran = Script.__call__

    def ran_then_broke(self, *args, **kwargs):
        ran(self, *args, **kwargs)
        raise RedisConnectionError("Connection closed by server.")

    with monkeypatch.context() as patched:
        patched.setattr(Script, "__call__", ran_then_broke)
        with pytest.raises(RedisConnectionError):
            queueing.enqueue_once(redis, LABEL_ISSUE, "d-2", KWARGS)

    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-2", KWARGS) is False
    assert make_queue(redis, LABELING_QUEUE).job_ids == ["label_issue--d-2"]


def test_a_restarted_redis_without_its_scripts_still_queues(redis):
    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-3", KWARGS) is True
    redis.script_flush()  # what a Redis restart does to the script cache
    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-4", KWARGS) is True
    assert make_queue(redis, LABELING_QUEUE).job_ids == ["label_issue--d-3", "label_issue--d-4"]


def test_the_same_delivery_at_once_from_many_requests_is_queued_once(redis):
    results: list[bool] = []
    start = threading.Barrier(8)

    def deliver():
        start.wait()
        results.append(queueing.enqueue_once(redis, LABEL_ISSUE, "d-5", KWARGS, count_event="issues"))

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True]
    assert make_queue(redis, LABELING_QUEUE).job_ids == ["label_issue--d-5"]
    counts = {k.decode(): int(v) for k, v in redis.hgetall(metrics.DELIVERIES_KEY).items()}
    assert counts == {"issues|queued": 1, "issues|duplicate": 7}


def test_a_body_seen_under_another_delivery_is_refused_and_queues_nothing(redis):
    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-6", KWARGS, body_sha256="c" * 64) is True
    with pytest.raises(queueing.ReplayedBody, match="d-6"):
        queueing.enqueue_once(redis, LABEL_ISSUE, "d-7", KWARGS, body_sha256="c" * 64)
    assert redis.exists(queueing.DELIVERY_KEY.format("d-7")) == 0
    assert make_queue(redis, LABELING_QUEUE).job_ids == ["label_issue--d-6"]


def test_the_script_writes_the_job_rq_writes(redis):
    """The job's writes are RQ's own, recorded and replayed in the script: the same hash, TTL, queue and
    text key as RQ's enqueue, and a worker's RQ reads the job back."""
    enqueue(redis, LABEL_ISSUE, KWARGS, job_id="label_issue--by-rq", retry=queueing.CRASH_RETRY)
    queueing.enqueue_once(redis, LABEL_ISSUE, "by-script", KWARGS)
    by_rq, by_script = (redis.hgetall(f"rq:job:label_issue--{name}") for name in ("by-rq", "by-script"))
    moments = {b"created_at", b"enqueued_at"}
    assert {k: v for k, v in by_rq.items() if k not in moments} == \
        {k: v for k, v in by_script.items() if k not in moments}
    assert 0 < redis.ttl("rq:job:label_issue--by-script") <= redis.ttl("rq:job:label_issue--by-rq") + 1
    assert redis.exists(JOB_TEXT_KEY.format("label_issue--by-script")) == 1
    assert make_queue(redis, LABELING_QUEUE).job_ids == ["label_issue--by-rq", "label_issue--by-script"]
    job = Job.fetch("label_issue--by-script", connection=redis, serializer=SERIALIZER)
    assert job.func_name == LABEL_ISSUE.name
    assert job.kwargs["delivery_id"] == "d-1" and "title" not in job.kwargs["snapshot"]
    assert job.retries_left == 3
