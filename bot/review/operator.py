"""The operator's page, for the instance's admins (ISSUE_SORTER_ADMINS): queues, failed jobs with their
error, workers and their last heartbeat, the last training runs and the models serving each scope."""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis
from rq import Queue, Worker
from rq.job import Job
from rq.registry import FailedJobRegistry, StartedJobRegistry
from sqlalchemy import select
from sqlalchemy.orm import Session

from core.queues import QUEUES, SERIALIZER
from core.tables import ModelPromotion, TrainingRun

MAX_FAILED = 50  # failed jobs listed per queue, newest first
ERROR_CHARS = 300  # of a failed job's error: its last line, which names the exception (no issue text)


@dataclass(frozen=True)
class FailedJob:
    queue: str
    job_id: str
    function: str
    error: str
    ended_at: str


def queue_rows(redis: Redis) -> list[dict]:
    return [{"name": name, "waiting": Queue(name, connection=redis, serializer=SERIALIZER).count,
             "running": StartedJobRegistry(name, connection=redis, serializer=SERIALIZER).count,
             "failed": FailedJobRegistry(name, connection=redis, serializer=SERIALIZER).count} for name in QUEUES]


def failed_jobs(redis: Redis) -> list[FailedJob]:
    found = []
    for name in QUEUES:
        registry = FailedJobRegistry(name, connection=redis, serializer=SERIALIZER)
        for job in Job.fetch_many(registry.get_job_ids(0, MAX_FAILED - 1), connection=redis, serializer=SERIALIZER):
            if job is not None:
                found.append(FailedJob(name, job.id, job.func_name, _last_line(job), str(job.ended_at or "")))
    return found


def _last_line(job: Job) -> str:
    lines = (job.latest_result().exc_string if job.latest_result() else job.exc_info or "").strip().splitlines()
    return (lines[-1] if lines else "")[:ERROR_CHARS]


def retry_failed(redis: Redis, queue: str, job_id: str) -> bool:
    """Put a failed job back on its queue; False when it is no longer in the failed registry."""
    if queue not in QUEUES:
        return False
    registry = FailedJobRegistry(queue, connection=redis, serializer=SERIALIZER)
    if job_id not in registry.get_job_ids():
        return False
    registry.requeue(job_id)
    return True


def worker_rows(redis: Redis) -> list[dict]:
    return sorted(({"name": worker.name, "queues": ", ".join(worker.queue_names()), "state": worker.get_state(),
                    "last_heartbeat": worker.last_heartbeat} for worker in Worker.all(connection=redis)),
                  key=lambda row: row["name"])


def training_runs(session: Session, limit: int = 20) -> list[TrainingRun]:
    return list(session.scalars(select(TrainingRun).order_by(TrainingRun.started_at.desc()).limit(limit)))


def serving_models(session: Session) -> list[ModelPromotion]:
    """The newest promotion of each scope: what serves it now."""
    newest: dict[str, ModelPromotion] = {}
    for promotion in session.scalars(select(ModelPromotion).order_by(ModelPromotion.promoted_at,
                                                                      ModelPromotion.id)):
        newest[promotion.scope] = promotion
    return [newest[scope] for scope in sorted(newest)]
