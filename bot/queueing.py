"""Queue names, job-id rules and enqueueing; the web process's only contact with Redis.

Job functions are named by import path, so enqueueing never imports the worker's code (nor torch).
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from redis import Redis
from rq import Queue, Retry

log = logging.getLogger(__name__)

LABELING_QUEUE = "labeling"  # issues to classify and label: latency matters
FEEDBACK_QUEUE = "feedback"  # label decisions, comments, backfills: cheap, order-insensitive
TRAINING_QUEUE = "training"  # fine-tuning runs: minutes each, one at a time
QUEUES = (LABELING_QUEUE, FEEDBACK_QUEUE, TRAINING_QUEUE)

DELIVERY_KEY = "issue-sorter:delivery:{}"  # SET NX marker: a redelivered delivery makes no second job
DELIVERY_TTL_SECONDS = 7 * 24 * 3600  # GitHub lets you redeliver for a few days; the DB remembers forever
JOB_TIMEOUT = {LABELING_QUEUE: 300, FEEDBACK_QUEUE: 1800, TRAINING_QUEUE: 6 * 3600}
# A job that crashed (DB restarting, worker killed) is retried by RQ; GitHub's own transient
# errors are rescheduled by the job itself at the time GitHub asks for (see bot.jobs).
CRASH_RETRY = Retry(max=3, interval=[10, 60, 300])


def job_id(kind: str, delivery_id: str) -> str:
    """`label_issue--<delivery>`; RQ allows only letters, digits, `_` and `-` in job ids."""
    safe = delivery_id if re.fullmatch(r"[A-Za-z0-9_-]{1,100}", delivery_id) else (
        hashlib.sha256(delivery_id.encode()).hexdigest()[:40])
    return f"{kind}--{safe}"


def make_queue(redis: Redis, name: str) -> Queue:
    return Queue(name, connection=redis, default_timeout=JOB_TIMEOUT[name])


def enqueue_once(redis: Redis, queue_name: str, func: str, delivery_id: str, kwargs: dict[str, Any]) -> bool:
    """Enqueue `func(**kwargs)` unless this delivery was already enqueued; True when a job was made.

    Raises redis.exceptions.RedisError when Redis is unreachable; the caller answers 503 so GitHub
    marks the delivery failed and it can be redelivered.
    """
    marker = DELIVERY_KEY.format(delivery_id)
    if not redis.set(marker, queue_name, nx=True, ex=DELIVERY_TTL_SECONDS):
        log.info("delivery %s already enqueued; ignoring the redelivery", delivery_id)
        return False
    try:
        make_queue(redis, queue_name).enqueue(
            func, kwargs=kwargs, job_id=job_id(func.rsplit(".", 1)[-1], delivery_id),
            retry=CRASH_RETRY, failure_ttl=30 * 24 * 3600)
    except Exception:
        redis.delete(marker)  # let GitHub's redelivery try again
        raise
    return True
