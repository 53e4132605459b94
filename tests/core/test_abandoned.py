"""A job whose worker is SIGKILLed mid-job: what RQ 3.0 does by itself, and what core.abandoned adds.

Real Redis, a real RQ SimpleWorker in its own process, killed while the job runs.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rq import Retry, SimpleWorker
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry
from rq.scheduler import RQScheduler

from core.abandoned import requeue_abandoned
from core.queues import CRASH_RETRY, JOB_TEXT_KEY, SERIALIZER, make_queue
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.redis
QUEUE = "labeling"


def hang_the_first_time(marker: str) -> str:
    """The job: the first run leaves a marker and hangs (to be killed); a retry finds it and finishes."""
    path = Path(marker)
    if not path.exists():
        path.write_text("started")
        time.sleep(120)
    return "finished"


def _worker_in_the_job(redis_url: str, marker: Path) -> subprocess.Popen:
    code = ("import sys; from redis import Redis; from rq import SimpleWorker; from core.queues import SERIALIZER; "
            f"SimpleWorker([{QUEUE!r}], connection=Redis.from_url(sys.argv[1]), serializer=SERIALIZER).work()")
    worker = subprocess.Popen([sys.executable, "-c", code, redis_url], cwd=REPO_ROOT)
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not marker.exists():
        worker.kill()
        pytest.fail("the worker never started the job")
    return worker


def _kill_worker_mid_job(redis_url: str, marker: Path) -> None:
    worker = _worker_in_the_job(redis_url, marker)
    worker.send_signal(signal.SIGKILL)
    worker.wait()


def _enqueue(redis, marker: Path, retry: Retry | None) -> Job:
    return make_queue(redis, QUEUE).enqueue(hang_the_first_time, str(marker), retry=retry)


@pytest.mark.e2e  # a real RQ worker in a process of its own, SIGKILLed
def test_rq_alone_leaves_a_killed_workers_job_started_for_minutes(redis, redis_url, tmp_path):
    job = _enqueue(redis, tmp_path / "marker", CRASH_RETRY)
    _kill_worker_mid_job(redis_url, tmp_path / "marker")
    registry = StartedJobRegistry(QUEUE, connection=redis, serializer=SERIALIZER)
    registry.cleanup()  # what a worker's maintenance does: nothing yet, the entry expires timeout + 60 s on
    assert job.get_status() == JobStatus.STARTED and job.id in registry.get_job_ids(cleanup=False)
    (expiry,) = [score for _, score in redis.zrange(registry.key, 0, -1, withscores=True)]
    assert expiry - time.time() > 300  # labelling's 300 s timeout + 60: six minutes of nothing


@pytest.mark.e2e  # a real RQ worker in a process of its own, SIGKILLed
def test_a_killed_workers_job_is_retried_at_once_and_finishes(redis, redis_url, tmp_path):
    job = _enqueue(redis, tmp_path / "marker", CRASH_RETRY)
    _kill_worker_mid_job(redis_url, tmp_path / "marker")

    redis.set(JOB_TEXT_KEY.format(job.id), '{"snapshot.body": "text"}', ex=60)
    assert requeue_abandoned(redis, [QUEUE]) == [job.id]
    job.refresh()
    assert job.get_status() == JobStatus.SCHEDULED and job.retries_left == CRASH_RETRY.max - 1
    assert redis.exists(JOB_TEXT_KEY.format(job.id))  # it runs again, with the text it was queued with
    scheduled = ScheduledJobRegistry(QUEUE, connection=redis, serializer=SERIALIZER)
    assert 5 < scheduled.get_scheduled_time(job).timestamp() - time.time() <= CRASH_RETRY.intervals[0]
    assert StartedJobRegistry(QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids(cleanup=False) == []

    redis.zadd(scheduled.key, {job.id: time.time() - 1})  # let the 10 s back-off pass
    scheduler = RQScheduler([QUEUE], connection=redis, serializer=SERIALIZER)  # the worker's scheduler, each second
    scheduler.acquire_locks()
    scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()
    SimpleWorker([QUEUE], connection=redis, serializer=SERIALIZER).work(burst=True)
    job.refresh()
    assert job.get_status() == JobStatus.FINISHED and job.return_value() == "finished"
    assert requeue_abandoned(redis, [QUEUE]) == []  # nothing is requeued twice


@pytest.mark.e2e  # a real RQ worker in a process of its own, SIGKILLed
def test_a_job_killed_with_no_retry_left_is_failed_not_dropped_and_loses_its_issue_text(redis, redis_url,
                                                                                       tmp_path):
    job = _enqueue(redis, tmp_path / "marker", None)
    redis.set(JOB_TEXT_KEY.format(job.id), '{"snapshot.body": "text"}', ex=60)  # what an issue's job has beside it
    _kill_worker_mid_job(redis_url, tmp_path / "marker")
    assert requeue_abandoned(redis, [QUEUE]) == [job.id]
    assert job.get_status() == JobStatus.FAILED
    assert job.id in FailedJobRegistry(QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids()
    assert not redis.exists(JOB_TEXT_KEY.format(job.id))  # it never runs again: a failed job keeps ids only


@pytest.mark.e2e  # a real RQ worker in a process of its own
def test_a_live_workers_job_is_left_alone(redis, redis_url, tmp_path):
    job = _enqueue(redis, tmp_path / "marker", CRASH_RETRY)
    worker = _worker_in_the_job(redis_url, tmp_path / "marker")
    try:
        assert requeue_abandoned(redis, [QUEUE]) == []
        assert job.get_status() == JobStatus.STARTED
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()


def _taken_by_a_worker_that_died(redis, queues: list[str]) -> None:
    """What a worker does as it takes the next job (Queue.dequeue_any), and then it is SIGKILLed: it
    never reaches the started registry."""
    from rq import Queue

    Queue.dequeue_any([make_queue(redis, name) for name in queues], timeout=None, connection=redis, serializer=SERIALIZER)


def test_a_job_taken_by_a_one_queue_worker_that_died_is_retried(redis, tmp_path):
    """`issue-sorter run` and compose start one worker per queue because of this: RQ keeps the job in
    the queue's intermediate list and, a minute on, its maintenance hands it back."""
    (tmp_path / "marker").write_text("the first run is over")  # so the job finishes when it runs again
    job = _enqueue(redis, tmp_path / "marker", Retry(max=1))
    _taken_by_a_worker_that_died(redis, [QUEUE])
    queue = make_queue(redis, QUEUE)
    assert queue.count == 0 and queue.intermediate_queue.get_job_ids() == [job.id]

    worker = SimpleWorker([QUEUE], connection=redis, serializer=SERIALIZER)
    worker.clean_registries()  # the first maintenance pass sees it
    redis.set(queue.intermediate_queue.get_first_seen_key(job.id), time.time() - 61)  # a minute passes
    worker.clean_registries()  # the next one gives it back: retried
    assert queue.intermediate_queue.get_job_ids() == [] and queue.job_ids == [job.id]
    SimpleWorker([QUEUE], connection=redis, serializer=SERIALIZER).work(burst=True)
    job.refresh()
    assert job.get_status() == JobStatus.FINISHED and job.return_value() == "finished"


def test_a_job_taken_by_a_two_queue_worker_that_died_is_in_no_list(redis, tmp_path):
    """Why one worker serves one queue: with two RQ pops with BLPOP, and nothing gives the job back."""
    job = _enqueue(redis, tmp_path / "marker", Retry(max=1))
    _taken_by_a_worker_that_died(redis, [QUEUE, "feedback"])
    queue = make_queue(redis, QUEUE)
    worker = SimpleWorker([QUEUE, "feedback"], connection=redis, serializer=SERIALIZER)
    worker.clean_registries()
    redis.set(queue.intermediate_queue.get_first_seen_key(job.id), time.time() - 61)
    worker.clean_registries()
    assert queue.job_ids == [] and queue.intermediate_queue.get_job_ids() == []
    assert job.get_status() == JobStatus.QUEUED  # queued, says RQ, yet in no queue: lost
    assert job.id not in StartedJobRegistry(QUEUE, connection=redis).get_job_ids(cleanup=False)

