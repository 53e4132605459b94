"""Jobs whose worker died mid-job, handed back to RQ at once instead of after RQ's own timeouts.

RQ 3.0 finds an abandoned job only when its entry in the StartedJobRegistry expires: for a SimpleWorker
that is the job's timeout + 60 s after it started (labelling: 6 minutes), and only at the next
maintenance run (every 10 minutes by default). Then `StartedJobRegistry.cleanup` retries it while
`job.retries_left` lasts (core.queues.CRASH_RETRY) and moves it to the FailedJobRegistry after. A worker
starting on this host knows better: an execution whose worker is gone, or was a process of this host that
no longer exists, was abandoned. Its entry is expired now and RQ's own cleanup does the rest; a job that
cleanup fails (no retry left) loses the issue text that travelled beside it (core.queues.JOB_TEXT_KEY).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterable

from redis import Redis
from rq import Worker
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry
from rq.utils import parse_composite_key

from core.queues import SERIALIZER, forget_text

log = logging.getLogger(__name__)

MAINTENANCE_INTERVAL = 30  # seconds: RQ's cleanup and scheduler takeover every half minute, not every 10
# RQ runs maintenance only between jobs, and an idle worker waits for one for worker_ttl - 15 s (405 s by
# default): a scheduled retry whose scheduler died with Redis then waited minutes for a worker to take the
# scheduler's lock over. With this TTL an idle worker wakes every MAINTENANCE_INTERVAL seconds.
WORKER_TTL = MAINTENANCE_INTERVAL + 15


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def requeue_abandoned(redis: Redis, queue_names: Iterable[str], *,
                      alive: Callable[[int], bool] = pid_alive) -> list[str]:
    """Retry (or fail, when no retries are left) the started jobs whose worker is dead; their ids."""
    host, abandoned = socket.gethostname(), []
    for name in queue_names:
        registry = StartedJobRegistry(name, connection=redis, serializer=SERIALIZER)
        for entry in redis.zrange(registry.key, 0, -1):
            job_id, execution_id = parse_composite_key(entry.decode() if isinstance(entry, bytes) else entry)
            if _worker_is_dead(redis, job_id, execution_id, host, alive):
                redis.zadd(registry.key, {entry: 1}, xx=True)  # expired long ago: cleanup takes it
                abandoned.append(job_id)
        if abandoned:
            registry.cleanup(timestamp=1)
    for job_id in abandoned:
        log.warning("job %s was abandoned by a dead worker: handed back to RQ (retried or failed)", job_id)
        if redis.hget(Job.key_for(job_id), "status") in (None, JobStatus.FAILED.value.encode()):
            forget_text(redis, job_id)  # failed (or gone): it never runs again, nor needs its text
    return abandoned


def _worker_is_dead(redis: Redis, job_id: str, execution_id: str, host: str,
                    alive: Callable[[int], bool]) -> bool:
    try:
        execution = Execution.fetch(execution_id, job_id, redis)
    except ValueError:  # the execution's own key expired: RQ's cleanup already knows
        return False
    worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + execution.worker_name, connection=redis)
    if worker is None:
        return True
    return worker.hostname == host and worker.pid is not None and worker.pid != os.getpid() and not alive(worker.pid)
