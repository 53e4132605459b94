"""`issue-sorter cron`: RQ's cron scheduler with the periodic jobs of both applications, enqueued as JSON.

RQ 3.0's `CronJob.enqueue` builds its Queue without a serializer, so `rq cron` enqueues pickles whatever
the workers read, and takes no serializer. `ContractCronJob` enqueues through core.queues instead (its
serializer and job options); the scheduler is otherwise RQ's own (registry, heartbeat, healthcheck).
"""

from __future__ import annotations

from redis import Redis
from rq import cron_job_registry
from rq.cron import CronJob, CronScheduler
from rq.defaults import DEFAULT_CRON_JOB_HISTORY_LIMIT, DEFAULT_CRON_JOB_HISTORY_TTL
from rq.job import Job

from bot.jobs import clear_unconfirmed, redeliver_failed
from core import queues
from core.settings import Settings
from trainer.jobs import retrain_due

RETENTION_INTERVAL = 86400  # seconds: the retention of unconfirmed issue text is checked daily


class ContractCronJob(CronJob):
    """RQ's CronJob, enqueueing on core.queues' queue (JSON, nothing kept past KEEP_SECONDS)."""

    def enqueue(self, connection: Redis) -> Job:
        """RQ 3.0's CronJob.enqueue with our queue: the job, its history and the registry in one round trip."""
        queue = queues.make_queue(connection, self.queue_name)
        with connection.pipeline() as pipeline:
            # retried like the bot's jobs: a sweep or the weekly retraining check a worker died under runs
            # again now, not one interval later (RQ's cron gives its jobs no retries)
            job = queue.enqueue(self.func, args=self.args, kwargs=self.kwargs, pipeline=pipeline,
                                **queues.job_options(retry=queues.CRASH_RETRY, **self.job_options))
            enqueued = job.enqueued_at.timestamp()
            pipeline.zadd(self.job_history_key, {job.id: enqueued})
            pipeline.zremrangebyrank(self.job_history_key, 0, -(DEFAULT_CRON_JOB_HISTORY_LIMIT + 1))
            pipeline.expire(self.job_history_key, DEFAULT_CRON_JOB_HISTORY_TTL)
            cron_job_registry.add(self.name, pipeline, enqueue_timestamp=enqueued)
            pipeline.execute()
        return job


class ContractCronScheduler(CronScheduler):
    """RQ's CronScheduler whose jobs are ContractCronJobs."""

    def register(self, func, queue_name: str, **options) -> CronJob:
        job = ContractCronJob(queue_name, func=func, **options)
        self._cron_jobs.append(job)
        return job


def make_scheduler(redis: Redis, settings: Settings) -> ContractCronScheduler:
    """The scheduler with every periodic job at its configured interval."""
    scheduler = ContractCronScheduler(connection=redis)
    periodic = [(retrain_due, queues.RETRAIN_DUE, settings.retrain_interval),
                (redeliver_failed, queues.REDELIVER_FAILED, settings.redelivery_interval)]
    if settings.unconfirmed_retention_days is not None:
        periodic.append((clear_unconfirmed, queues.CLEAR_UNCONFIRMED, RETENTION_INTERVAL))
    for func, spec, interval in periodic:
        scheduler.register(func, spec.queue, interval=interval, job_timeout=queues.JOB_TIMEOUT[spec.queue])
    return scheduler


def run_cron(settings: Settings) -> None:
    """Enqueue the periodic jobs until stopped (SIGTERM or SIGINT)."""
    make_scheduler(Redis.from_url(settings.redis_url), settings).start()
