"""Counters every process adds to in Redis, for `GET /metrics` to read: the web process, the bot's workers
and the training worker are separate processes on any number of machines, so their counts meet in Redis
(a hash per metric), not in one process's memory.

Recording never fails the work it measures: a Redis error here is logged and dropped.
"""

from __future__ import annotations

import bisect
import logging

from redis import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

DELIVERIES_KEY = "issue-sorter:metrics:deliveries"  # field "event|outcome" → count
GITHUB_ERRORS_KEY = "issue-sorter:metrics:github-errors"  # field HTTP status ("none": no answer) → count
JOB_KEY = "issue-sorter:metrics:job:{}"  # per job name: bucket upper bounds → count, plus "sum" and "count"
JOBS_KEY = "issue-sorter:metrics:jobs"  # the set of job names measured
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 21600.0)  # seconds


def count_delivery(redis: Redis, event: str, outcome: str) -> None:
    _safely(lambda: redis.hincrby(DELIVERIES_KEY, f"{event}|{outcome}", 1))


def count_github_error(redis: Redis, status: int | None) -> None:
    _safely(lambda: redis.hincrby(GITHUB_ERRORS_KEY, str(status) if status is not None else "none", 1))


def observe_job(redis: Redis, job: str, seconds: float) -> None:
    """One run of `job` that took `seconds`, in cumulative-bucket form (what Prometheus histograms hold)."""
    first = bisect.bisect_left(DURATION_BUCKETS, seconds)

    def write() -> None:
        with redis.pipeline() as pipe:
            for bound in DURATION_BUCKETS[first:]:
                pipe.hincrby(JOB_KEY.format(job), repr(bound), 1)
            pipe.hincrby(JOB_KEY.format(job), "count", 1)
            pipe.hincrbyfloat(JOB_KEY.format(job), "sum", seconds)
            pipe.sadd(JOBS_KEY, job)
            pipe.execute()

    _safely(write)


def _safely(write) -> None:
    try:
        write()
    except RedisError as error:
        log.warning("metrics not recorded: Redis unavailable (%s)", type(error).__name__)
